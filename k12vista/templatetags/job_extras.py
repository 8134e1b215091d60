"""Job parameters and results as people read them: named rows, local times, sizes and short
lists, never a Python dict."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.template.defaultfilters import filesizeformat
from django.utils import formats, timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _

from k12vista.line_reasons import row_reason

register = template.Library()

# Keys that many jobs share; any other key is shown as written, with its underscores as spaces.
KEY_NAMES = {
    "path": _("File"), "count": _("Items"), "bytes": _("Size"), "sha256": "SHA-256", "format": _("Format"),
    "created": _("Created"), "unchanged": _("Unchanged"), "updated": _("Updated"), "conflicts": _("Conflicts"),
    "failed": _("Failed"), "warnings": _("Warnings"), "pages": _("Pages"), "questions": _("Questions"),
    "figures": _("Figures"), "document": _("Document"), "run": _("Run"), "queue": _("Queue"), "name": _("Name"),
    "filters": _("Filters"), "seed": _("Seed"), "worker": _("Worker"), "answered": _("Answered"),
    "scored": _("Scored"), "total": _("Total"), "existing": _("Already imported"), "ocr_pages": _("Pages read by OCR"),
}  # fmt: skip
# The ids jobs take as parameters, and the counts their results hold.
KEY_NAMES |= {
    "run_id": _("Run"), "scoring_run_id": _("Scoring run"), "panel_run_id": _("Judge panel"),
    "training_run_id": _("Training run"), "split_run_id": _("Step splitting run"), "source_document_id": _("Import"),
    "inference_run_id": _("Run"), "filter_run_id": _("Filter run"), "export_id": _("Export"), "release": _("Release"),
    "candidate_set": _("Candidate set"), "subjects": _("Subjects"), "params": _("Parameters"), "line": _("Line"),
    "fmt": _("Format"), "file": _("File"), "version": _("Version"), "short_cells": _("Cells short of their target"),
    "id": _("Id"), "conflict": _("Conflicts"), "lines": _("Lines"), "truncated": _("Cut short"),
    "hash_id": _("Hash id"), "reason": _("Reason"), "number": _("Line"), "failed_lines": _("Failed lines"),
    "conflict_lines": _("Lines in conflict"), "failed_lines_truncated": _("Failed lines not all listed"),
    "conflict_lines_truncated": _("Lines in conflict not all listed"),
    "formats": _("Formats read"), "mapped": _("Fields mapped"), "guessed": _("Fields guessed"),
    "type": _("Question type"), "grade": _("Grade"), "subject_grade_tag": _("Subject-grade tag"),
}  # fmt: skip
LIST_SHOWN = 12
TEXT_SHOWN = 300


def _local(value: datetime) -> str:
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return formats.date_format(value.replace(microsecond=0), "Y-m-d H:i:s")


def readable(value: Any, key: str = "") -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    if key == "bytes" and isinstance(value, int):
        return str(filesizeformat(value))
    if isinstance(value, int | float):
        return formats.number_format(value, decimal_pos=None if isinstance(value, int) else 4)
    if isinstance(value, datetime):
        return _local(value)
    if isinstance(value, str):
        moment = parse_datetime(value) if len(value) >= 19 and value[4:5] == "-" else None
        if moment is not None:
            return _local(moment)
        return value if len(value) <= TEXT_SHOWN else value[:TEXT_SHOWN] + "…"
    if isinstance(value, list | tuple):
        shown = ", ".join(readable(v) for v in value[:LIST_SHOWN])
        more = len(value) - LIST_SHOWN
        return shown + (f" … (+{more})" if more > 0 else "")
    if isinstance(value, dict):
        if "reason_code" in value:  # a report's row: its reason worded, not its code and parameters
            worded = row_reason(value)
            value = {k: v for k, v in value.items() if k not in ("reason_code", "reason_params")} | {"reason": worded}
        return "; ".join(f"{name_of(k)}: {readable(v, k)}" for k, v in value.items())
    return str(value)


def name_of(key: str) -> str:
    return str(KEY_NAMES.get(key, key.replace("_", " ")))


@register.filter
def readable_rows(mapping: dict | None) -> list[tuple[str, str]]:
    """[(name, value)] for a job's params or result, in the dict's order."""
    if not isinstance(mapping, dict):
        return []
    return [(name_of(key), readable(value, key)) for key, value in mapping.items()]


@register.filter
def line_reason(row: Any) -> str:
    """An import report row's reason in the reader's language (k12vista.line_reasons)."""
    return row_reason(row)


@register.filter
def local_time(value: datetime | None) -> str:
    return _local(value) if value else "—"
