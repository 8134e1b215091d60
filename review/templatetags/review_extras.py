"""Small display helpers for the audit pages."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def percent(value: float | None, digits: int = 1) -> str:
    """0.975 -> "97.5%"; nothing to show for a rate without items."""
    if value is None:
        return "—"
    return f"{100 * value:.{digits}f}%"


@register.filter
def lookup(mapping: dict, key: str):
    return mapping.get(key) if mapping else None
