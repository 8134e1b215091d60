"""Small display helpers for the audit pages."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext

from annotation.models import Question
from review.models import DIMENSIONS, Audit, LotDecision
from review.reports import PENDING

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


@register.filter
def stratum_note(summary: dict | None) -> str:
    """Why a stratum's sample is not what was asked, in the reader's language (the stored note was
    written in whatever language the audit was created in)."""
    if not summary or summary.get("available") is None:
        return (summary or {}).get("note", "")
    available, size = summary["available"], summary.get("size") or 0
    if available == 0:
        return gettext("empty stratum: nothing to sample")
    if size >= available:
        return gettext(
            "the stratum has %(available)d items, not more than the %(size)d asked for: all of it is taken"
        ) % {"available": available, "size": size}
    return ""


@register.filter
def dimension(name: str) -> str:
    """A rated dimension's name (``solution`` -> 参考解答)."""
    for dimensions in DIMENSIONS.values():
        for code, label in dimensions:
            if code == name:
                return str(label)
    return name


@register.filter
def decision(code: str | None) -> str:
    """A lot's decision as people read it: accepted, rejected or still being rated."""
    if not code:
        return ""
    names = {**dict(LotDecision.Decision.choices), PENDING: gettext("Pending (still being rated)")}
    return str(names.get(code, code))


@register.filter
def population(spec: dict | None) -> str:
    """An audit's population in words (``{"kind": "status", "status": "imported"}`` -> 状态为“已导入”的题目)."""
    spec = spec or {}
    kind = spec.get("kind")
    if kind == Audit.Population.STATUS:
        status = dict(Question.Status.choices).get(spec.get("status"), spec.get("status"))
        return gettext("Questions with status “%(status)s”") % {"status": status}
    if kind == Audit.Population.BATCH:
        return gettext("A batch of %(n)d questions listed by hash id") % {"n": len(spec.get("hash_ids") or [])}
    if kind == Audit.Population.IMPORT:
        return gettext("Questions from import #%(id)s") % {"id": spec.get("source_document")}
    if kind == Audit.Population.CANDIDATE_SET:
        return gettext("Candidate set #%(id)s") % {"id": spec.get("candidate_set")}
    if kind == Audit.Population.PEBENCH:
        if spec.get("build"):
            return gettext("PEBench items of build #%(id)s") % {"id": spec["build"]}
        return gettext("All PEBench items")
    return str(kind or "")


@register.filter
def strata_names(strata: list | None) -> str:
    names = dict(Audit.Stratum.choices)
    return gettext(", ").join(str(names.get(s, s)) for s in strata or [])
