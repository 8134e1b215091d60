"""A page read by a vision model: the segmentation backend seam, the reply's schema and the merge.

Where a lab has a vision model, the importer can send a page's image (and its
text layer, if any) to it and read back the page's questions with their boxes,
types, options, answers and solutions. The backend that makes the call lives in
``inference`` (``inference.segment_vision``), which this app may not import: it
is named by class in the setting ``SEGMENTATION_BACKEND``, as ``OCR_BACKEND``
names the OCR backend. Empty: no backend, the rules alone cut the paper.

When: ``reader="unsure"`` (the default) sends only the pages the rules are
unsure of (a page with numbered lines and nothing cut, a question cut with a
low confidence, a paper of text where no question was found), and only where a
backend is configured; ``reader="vision"`` sends every page (chosen on the
import form or ``import_pdf --reader vision``); ``reader="rules"`` none.

The reply is hostile input: JSON that does not parse, a question that does not
fit the schema, a box off the page, a number given twice or not printed on the
page are each a note on the import, and what is sound is kept. A page whose
reply holds no sound question keeps the rules' reading. The questions read go
through the same consistency report (annotation.pdf.consistency) as the rules'.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from annotation.pdf.consistency import consistency_report
from annotation.pdf.layout import Line, PageLayout
from annotation.pdf.notes import Note, english, note
from annotation.pdf.segment import NUMBER, ParsedQuestion, Segmented

READERS = ("unsure", "vision", "rules")
DEFAULT_READER = "unsure"
# A cut the rules are this unsure of (the report's confidence: 0.6 after a jump in the numbering, at
# most 0.5 next to anything the report says) sends its page to the model.
UNSURE_BELOW = 0.7
SCALE = 1000  # boxes are asked for in thousandths of the page's width and height, whatever the image size
SLACK = 5  # thousandths a box may stick out past the page's edge before it is said to be off the page
VISION_CONFIDENCE = 0.9  # a cut read by the model: not the rules' 1.0 for a numbering that follows on
# Notes the merge works out again over the questions as merged; the others are kept as the rules said them.
RECOMPUTED = {"gap", "duplicate", "skipped", "section_count"}


class VisionUnavailable(ImproperlyConfigured):
    """No backend here, or one that cannot run (no endpoint, switched off, refused): a setup problem.

    ``cause`` is a code worded in annotation.pdf.notes (UNAVAILABLE_CAUSES) with ``params``, so the
    import's note reads in the reader's language; the message is for logs and a lab's own backend."""

    def __init__(self, message: str, *, cause: str = "", **params: str) -> None:
        super().__init__(message)
        self.cause, self.params = cause, params


def unavailable_note(problem: VisionUnavailable | None) -> Note:
    """The note saying why the vision model did not read the pages (None: no backend is set)."""
    if problem is None:
        return note("vision_unavailable", cause="backend_unset", error="SEGMENTATION_BACKEND")
    return note("vision_unavailable", cause=problem.cause, error=_short(problem),
                **{k: str(v)[:200] for k, v in problem.params.items()})  # fmt: skip


class VisionServiceError(RuntimeError):
    """The model call failed after its retries (down, busy): the page keeps the rules' reading."""


class SegmentationBackend:
    """Subclass, implement ``read_page`` and set ``SEGMENTATION_BACKEND`` to its dotted path."""

    name = "vision-model"

    def read_page(self, *, image: bytes, text: str, page: int) -> str:
        """The model's reply for one page: ``image`` a PNG of it, ``text`` its text layer ("" for a
        scan). The reply should be JSON of ``VisionPage``; whatever it is, ``read_reply`` judges it."""
        raise NotImplementedError


_instances: dict[str, SegmentationBackend] = {}
_lock = threading.Lock()


def get_segmentation_backend(path: str | None = None) -> SegmentationBackend | None:
    """The configured backend (one instance per class path and process), None where none is set."""
    path = path if path is not None else getattr(settings, "SEGMENTATION_BACKEND", "")
    if not path:
        return None
    with _lock:
        if path not in _instances:
            try:
                backend_class = import_string(path)
            except ImportError as exc:
                raise VisionUnavailable(
                    f"SEGMENTATION_BACKEND={path!r} cannot be imported: {exc}", cause="backend_import", path=path
                ) from exc
            if not (isinstance(backend_class, type) and issubclass(backend_class, SegmentationBackend)):
                raise VisionUnavailable(
                    f"SEGMENTATION_BACKEND={path!r} is not a subclass of annotation.pdf.vision.SegmentationBackend",
                    cause="backend_not_subclass", path=path,
                )  # fmt: skip
            _instances[path] = backend_class()
        return _instances[path]


# --- the reply's schema (sent as response_format by the backend) ---------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VisionOption(_Strict):
    label: Annotated[str, Field(min_length=1, max_length=4)]
    text: str


