"""The guideline panel every task page shows beside its work."""

from __future__ import annotations

from django import template

from k12vista import guidelines
from k12vista.models import Guideline

register = template.Library()


@register.inclusion_tag("k12vista/_guideline.html")
def guideline_panel(kind: str) -> dict:
    return {"guideline": guidelines.current(kind), "kind_label": Guideline.Kind(kind).label, "kind": kind,
            "version_name": guidelines.current_version_name(kind)}  # fmt: skip


@register.filter
def minutes_seconds(seconds: int | None) -> str:
    """Active time as m:ss (h:mm:ss past an hour); a dash where none was recorded."""
    if seconds is None:
        return "—"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
