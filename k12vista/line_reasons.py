"""Why a line of an imported file failed (or was left alone, or warned), stored as a code with
parameters and worded when shown, so that a report made by a worker reads in each reader's language.

The question import, the PEBench import and the PEM-800K import run in a worker, in no reader's
language; their per-line reports (k12vista.reports.LineReport) are read later, in pages and through
the API, by people in theirs. So a reason is kept as ``{"code": ..., "params": {...}}`` (a parameter
may itself be a reason, worded in turn: a field's name and what is wrong with it) and ``reason_text``
words it in the active language, as k12vista.job_text does for job failures and annotation.pdf.notes
for the PDF import. A line's row keeps an English copy in ``reason`` for logs and for readers of
reports stored before the codes, whose ``reason`` is the only text they have.

This module imports no models: the readers of records raise ``ReasonError`` (or
k12vista.import_files.RecordError) with a reason, and the reports store it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import translation
from django.utils.translation import gettext

from k12vista.storable import storable


def gettext_noop(message: str) -> str:
    """Marks a message for the catalogue (makemessages reads the name) without Django's: k12vista.vocabulary
    imports this module, and scripts read the vocabulary before any settings are configured."""
    return message


Reason = dict[str, Any]  # {"code": str, "params": dict}

PARAM_CHARS = 1000  # a parameter's text is cut here (a line may quote a whole record)

# Each code's wording (a msgid of the catalogue), called in the active language. A code not here, or
# parameters that do not fit, read as the English copy the row keeps.
REASONS: dict[str, str] = {
    "text": "%(text)s",  # a reason given as text by code outside the studio: shown as it is
    "field": gettext_noop("%(field)s: %(message)s"),
    # reading the line
    "line_too_long": gettext_noop("the line is longer than %(n)s bytes"),
    "not_utf8": gettext_noop("not valid UTF-8 (byte %(n)d of the line)"),
    "too_deep": gettext_noop("nested deeper than %(n)d levels"),
    "not_json_at": gettext_noop("not valid JSON: it breaks at character %(n)d"),
    "not_json": gettext_noop("not valid JSON: %(error)s"),
    "not_finite": gettext_noop("%(number)s is not a finite number"),
    "not_object": gettext_noop("the line is not a JSON object"),
    "expected_object": gettext_noop("expected a JSON object"),
    "too_long_record": gettext_noop("the line is too long to be a record"),
    "surrogate": gettext_noop("the text holds an unpaired surrogate (\\ud800-\\udfff)"),
    # what the database cannot store (k12vista.text.unstorable): where, what, and at which character
    "unstorable": gettext_noop("%(where)s: %(what)s at character %(n)d, which cannot be stored"),
    "nul_char": gettext_noop("a NUL character (\\u0000)"),
    "surrogate_char": gettext_noop("an unpaired surrogate"),
    "not_finite_at": gettext_noop("%(where)s: %(number)s is not a finite number"),
    "the_record": gettext_noop("the record"),
    "the_name": gettext_noop("the name %(name)s"),
    "pem800k_no_labels": gettext_noop("missing: a PEM-800K record labels its steps"),
    # a field's value
    "missing": gettext_noop("missing %(fields)s"),
    "expected_text": gettext_noop("expected text"),
    "expected_string": gettext_noop("expected a string"),
    "expected_strings": gettext_noop("expected a list of strings"),
    "expected_list": gettext_noop("expected a list"),
    "expected_number": gettext_noop("expected a number, got %(value)s"),
    "expected_options": gettext_noop("expected a list of {label, text} or of strings"),
    "expected_grade": gettext_noop("expected a grade 1-12, got %(value)s"),
    "expected_offsets": gettext_noop("expected a list of offsets into the text"),
    "expected_bool": gettext_noop("expected true or false"),
    "expected_answer_object": gettext_noop("expected an object with ground_truth and format_solution"),
    "expected_text_or_lines": gettext_noop("expected a string or a list of strings"),
    "expected_step_label": gettext_noop("expected a step label, got %(value)s"),
    "unknown_step_label": gettext_noop("unknown step label %(value)s (expected one of the nine codes or names)"),
    "expected_step_labels": gettext_noop("expected a non-empty list of [step, label, explanation]"),
    "expected_step_entry": gettext_noop("expected [step, label, explanation], got %(got)s"),
    "elements": gettext_noop("%(n)s elements"),
    "expected_steps": gettext_noop("expected a non-empty list of steps"),
    "expected_step": gettext_noop("expected a string or an object with text"),
    "expected_label_object": gettext_noop("expected an object with source, rater, label and explanation"),
    "too_long_key": gettext_noop("longer than 200 characters"),
    "unknown_subject": gettext_noop("unknown subject %(value)s (expected one of %(choices)s)"),
    "unknown_subject_tag": gettext_noop("unknown subject tag %(value)s (expected like 'math-g9')"),
    "unknown_type": gettext_noop("unknown question type %(value)s (expected one of %(choices)s)"),
    "unknown_stage": gettext_noop("unknown stage %(value)s, or not the grade's stage"),
    "unknown_step_source": gettext_noop("unknown step source %(value)s"),
    "no_subject": gettext_noop("a %(format)s record names none: import the published file, whose keywords name it"),
    # figures
    "not_image_name": gettext_noop("%(path)s is not an image file name"),
    "not_base64": gettext_noop("not valid base64"),
    "expected_figure": gettext_noop('expected a base64 string or {"path": ...}'),
    "claimed_format": gettext_noop("claims to be %(claimed)s but the data is %(actual)s"),
    "figure_needs_zip": gettext_noop("a figure given by path needs a zip archive holding the image"),
    "not_in_archive": gettext_noop("%(path)s is not in the archive"),
    "picture_needs_zip": gettext_noop("%(path)s: pictures are read from a zip of the published folder"),
    "image_unusable": gettext_noop("%(name)s: not a usable image (%(error)s)"),
    "image_damaged": gettext_noop("%(name)s: the image data is damaged (%(error)s)"),
    "image_format": gettext_noop("%(name)s: %(format)s images are not accepted"),
    # the question's values (annotation.services.validate)
    "hash_id_length": gettext_noop("hash_id must be 1-64 characters"),
    "bad_subject": gettext_noop("unknown subject %(value)r"),
    "bad_type": gettext_noop("unknown question type %(value)r"),
    "bad_grade": gettext_noop("grade must be an integer 1-12, got %(value)r"),
    "must_be_text": gettext_noop("%(field)s must be text"),
    "too_long": gettext_noop("%(field)s must be at most %(limit)s characters"),
    "must_be_strings": gettext_noop("%(field)s must be a list of strings"),
    "bad_options": gettext_noop("options must be a list of {label, text}, both text"),
    "bad_difficulty": gettext_noop("difficulty must be a number between 0 and 1, got %(value)r"),
    # writing it
    "database_refused": gettext_noop("the database refused the line: %(error)s"),
    "created_and_removed": gettext_noop("the question was created and removed while importing"),
    "question_conflict": gettext_noop("a question with this hash_id has different %(fields)s; it was not overwritten"),
    "not_published_file": gettext_noop("%(name)s in the archive is not a published set's file (keywords and example)."),
    "key_reused": gettext_noop(
        "key %(key)s was already used on line %(line)s for a different chain; give each chain its own key"
    ),
    "chain_conflict": gettext_noop("differs in %(what)s, and people have labelled it already; it was not changed"),
    "chain_conflict_flagged": gettext_noop(
        "differs in %(what)s, and people have labelled it already; it was not changed (only its PEM training-data "
        "mark was set)"
    ),
    "no_explanation": gettext_noop("%(field)s: [step, label] without an explanation; read with an empty explanation"),
}


# Codes an app words itself (a question field's name, from the model): registered by the app.
Wording = Callable[[dict[str, Any]], str]
_wordings: dict[str, Wording] = {}


def reason_templates(templates: dict[str, str]) -> None:
    """Registers an app's codes worded by a template each (a msgid the app marks for the catalogue), as
    REASONS are: the refusals of a service that may run in a worker (a PEBench build, the PDF import)."""
    for code, template in templates.items():
        if code in REASONS and REASONS[code] != template:
            raise ValueError(f"the reason code {code!r} is registered with another wording")
        REASONS[code] = template


def reason_wording(code: str) -> Callable[[Wording], Wording]:
    """Registers how the reason ``code`` reads, given its parameters, in the active language."""

    def register(wording: Wording) -> Wording:
        _wordings[code] = wording
        return wording

    return register


def _plain(value: Any) -> Any:
    """A parameter kept JSON-plain and storable: a reason stays a reason, text is cut to PARAM_CHARS."""
    if isinstance(value, dict) and "code" in value:
        return reason(str(value["code"]), **(value.get("params") or {}))
    if isinstance(value, str):
        return storable(value[:PARAM_CHARS])
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value[:50]]
    return storable(str(value)[:PARAM_CHARS])


def reason(code: str, **params: Any) -> Reason:
    """A reason to store; parameters are kept JSON-plain (a reason among them stays one)."""
    return {"code": code, "params": {name: _plain(value) for name, value in params.items()}}


def as_reason(message: str | Reason) -> Reason:
    """A reason, from a reason or a text given by code that states none (shown as it is)."""
    return message if isinstance(message, dict) else reason("text", text=message)


def reason_text(item: Any) -> str:
    """A reason in the active language; a plain string (a report stored before the codes) as it is;
    "" for a code not registered or parameters that do not fit."""
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        return "" if item is None else str(item)
    code, params = str(item.get("code", "")), item.get("params") or {}
    template, wording = REASONS.get(code), _wordings.get(code)
    if (template is None and wording is None) or not isinstance(params, dict):
        return ""
    worded = {name: reason_text(value) if isinstance(value, dict) else value for name, value in params.items()}
    try:
        if wording is not None:
            return wording(worded)
        assert template is not None  # one of the two is registered (checked above)
        return (gettext(template) if code != "text" else template) % worded
    except (KeyError, TypeError, ValueError):
        return ""


def english(item: Any) -> str:
    with translation.override("en"):
        return reason_text(item)


def row_reason(row: Any) -> str:
    """A report row's reason in the active language: its code worded, else the text it stored."""
    if not isinstance(row, dict):
        return ""
    code = row.get("reason_code")
    if code:
        worded = reason_text({"code": code, "params": row.get("reason_params")})
        if worded:
            return worded
    stored = row.get("reason", "")
    return stored if isinstance(stored, str) else reason_text(stored)


def worded_rows(value: Any) -> Any:
    """A job's result with every report row's ``reason`` worded in the active language (for the API);
    the code and its parameters stay beside it."""
    if isinstance(value, list):
        return [worded_rows(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: worded_rows(item) for key, item in value.items()}
    if "reason_code" in value:
        out["reason"] = row_reason(value)
    return out


class ReasonError(ValueError):
    """A refusal whose reason is stored as a code (``self.reason``); ``str()`` words it in the active language."""

    def __init__(self, message: str | Reason) -> None:
        self.reason = as_reason(message)
        super().__init__(reason_text(self.reason) or self.reason["code"])


def reason_of(exc: BaseException) -> Reason:
    """The exception's reason: its code when it has one, else its text."""
    found = getattr(exc, "reason", None)
    return found if isinstance(found, dict) and "code" in found else reason("text", text=str(exc))