class VisionQuestion(_Strict):
    number: Annotated[int, Field(ge=1, le=999)]
    # [x0, y0, x1, y1] in thousandths of the page's width and height, y downwards.
    box: Annotated[list[float], Field(min_length=4, max_length=4)]
    type: Literal["multiple_choice", "fill_in_blank", "free_response"]
    text: str
    options: list[VisionOption]
    answer: str
    solution: str


class VisionPage(_Strict):
    questions: list[VisionQuestion]


# --- reading a reply --------------------------------------------------------------------------


def _json_text(reply: str) -> str:
    """The JSON object in a reply: after any reasoning (</think>), inside any code fence."""
    text = reply.rsplit("</think>", 1)[-1]
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text.strip()


def _short(error: Exception | str) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


def read_reply(reply: str, *, page: int, printed: set[int] | None = None) -> tuple[list[VisionQuestion], list[Note]]:
    """The sound questions of a reply, and a note for each thing wrong with it. ``printed``: the numbers
    that start lines of the page's text layer (None for a scan): a number outside them is said."""
    notes: list[Note] = []
    try:
        data = json.loads(_json_text(reply))
    except (ValueError, RecursionError) as exc:
        return [], [note("vision_reply_bad", page=page, error=_short(exc))]
    items = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return [], [note("vision_reply_bad", page=page, error="no list of questions")]
    questions: list[VisionQuestion] = []
    seen: set[int] = set()
    for position, item in enumerate(items, 1):
        try:
            question = VisionQuestion.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            notes.append(note("vision_question_bad", page=page, position=position, error=f"{where}: {first['msg']}"))
            continue
        box = _clipped(question.box)
        if box is None:
            notes.append(note("vision_box_off", page=page, number=question.number))
            continue
        if box != question.box:
            notes.append(note("vision_box_clipped", page=page, number=question.number))
            question = question.model_copy(update={"box": box})
        if question.number in seen:
            notes.append(note("vision_number_twice", page=page, number=question.number))
            continue
        if printed is not None and printed and question.number not in printed:
            notes.append(note("vision_number_unprinted", page=page, number=question.number))
        seen.add(question.number)
        questions.append(question)
    return questions, notes


def _clipped(box: list[float]) -> list[float] | None:
    """The box inside the page, or None for one off it (or inside out, or of no size)."""
    x0, y0, x1, y1 = box
    if not all(math.isfinite(v) for v in box) or min(box) < -SLACK or max(box) > SCALE + SLACK or x1 <= x0 or y1 <= y0:
        return None
    clipped = [min(max(v, 0.0), float(SCALE)) for v in box]
    if clipped[2] - clipped[0] < 1 or clipped[3] - clipped[1] < 1:
        return None
    return clipped if any(abs(a - b) > 1e-9 for a, b in zip(clipped, box, strict=True)) else box


def printed_numbers(text: str) -> set[int]:
    """Numbers that start a line of a page's text (1．, 2、): what the model's numbers are checked against."""
    return {int(found.group(1)) for line in text.splitlines() if (found := NUMBER.match(line.strip()))}


# --- which pages, and the merge ---------------------------------------------------------------


def unsure_pages(parsed: Segmented, pages: Sequence[int]) -> list[int]:
    """Pages the rules are unsure of: numbered lines and nothing cut, a low-confidence cut, or every
    page of a paper with text and no question."""
    codes = {said["code"] for said in parsed.notes}
    if not parsed.questions and "no_questions" in codes:
        return sorted(pages)
    found = {int(said["params"]["page"]) for said in parsed.notes if said["code"] == "page_uncut"}
    confidence = parsed.report.get("confidence", {})
    for question in parsed.questions:
        if question.lines and confidence.get(question.label, question.confidence) < UNSURE_BELOW:
            found.add(question.lines[0].page)
    return sorted(page for page in found if page in pages)


@dataclass
class PageReading:
    """What the model read on one page, in points."""

    page: int
    questions: list[VisionQuestion]
    width: float
    height: float


def as_parsed(reading: PageReading, layout: PageLayout | None) -> list[ParsedQuestion]:
    out = []
    for item in reading.questions:
        x0, y0, x1, y1 = item.box
        bbox = (x0 * reading.width / SCALE, y0 * reading.height / SCALE,
                x1 * reading.width / SCALE, y1 * reading.height / SCALE)  # fmt: skip
        key = layout.key_of(bbox) if layout is not None else (reading.page, 0, 0, bbox[1])
        line = Line(f"{item.number}．{item.text}", bbox, reading.page, key)
        question = ParsedQuestion(number=item.number, section=0, qtype=item.type, lines=[line], stem=[item.text],
                                  options=[{"label": o.label.strip(), "text": o.text.strip()} for o in item.options],
                                  answer=item.answer.strip(), solution=item.solution.strip(),
                                  confidence=VISION_CONFIDENCE)  # fmt: skip
        out.append(question)
    return out


