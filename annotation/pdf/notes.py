"""What the PDF import says about a paper, stored as a code with parameters and worded when shown.

The import runs in a worker, in no reader's language; its report is read later
by people in theirs (Chinese by default, English available). So each warning is
kept as ``{"code": ..., "params": {...}}`` on the document's import report and
in the flags of the questions next to it, and ``note_text`` words it in the
active language at display time, as k12vista.job_text does for job failures.
An English copy (``english``) is kept beside it for logs and the admin.

This module imports no models: segmentation (no Django) and the importer make
notes, templates word them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from k12vista.line_reasons import reason_wording

Note = dict[str, Any]  # {"code": str, "params": dict}


def note(code: str, **params: Any) -> Note:
    """A note; parameters are kept JSON-plain (str, int, float, lists of those)."""
    return {"code": code, "params": params}


def _range(params: dict[str, Any]) -> str:
    first, last = params["first"], params["last"]
    return str(first) if first == last else f"{first}-{last}"


# Why the vision model could not read the pages (VisionUnavailable.cause), in the active language. A cause
# not here (a lab's own backend) shows the error it gave.
UNAVAILABLE_CAUSES: dict[str, Callable[[dict[str, Any]], str]] = {
    "backend_unset": lambda p: _("SEGMENTATION_BACKEND is not set"),
    "backend_import": lambda p: _("SEGMENTATION_BACKEND %(path)s cannot be imported") % p,
    "backend_not_subclass": lambda p: _("SEGMENTATION_BACKEND %(path)s is not a page segmentation backend") % p,
    "endpoint_unset": lambda p: _("neither SEGMENTATION_ENDPOINT nor OCR_VISION_ENDPOINT names a model endpoint"),
    "endpoint_unknown": lambda p: _("%(setting)s=%(name)s: no model endpoint has that name") % p,
    "endpoint_off": lambda p: _("%(setting)s=%(name)s: the endpoint is switched off") % p,
    "endpoint_not_http": lambda p: _("%(setting)s=%(name)s: only OpenAI-compatible HTTP endpoints can read pages") % p,
    "endpoint_no_images": lambda p: _("%(setting)s=%(name)s: the endpoint does not accept images") % p,
    "endpoint_not_allowed": lambda p: (
        _("the endpoint %(name)s may not be called: its address is outside the allowlist or its key is not set") % p
    ),  # fmt: skip
    "endpoint_refused": lambda p: _("the endpoint %(name)s refused the request: %(error)s") % p,
}


def _unavailable(params: dict[str, Any]) -> str:
    cause = UNAVAILABLE_CAUSES.get(str(params.get("cause", "")))
    return cause(params) if cause else str(params["error"])


# Each code's wording, called in the active language. Unknown codes and parameters that do not fit
# are shown as the code itself (see note_text), never as an error page.
WORDINGS: dict[str, Callable[[dict[str, Any]], str]] = {
    "page_unreadable": lambda p: _("Page %(page)s cannot be read (%(error)s); the other pages were imported.") % p,
    "page_layout": lambda p: (
        _("Page %(page)s could not be laid out in columns (%(error)s); it was read as one column.") % p
    ),  # fmt: skip
    "gap": lambda p: _("Question %(label)s was not found (between %(before)s and %(after)s).") % p,
    "skipped": lambda p: _("Question %(missing)s was not found; the paper goes on with %(next)s.") % p,
    "stated_missing": lambda p: _("The paper says it lacks question(s) %(range)s.") % {**p, "range": _range(p)},
    "duplicate": lambda p: _("Question number %(label)s appears twice.") % p,
    "section_count": lambda p: (
        ngettext(
            "The section “%(heading)s” states %(stated)s question; %(found)s were found.",
            "The section “%(heading)s” states %(stated)s questions; %(found)s were found.",
            int(p["stated"]),
        )
        % p
    ),
    "leftover": lambda p: _("Page %(page)s, column %(column)s: %(chars)s characters went to no question.") % p,
    "answer_unmatched": lambda p: _("Answer %(number)s in the answer section matches no question.") % p,
    "not_exam": lambda p: _("The document does not look like an exam paper: no question was imported.") % p,
    "no_questions": lambda p: _("The document has %(chars)s characters of text but no question was found in it.") % p,
    "page_uncut": lambda p: _("Page %(page)s has %(numbers)s numbered lines but no question was cut from it.") % p,
    "option_unread": lambda p: _("Question %(label)s: the text of option %(option)s was not read.") % p,
    "question_failed": lambda p: _("Question %(label)s was not imported: %(reason)s") % p,
    "question_cleaned": lambda p: (
        _("Question %(label)s was saved without its figures and with its text cleaned: %(reason)s") % p
    ),  # fmt: skip
    "figure_uncropped": lambda p: _("A figure on page %(page)s could not be cropped (%(error)s).") % p,
    "formula_uncropped": lambda p: _("A formula image on page %(page)s could not be cropped (%(error)s).") % p,
    "shared_stem": lambda p: (
        _("Shared material for questions %(range)s is shown with each of them.") % {**p, "range": _range(p)}
    ),
    "repaired_region": lambda p: (
        _("Question %(label)s lies where a person repaired the cut; it was left as they cut it.") % p
    ),  # fmt: skip
    "vision_read": lambda p: _("Page %(page)s was read by the vision model: %(count)s question(s).") % p,
    "vision_reply_bad": lambda p: (
        _("Page %(page)s: the vision model's reply could not be read (%(error)s); the rules' reading was kept.") % p
    ),  # fmt: skip
    "vision_question_bad": lambda p: (
        _("Page %(page)s: item %(position)s of the vision model's reply was left out (%(error)s).") % p
    ),  # fmt: skip
    "vision_box_off": lambda p: (
        _("Page %(page)s: the vision model put question %(number)s off the page; it was left out.") % p
    ),  # fmt: skip
    "vision_box_clipped": lambda p: (
        _("Page %(page)s: the vision model's box of question %(number)s reached past the page; it was clipped.") % p
    ),  # fmt: skip
    "vision_number_twice": lambda p: (
        _("Page %(page)s: the vision model gave question number %(number)s twice; the second was left out.") % p
    ),  # fmt: skip
    "vision_number_unprinted": lambda p: (
        _("Page %(page)s: the vision model read a question %(number)s, a number not printed on the page.") % p
    ),  # fmt: skip
    "vision_nothing": lambda p: (
        _("Page %(page)s: the vision model found no question; the rules' reading was kept.") % p
    ),  # fmt: skip
    "vision_failed": lambda p: (
        _("Page %(page)s could not be read by the vision model (%(error)s); the rules' reading was kept.") % p
    ),  # fmt: skip
    "vision_unavailable": lambda p: (
        _("The vision model is not available (%(error)s); the rules cut the paper.") % {"error": _unavailable(p)}
    ),  # fmt: skip
    "import_stopped": lambda p: _("The import stopped (%(error)s); run it again to continue.") % p,
}


def note_text(item: Any) -> str:
    """A note in the active language; a plain string (a report written before notes) as it is."""
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        return str(item)
    code, params = item.get("code", ""), item.get("params") or {}
    wording = WORDINGS.get(code)
    if wording is None or not isinstance(params, dict):
        return str(code)
    try:
        return wording(params)
    except (KeyError, TypeError, ValueError):
        return str(code)


def english(item: Note) -> str:
    with translation.override("en"):
        return note_text(item)


def texts(items: Iterable[Any]) -> list[str]:
    return [note_text(item) for item in items]


# A stopped import's note (its crash) is a reason a stored document words like any other: registered with
# line_reasons, so the models read it without importing the importer.
for _code, _wording in WORDINGS.items():
    reason_wording(_code)(_wording)