def merge(parsed: Segmented, readings: list[PageReading], layouts: dict[int, PageLayout],
          said: list[tuple[Note, int]]) -> Segmented:  # fmt: skip
    """The rules' questions with those on the pages the model read replaced by its reading, and the
    consistency report worked out again over the result. ``said``: the notes of the reading, each with
    its page (the questions read on or next to it are flagged)."""
    read = {r.page: r for r in readings if r.questions}
    kept = [q for q in parsed.questions if not (q.lines and q.lines[0].page in read)]
    replaced = {q.label for q in parsed.questions} - {q.label for q in kept}
    new = [q for r in read.values() for q in as_parsed(r, layouts.get(r.page))]
    questions = sorted(kept + new, key=lambda q: q.lines[0].key if q.lines else (0,))
    read_by_rules = [q for q in parsed.questions if q.lines]
    for question in new:  # the section of the rules' question at or before it, else after it: its heading's count
        before = [q for q in read_by_rules if q.lines[0].key <= question.lines[0].key]
        after = [q for q in read_by_rules if q.lines[0].key > question.lines[0].key]
        question.section = before[-1].section if before else after[0].section if after else 0

    def near(page: int) -> list[ParsedQuestion]:
        on = [q for q in questions if q.lines and q.lines[0].page == page]
        return on or [q for q in questions if q.lines and abs(q.lines[0].page - page) == 1][:2]

    notes = [(said_note, near(page)) for said_note, page in said]
    notes += [(note("vision_read", page=page, count=len(read[page].questions)), []) for page in sorted(read)]
    old = parsed.report
    stated = {}
    for section, value in (old.get("stated") or {}).items():
        if isinstance(value, list) and len(value) == 2 and str(section).isdigit():
            stated[int(section)] = (str(value[0]), value[1] if isinstance(value[1], int) else None)
    skips = [(n, [q for q in kept if q.label in labels]) for n, labels in _skips(old, replaced)]
    report = consistency_report(questions, stated, {}, notes=notes + skips)
    resolved = {"page_uncut", "no_questions", "not_exam", "leftover"}
    carried = [n for n in old.get("notes", []) if n["code"] not in RECOMPUTED
               and not (n["code"] in resolved and int(n["params"].get("page", 0) or 0) in set(read) | {0})]  # fmt: skip
    merged_notes = carried + [n for n in report["notes"] if n not in carried]
    reasons = {label: [n for n in got if n["code"] not in RECOMPUTED]
               for label, got in old.get("reasons", {}).items() if label not in replaced}  # fmt: skip
    for label, got in report["reasons"].items():
        reasons.setdefault(label, [])
        reasons[label] += [n for n in got if n not in reasons[label]]
    reasons = {label: got for label, got in reasons.items() if got}
    confidence = {q.label: round(min(q.confidence, 0.5 if q.label in reasons else 1.0), 2) for q in questions}
    final = {**old, **{k: report[k] for k in ("numbers", "gaps", "duplicates", "sections")}, "notes": merged_notes,
             "warnings": [english(n) for n in merged_notes], "reasons": reasons, "suspects": sorted(reasons),
             "confidence": confidence, "vision_pages": sorted(read)}  # fmt: skip
    return Segmented(questions, final["warnings"], parsed.answers_key, final)


def _skips(report: dict, replaced: set[str]) -> list[tuple[Note, set[str]]]:
    """The rules' skipped notes (a jump in the numbering) away from the pages read again, with the labels
    of the questions they flagged: given back to the report, which says each jump once."""
    out = []
    for said in report.get("notes", []):
        if said.get("code") == "skipped":
            labels = {label for label, got in report.get("reasons", {}).items() if said in got}
            if labels and not labels & replaced:
                out.append((said, labels))
    return out


PageInput = tuple[int, bytes, str, float, float]  # number, PNG, text layer, width and height in points


def read_pages(
    backend: SegmentationBackend, pages: list[PageInput], *, heartbeat: Callable[[], None] = lambda: None
) -> tuple[list[PageReading], list[tuple[Note, int]]]:
    """Each page (number, PNG, text, width and height in points) through the backend. A failed call or
    a bad reply is a note and the page keeps the rules' reading; a backend that cannot run at all is
    said once and the rest are not tried."""
    readings: list[PageReading] = []
    said: list[tuple[Note, int]] = []
    for number, image, text, width, height in pages:
        try:
            reply = backend.read_page(image=image, text=text, page=number)
        except VisionUnavailable as exc:
            said.append((unavailable_note(exc), number))
            break
        except (VisionServiceError, ValueError, OSError, RuntimeError) as exc:
            # A failed call, or a backend of a lab's own that broke on this page: the page keeps the rules'.
            said.append((note("vision_failed", page=number, error=_short(exc)), number))
            continue
        printed = printed_numbers(text) if text.strip() else None
        questions, notes = read_reply(reply if isinstance(reply, str) else "", page=number, printed=printed)
        said += [(n, number) for n in notes]
        if not questions and not any(n["code"] == "vision_reply_bad" for n in notes):
            said.append((note("vision_nothing", page=number), number))
        readings.append(PageReading(number, questions, width, height))
        heartbeat()  # a model call is seconds long: the job shows it is alive between pages
    return readings, said
