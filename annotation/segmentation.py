"""Repairing how an imported PDF was cut into questions (the segmentation screen).

Every repair is one function here; each keeps the state it replaces in a ``Repair`` row, writes the
question history (QuestionEdit) of every question it changes and marks those questions' ``Segment``
human-owned. ``undo`` puts the last repair of a document back, unless someone changed its questions
since. The importer only creates questions whose hash it has not saved, so a re-import never writes over
a repair: a question merged away or marked as not a question stays, rejected, under its hash.
"""

from __future__ import annotations

import hashlib
import io
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from annotation import services
from annotation.models import Assignment, Figure, Page, Question, QuestionEdit, Repair, Segment, SourceDocument
from annotation.ocr import OCRServiceError, OCRUnavailable, get_ocr_backend
from annotation.pdf import reading
from k12vista.lazy import lazy_module
from k12vista.text import storable
from k12vista.vocabulary import QuestionType

if TYPE_CHECKING:
    import pymupdf
else:
    pymupdf = lazy_module("pymupdf")

OCR_DPI = 200  # a drawn region is rendered at this resolution for OCR
MIN_BOX = 4.0  # points: a smaller box is a slip of the mouse
# A question's printed number at the start of its first region ("3．", "12、", "(4)"): the question's
# label, not its text, as the importer keeps it.
NUMBER = re.compile(r"^\s*[(（]?(\d{1,3})[)）]?\s*[．.、]?\s*(?=\S)")


PARTS = ("options", "answer", "solution")
OPTION_LINE = re.compile(r"^\s*[(（]?[A-H][)）]?\s*[．.、:：]")
# The markers the segmenter routes a question's lines on (annotation.pdf.segment.MARKER).
PART_MARKER = re.compile(r"【(答案|解析|详解|分析|解答|点评|点睛|考点|详析)】")


def part_regions(lines: Sequence[Any]) -> list[list]:
    """[kind, page, x0, y0, x1, y1] for each run of a question's lines (``annotation.pdf.layout.Line``) in
    one column that are its options, its answer or its solution, read from the markers the segmenter
    routes on: option letters, then 【答案】, 【解析】 and the like. Its stem has no region here (its text
    regions are ``Question.boxes``)."""
    part = "stem"
    runs: list[tuple[tuple[str, tuple], list[float]]] = []
    for line in lines:
        marker = PART_MARKER.search(line.text)
        if marker:
            part = "answer" if marker.group(1) == "答案" else "solution"
        elif part == "stem" and OPTION_LINE.match(line.text):
            part = "options"
        if part == "stem":
            continue
        where = (part, line.key[:3])
        if runs and runs[-1][0] == where:
            box = runs[-1][1]
            runs[-1] = (where, [min(box[0], line.bbox[0]), min(box[1], line.bbox[1]),
                                max(box[2], line.bbox[2]), max(box[3], line.bbox[3])])  # fmt: skip
        else:
            runs.append((where, list(line.bbox)))
    return [[kind, int(key[0]), *(round(v, 2) for v in box)] for (kind, key), box in runs]


def record_import(*, question: Question, document: SourceDocument, label: str, lines: Sequence[Any]) -> Segment:
    """The importer's record of how it cut a question: its printed number and its parts' regions."""
    return Segment.objects.create(question=question, document=document, label=str(label)[:40],
                                  regions=part_regions(lines))  # fmt: skip


def repaired_boxes(document: SourceDocument) -> list[list[float]]:
    """The text regions ([page, x0, y0, x1, y1]) of every question a person repaired, kept or rejected."""
    repaired = Question.objects.filter(source_document=document, segment__human=True).prefetch_related("figures")
    return [box for question in repaired for box in _text_boxes(question)]


def covered(lines: Sequence[Any], boxes: Sequence[Sequence[Any]]) -> bool:
    """Whether most of a question's lines (``annotation.pdf.layout.Line``) have their middle inside the
    boxes: a question a re-import reads there was cut by a person already."""
    if not lines or not boxes:
        return False
    inside = sum(1 for line in lines if _inside(["", line.page, *line.bbox], boxes))
    return inside * 2 > len(lines)


class RepairError(ValueError):
    """A repair that cannot be made; the message says why, in the reader's language."""


# --- what the screen shows ---------------------------------------------------------------------------


@dataclass
class Region:
    kind: str  # "question" (its text), "figure", "stem", "not_question"
    box: list[float]  # x0, y0, x1, y1 in PDF points
    question: Question
    index: int = -1  # its place in question.boxes, -1 for a figure's own box
    figure: Figure | None = None

    @property
    def width(self) -> float:
        return round(self.box[2] - self.box[0], 2)

    @property
    def height(self) -> float:
        return round(self.box[3] - self.box[1], 2)


@dataclass
class PageView:
    page: Page
    regions: list[Region] = field(default_factory=list)


def label_of(question: Question, fallback: int) -> str:
    segment = getattr(question, "segment", None)
    return segment.label if segment is not None and segment.label else f"#{fallback}"


def kind_of(question: Question) -> str:
    segment = getattr(question, "segment", None)
    return segment.kind if segment is not None else Segment.Kind.QUESTION


def document_questions(document: SourceDocument) -> list[Question]:
    """The document's questions in reading order, each with its ``number`` (the printed one, or its place
    where none was kept) for the screen. The importer saved its questions in reading order (columns
    included), so they keep theirs; a question a repair created goes after the question whose region
    stands above it in the same column (``_insert_at``)."""
    questions = list(
        Question.objects.filter(source_document=document)
        .select_related("segment")
        .prefetch_related("figures")
        .order_by("id")
    )
    created: set[int] = set()
    for after in document.repairs.filter(undone_at__isnull=True).values_list("after", flat=True):
        created.update(after.get("created", []) if isinstance(after, dict) else [])
    ordered = [q for q in questions if q.pk not in created]
    for question in (q for q in questions if q.pk in created):
        ordered.insert(_insert_at(ordered, question), question)
    for place, question in enumerate(ordered, start=1):
        question.number = label_of(question, place)  # type: ignore[attr-defined]
        question.kind = kind_of(question)  # type: ignore[attr-defined]
    return ordered


def _insert_at(ordered: list[Question], question: Question) -> int:
    """Where a created question goes: after the last question with a region above it in its column
    (same page, overlapping across, starting higher), else after the last question of an earlier page."""
    boxes = services.boxes_of(question)
    if not boxes:
        return len(ordered)
    page, x0, y0, x1, _ = boxes[0]
    at = 0
    for index, other in enumerate(ordered):
        for o_page, o_x0, o_y0, o_x1, _ in services.boxes_of(other):
            same_column = o_page == page and o_x0 < x1 and x0 < o_x1 and o_y0 <= y0
            if same_column or o_page < page:
                at = index + 1
    return at


def _figure_box(figure: Figure) -> list[float] | None:
    if figure.page is None or not figure.bbox:
        return None
    return [figure.page.number, *figure.bbox]


def page_views(document: SourceDocument, questions: list[Question]) -> list[PageView]:
    """Each page with every region read from it: question text boxes, figures, options, answers and
    solutions. A question merged away or rejected shows nothing (its regions are another's now); a
    shared stem or a region that is no question shows as what it was marked."""
    views = {p.number: PageView(p) for p in document.pages.order_by("number")}
    for question in questions:
        if question.status == Question.Status.REJECTED and kind_of(question) == Segment.Kind.QUESTION:
            continue
        for part, page, *corners in _parts(question):
            if int(page) in views:
                views[int(page)].regions.append(Region(part, corners, question))
        figure_boxes = [box for f in question.figures.all() if (box := _figure_box(f))]
        for index, box in enumerate(services.boxes_of(question)):
            if box in figure_boxes or int(box[0]) not in views:
                continue
            kind = "question" if kind_of(question) == Segment.Kind.QUESTION else kind_of(question)
            views[int(box[0])].regions.append(Region(kind, list(box[1:]), question, index))
        for figure in question.figures.all():
            where = _figure_box(figure)
            if where and figure.kind == Figure.Kind.FIGURE and int(where[0]) in views:
                views[int(where[0])].regions.append(Region("figure", list(where[1:]), question, figure=figure))
    return list(views.values())


def _parts(question: Question) -> list[list]:
    segment = getattr(question, "segment", None)
    return [list(r) for r in segment.regions] if segment is not None and segment.regions else []


def _stored_parts(question: Question) -> list[list]:
    """The question's part regions as saved now (not as a loaded instance cached them)."""
    stored = Segment.objects.filter(question_id=question.pk).values_list("regions", flat=True).first()
    return [list(r) for r in stored or []]


def _inside(region: Sequence[Any], boxes: Sequence[Sequence[Any]]) -> bool:
    """Whether a part's region ([kind, page, box]) has its middle inside one of the boxes ([page, box])."""
    x, y = (region[2] + region[4]) / 2, (region[3] + region[5]) / 2
    return any(int(b[0]) == int(region[1]) and b[1] <= x <= b[3] and b[2] <= y <= b[4] for b in boxes)


def _keep_parts(question: Question, boxes: Sequence[Sequence[Any]], extra: Sequence[list] = ()) -> list[list]:
    """The question's part regions still inside its text boxes, with ``extra`` ones it takes over."""
    parts = [r for r in _stored_parts(question) if _inside(r, boxes)] + list(extra)
    Segment.objects.filter(question=question).update(regions=parts)
    return parts


def pages_of(question: Question) -> list[PageView]:
    """The pages a question was read from, with every question's regions on them: the OCR review's
    viewer, where a wrong cut shows as a neighbour's box over this question's text."""
    document = question.source_document
    if document is None:
        return []
    numbers = {int(box[0]) for box in services.boxes_of(question)}
    if not numbers and question.source_page is not None:
        numbers = {question.source_page.number}
    questions = [q for q in document_questions(document) if q.status != Question.Status.REJECTED or q.pk == question.pk]
    return [view for view in page_views(document, questions) if view.page.number in numbers]


# --- reading a region ----------------------------------------------------------------------------------


def _clean_box(page: Page, box: Sequence[Any]) -> list[float]:
    """A box from the screen, in points, inside the page, corners in order; a RepairError if it is no box."""
    try:
        x0, y0, x1, y1 = (float(v) for v in box)
    except (TypeError, ValueError):
        raise RepairError(_("A box needs four numbers.")) from None
    if any(v != v or v in (float("inf"), float("-inf")) for v in (x0, y0, x1, y1)):
        raise RepairError(_("A box needs four numbers."))
    width, height = page.width_pt or float("inf"), page.height_pt or float("inf")
    x0, x1 = sorted((min(max(0.0, x0), width), min(max(0.0, x1), width)))
    y0, y1 = sorted((min(max(0.0, y0), height), min(max(0.0, y1), height)))
    if x1 - x0 < MIN_BOX or y1 - y0 < MIN_BOX:
        raise RepairError(_("The box is too small."))
    return [round(v, 2) for v in (x0, y0, x1, y1)]


def read_region(page: Page, box: Sequence[float]) -> str:
    """The text inside a box: the PDF's text layer, or OCR of the region for a page read by OCR."""
    document = page.document
    with document.file.open("rb") as stored:
        pdf = reading.open_pdf(stored.read())
    with pdf:
        pdf_page = pdf[page.number - 1]
        clip = pymupdf.Rect(*box)
        if page.text_source == "text-layer":
            text = pdf_page.get_text("text", clip=clip, sort=True)
        else:
            text = _ocr_region(pdf_page, clip)
    lines = [" ".join(line.split()) for line in storable(text).splitlines()]
    return "\n".join(line for line in lines if line)


def _ocr_region(pdf_page: pymupdf.Page, clip: pymupdf.Rect) -> str:
    from PIL import Image

    pix = pdf_page.get_pixmap(dpi=OCR_DPI, clip=clip, alpha=False)
    image = Image.open(io.BytesIO(pix.tobytes("png")))
    try:
        return get_ocr_backend().recognize(image).markdown
    except (OCRUnavailable, OCRServiceError) as exc:
        raise RepairError(_("The region could not be read by OCR: %(error)s") % {"error": exc}) from exc


def _text_boxes(question: Question) -> list[list[float]]:
    figure_boxes = [box for f in question.figures.all() if (box := _figure_box(f))]
    return [box for box in services.boxes_of(question) if box not in figure_boxes]


def numbered(text: str) -> tuple[str, str]:
    """The printed number a region starts with ("" where none) and the text after it."""
    match = NUMBER.match(text)
    if match is None or not (match.group(0).strip(" (（") != match.group(1) or "(" in match.group(0)):
        return "", text
    return match.group(1), text[match.end() :]


def _read_boxes(document: SourceDocument, boxes: list[list[float]]) -> str:
    """The text of a question's regions, in order, without the number its first region starts with."""
    pages = {p.number: p for p in document.pages.all()}
    text = "\n".join(t for box in boxes if int(box[0]) in pages and (t := read_region(pages[int(box[0])], box[1:])))
    return numbered(text)[1]


# --- the record of a repair and its undo ----------------------------------------------------------------

STATE_FIELDS = ("boxes", "bbox", "source_page_id", "status", "reject_reason")


def _question_state(question: Question) -> dict:
    segment = Segment.objects.filter(question=question).first()
    return {
        "content": {name: getattr(question, name) for name in Question.CONTENT_FIELDS},
        "state": {name: getattr(question, name) for name in STATE_FIELDS},
        "segment": None
        if segment is None
        else {"label": segment.label, "kind": segment.kind, "human": segment.human, "regions": segment.regions},
    }


def _begin(document: SourceDocument, user: Any, action: str, note: str, *, questions: Sequence[Question] = (),
           figures: Sequence[Figure] = (), pages: Sequence[Page] = ()) -> Repair:  # fmt: skip
    locked = {q.pk: q for q in Question.objects.select_for_update().filter(pk__in=[q.pk for q in questions])}
    # A question someone holds in review is theirs until they finish or their lock expires (annotation.queues).
    held = Assignment.objects.open().filter(question_id__in=locked, locked_until__gt=timezone.now())
    if held.exclude(annotator_id=getattr(_person(user), "pk", None)).exists():
        raise RepairError(_("Someone is reviewing that question now; it can be repaired once they are done."))
    figure_ids = [f.pk for f in figures]
    before = {
        "questions": {str(pk): _question_state(q) for pk, q in locked.items()},
        "figures": {str(f.pk): [f.question_id, f.position] for f in Figure.objects.filter(pk__in=figure_ids)},
        "pages": {str(p.pk): [p.done_at.isoformat() if p.done_at else None, p.done_by_id] for p in pages},
    }  # fmt: skip
    return Repair.objects.create(document=document, user=_person(user), action=action, note=note[:300],
                                 before=before)  # fmt: skip


def _finish(repair: Repair, *, created: Sequence[Question] = ()) -> Repair:
    touched = [int(pk) for pk in repair.before["questions"]] + [q.pk for q in created]
    versions = dict(Question.objects.filter(pk__in=touched).values_list("pk", "version"))
    repair.after = {"versions": {str(pk): v for pk, v in versions.items()}, "created": [q.pk for q in created]}
    repair.save(update_fields=["after"])
    return repair


def _person(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


def _set_state(question: Question, user: Any, note: str, **fields: Any) -> Question:
    """Changes fields that are not content (its regions, status) with a new version and their history."""
    current = Question.objects.select_for_update().get(pk=question.pk)
    changed = {
        name: (getattr(current, name), value) for name, value in fields.items() if getattr(current, name) != value
    }
    if not changed:
        return current
    Question.objects.filter(pk=current.pk).update(**fields, version=F("version") + 1, updated=timezone.now())
    QuestionEdit.objects.bulk_create(
        QuestionEdit(
            question=current,
            user=_person(user),
            field=name.removesuffix("_id"),
            version=current.version + 1,
            old=old,
            new=new,
            note=note[:300],
        )  # fmt: skip
        for name, (old, new) in changed.items()
    )
    current.refresh_from_db()
    return current


def _edit(question: Question, user: Any, note: str, **changes: Any) -> Question:
    current = Question.objects.get(pk=question.pk)
    return services.edit_question(question=current, changes=changes, user=_person(user),
                                  expected_version=current.version, note=note[:300])  # fmt: skip


def _own(question: Question, **fields: Any) -> None:
    """Marks the question's cut as a person's: the importer leaves it alone from now on."""
    defaults: dict[str, Any] = {"document_id": question.source_document_id, "human": True, **fields}
    Segment.objects.update_or_create(question=question, defaults=defaults)


def _in_document(document: SourceDocument, *questions: Question) -> None:
    for question in questions:
        if question.source_document_id != document.pk:
            raise RepairError(_("That question is not from this document."))


@transaction.atomic
def undo(*, document: SourceDocument, user: Any) -> Repair:
    """Puts the document's last repair back, if its questions were not changed since."""
    repair = document.repairs.select_for_update().filter(undone_at__isnull=True).order_by("-created", "-id").first()
    if repair is None:
        raise RepairError(_("There is nothing to undo."))
    versions = repair.after.get("versions", {})
    now = dict(Question.objects.filter(pk__in=[int(pk) for pk in versions]).values_list("pk", "version"))
    if any(now.get(int(pk)) != version for pk, version in versions.items()):
        raise RepairError(_("The questions of the last change were edited since; it cannot be undone."))
    note = f"undo: {repair.action}"
    for pk, (question_id, position) in repair.before.get("figures", {}).items():
        Figure.objects.filter(pk=int(pk)).update(question_id=question_id, position=position)
    for pk, state in repair.before.get("questions", {}).items():
        question = Question.objects.get(pk=int(pk))
        content = {k: v for k, v in state["content"].items() if getattr(question, k) != v}
        if content:
            question = _edit(question, user, note, **content)
        _set_state(question, user, note, **state["state"])
        if state["segment"] is None:
            Segment.objects.filter(question=question).delete()
        else:
            Segment.objects.update_or_create(question=question, defaults={"document": document, **state["segment"]})
    for pk, (done_at, done_by) in repair.before.get("pages", {}).items():
        Page.objects.filter(pk=int(pk)).update(done_at=done_at, done_by_id=done_by)
    # A question the repair created goes again; its figures went back above.
    Question.objects.filter(pk__in=repair.after.get("created", []), source_document=document).delete()
    repair.undone_at = timezone.now()
    repair.save(update_fields=["undone_at"])
    return repair


# --- the repairs -----------------------------------------------------------------------------------------


def _neighbour(document: SourceDocument) -> Question | None:
    return Question.objects.filter(source_document=document).order_by("id").first()


@transaction.atomic
def add_question(*, document: SourceDocument, page: Page, box: Sequence[Any], user: Any, label: str = "") -> Question:
    """A question the importer missed: the region a person drew, its text read from the text layer
    (or OCR on a scanned page)."""
    if page.document_id != document.pk:
        raise RepairError(_("That page is not from this document."))
    rect = _clean_box(page, box)
    printed, text = numbered(read_region(page, rect))
    label = label.strip() or printed
    if not text:
        raise RepairError(_("No text was found in the box."))
    like = _neighbour(document)
    params = document.job.params if document.job is not None else {}
    repair = _begin(document, user, "add", f"page {page.number}")
    key = f"pdf-repair:{document.sha256}:{uuid.uuid4().hex}"
    data = services.QuestionData(
        hash_id=hashlib.sha256(key.encode()).hexdigest(),
        subject=like.subject if like else params.get("subject", "math"),
        grade=like.grade if like else int(params.get("grade", 9)),
        qtype=QuestionType.FREE_RESPONSE, text=text, source=document.original_name, source_document=document,
        source_page=page, bbox=rect, boxes=[[page.number, *rect]],
    )  # fmt: skip
    question = services.create_question(data=data, user=_person(user), note="drawn on the segmentation screen")
    _own(question, label=label.strip()[:40])
    _finish(repair, created=[question])
    return question


@transaction.atomic
def move_box(*, question: Question, index: int, box: Sequence[Any], user: Any) -> Question:
    """A question's region dragged or resized: the region changes and the text is read again from all
    its text regions."""
    boxes = [list(b) for b in services.boxes_of(question)]
    if not 0 <= index < len(boxes):
        raise RepairError(_("That region is not one of the question's."))
    document = question.source_document
    if document is None:
        raise RepairError(_("That question is not from a PDF."))
    page = document.pages.get(number=int(boxes[index][0]))
    old = boxes[index]
    boxes[index] = [page.number, *_clean_box(page, box)]
    repair = _begin(document, user, "move", f"region {index + 1}", questions=[question])
    question = _set_state(question, user, "region moved", boxes=boxes)
    _replace_figure_box(question, old, boxes[index])
    text = _read_boxes(document, _text_boxes(question))
    question = _edit(question, user, "text read again from its regions", text=text)
    _keep_parts(question, _text_boxes(question))
    _own(question)
    _finish(repair)
    return question


def _replace_figure_box(question: Question, old: list[float], new: list[float]) -> None:
    for figure in question.figures.all():
        if _figure_box(figure) == old:  # a figure's region moved: its box follows (the crop stays as cut)
            Figure.objects.filter(pk=figure.pk).update(bbox=new[1:])


@transaction.atomic
def split(*, question: Question, index: int, y: float | str | None, user: Any, label: str = "") -> Question:
    """Two questions read as one: region ``index`` is cut at height ``y`` (points); what is above stays,
    what is below (and every later region, and the figures there) becomes a new question. Without ``y``
    (None or ""), the cut is before region ``index``: a question that runs over two columns or pages
    whose second part is another question."""
    boxes = _text_boxes(question)
    all_boxes = services.boxes_of(question)
    if not 0 <= index < len(all_boxes) or all_boxes[index] not in boxes:
        raise RepairError(_("That region is not one of the question's."))
    document = question.source_document
    if document is None:
        raise RepairError(_("That question is not from a PDF."))
    at = boxes.index(all_boxes[index])
    page_number, x0, y0, x1, y1 = all_boxes[index]
    if y is None or y == "":
        if at == 0:
            raise RepairError(_("The first region starts the question: split before a later one, or at a line."))
        first, second, y = boxes[:at], boxes[at:], y0
    else:
        try:
            y = float(y)
        except (TypeError, ValueError):
            raise RepairError(_("Choose the line to split at.")) from None
        if not y0 + MIN_BOX <= y <= y1 - MIN_BOX:
            raise RepairError(_("Split inside the region, so that both parts keep some of it."))
        first = [*boxes[:at], [page_number, x0, y0, x1, y]]
        second = [[page_number, x0, y, x1, y1], *boxes[at + 1 :]]
    later = [f for f in question.figures.all() if (b := _figure_box(f)) and (b[0], b[2]) >= (page_number, y)]
    repair = _begin(document, user, "split", f"at {round(y, 1)} on page {int(page_number)}", questions=[question],
                    figures=later)  # fmt: skip
    base = question.hash_id[:56]
    suffix = Question.objects.filter(hash_id__startswith=f"{base}-s").count() + 1
    text_first, text_second = _read_boxes(document, first), _read_boxes(document, second)
    if not text_first or not text_second:
        raise RepairError(_("Split inside the text, so that both parts keep some of it."))
    data = services.QuestionData(
        hash_id=f"{base}-s{suffix}", subject=question.subject, grade=question.grade, qtype=question.qtype,
        text=text_second, source=question.source, source_document=document,
        source_page=document.pages.get(number=int(second[0][0])), bbox=second[0][1:],
        boxes=second + [b for f in later if (b := _figure_box(f))],
    )  # fmt: skip
    created = services.create_question(data=data, user=_person(user), note=f"split from {question.hash_id}")
    for position, figure in enumerate(later):
        Figure.objects.filter(pk=figure.pk).update(question=created, position=position)
    moved = [_figure_box(f) for f in later]
    kept = first + [b for b in services.boxes_of(question) if b not in boxes and b not in moved]
    parts = _stored_parts(question)
    question = _set_state(question, user, f"split into {created.hash_id}", boxes=kept)
    _edit(question, user, f"split into {created.hash_id}", text=text_first)
    _own(question)
    _own(created, label=label.strip()[:40], regions=[r for r in parts if _inside(r, second)])
    _keep_parts(question, first)
    _finish(repair, created=[created])
    return created


@transaction.atomic
def merge(*, first: Question, second: Question, user: Any) -> Question:
    """One question cut in two: the second joins the first (services.merge_questions) and is rejected
    as merged, so a re-import does not bring it back."""
    document = first.source_document
    if document is None:
        raise RepairError(_("That question is not from a PDF."))
    _in_document(document, second)
    if first.pk == second.pk:
        raise RepairError(_("A question cannot be merged with itself."))
    repair = _begin(document, user, "merge", f"{second.hash_id[:12]} into {first.hash_id[:12]}",
                    questions=[first, second], figures=list(second.figures.all()))  # fmt: skip
    taken = _stored_parts(second)
    merged = services.merge_questions(first=first, second=second, user=_person(user))
    _keep_parts(merged, services.boxes_of(merged), extra=taken)
    _own(merged)
    _own(second)
    _finish(repair)
    return merged


@transaction.atomic
def renumber(*, question: Question, label: str, user: Any) -> Question:
    label = label.strip()[:40]
    if not label:
        raise RepairError(_("Give the question's number."))
    if question.source_document is None:
        raise RepairError(_("That question is not from a PDF."))
    repair = _begin(question.source_document, user, "renumber", label, questions=[question])
    old = getattr(Segment.objects.filter(question=question).first(), "label", "")
    _own(question, label=label)
    # The number is no content field: the history says it changed, the version moves on.
    current = Question.objects.select_for_update().get(pk=question.pk)
    Question.objects.filter(pk=current.pk).update(version=F("version") + 1, updated=timezone.now())
    QuestionEdit.objects.create(question=current, user=_person(user), field="number", version=current.version + 1,
                                old=old, new=label, note="renumbered on the segmentation screen")  # fmt: skip
    _finish(repair)
    current.refresh_from_db()
    return current


@transaction.atomic
def move_figure(*, figure: Figure, to: Question, user: Any) -> Figure:
    """A figure given to the question next to its own: it goes, with its region, to ``to``."""
    source = figure.question
    document = source.source_document
    if document is None:
        raise RepairError(_("That question is not from a PDF."))
    _in_document(document, to)
    if to.pk == source.pk:
        raise RepairError(_("The figure is already this question's."))
    repair = _begin(document, user, "figure", f"figure {figure.pk} to {to.hash_id[:12]}", questions=[source, to],
                    figures=[figure])  # fmt: skip
    box = _figure_box(figure)
    position = (to.figures.order_by("-position").values_list("position", flat=True).first() or -1) + 1
    Figure.objects.filter(pk=figure.pk).update(question=to, position=position)
    note = f"figure moved from {source.hash_id[:12]} to {to.hash_id[:12]}"
    _set_state(source, user, note, boxes=[b for b in services.boxes_of(source) if b != box])
    _set_state(to, user, note, boxes=[*to.boxes, *([box] if box else [])])
    _own(source)
    _own(to)
    _finish(repair)
    figure.refresh_from_db()
    return figure


@transaction.atomic
def move_answer(*, source: Question, to: Question, user: Any) -> Question:
    """An answer (and solution) read into the wrong question: it goes to ``to``, in place of its own
    where ``to`` had none, after it otherwise."""
    document = source.source_document
    if document is None:
        raise RepairError(_("That question is not from a PDF."))
    _in_document(document, to)
    if to.pk == source.pk:
        raise RepairError(_("The answer is already this question's."))
    if not source.answers and not source.raw_solution:
        raise RepairError(_("That question has no answer to move."))
    repair = _begin(document, user, "answer", f"{source.hash_id[:12]} to {to.hash_id[:12]}", questions=[source, to])
    note = f"answer moved from {source.hash_id[:12]} to {to.hash_id[:12]}"
    _edit(to, user, note, answers=[*to.answers, *source.answers],
          raw_solution="\n".join(t for t in (to.raw_solution, source.raw_solution) if t))  # fmt: skip
    _edit(source, user, note, answers=[], raw_solution="")
    _own(source)
    _own(to)
    # The answer's and solution's regions go with them.
    moving = [r for r in _stored_parts(source) if r[0] in ("answer", "solution")]
    Segment.objects.filter(question=source).update(regions=[r for r in _stored_parts(source) if r not in moving])
    Segment.objects.filter(question=to).update(regions=_stored_parts(to) + moving)
    _finish(repair)
    return Question.objects.get(pk=to.pk)


@transaction.atomic
def mark(*, question: Question, kind: str, user: Any, count: int = 0) -> Question:
    """A region that is no question of its own: a shared stem (its text goes before each of the next
    ``count`` questions) or not a question at all (a title, a note). Either way it is rejected with the
    reason, so it is neither exported nor brought back by a re-import."""
    document = question.source_document
    if document is None:
        raise RepairError(_("That question is not from a PDF."))
    if kind not in (Segment.Kind.STEM, Segment.Kind.NOT_QUESTION):
        raise RepairError(_("Unknown kind of region."))
    targets: list[Question] = []
    if kind == Segment.Kind.STEM:
        ordered = [q for q in document_questions(document) if q.status != Question.Status.REJECTED]
        after = ordered[[q.pk for q in ordered].index(question.pk) + 1 :] if question in ordered else []
        targets = after[: max(0, int(count))]
        if not targets:
            raise RepairError(_("A shared stem needs the questions it introduces."))
    repair = _begin(document, user, kind, f"{question.hash_id[:12]}", questions=[question, *targets])
    for target in targets:
        _edit(target, user, f"shared stem {question.hash_id[:12]}", text=f"{question.text}\n{target.text}".strip())
        _own(target)
    reason = "shared stem" if kind == Segment.Kind.STEM else "not a question"
    question = _set_state(question, user, reason, status=Question.Status.REJECTED, reject_reason=reason)
    _own(question, kind=kind)
    _finish(repair)
    return question


@transaction.atomic
def page_done(*, page: Page, user: Any, done: bool = True) -> Page:
    """A person checked the cuts of this page (or takes that back)."""
    repair = _begin(page.document, user, "page", f"page {page.number}", pages=[page])
    page.done_at = timezone.now() if done else None
    page.done_by = _person(user) if done else None
    page.save(update_fields=["done_at", "done_by"])
    _finish(repair)
    return page


# --- one change by name, and redo -------------------------------------------------------------------------

# What a change is given, by name: kept on its Repair (``after["params"]``) so that a redo replays it.
PARAMS = ("action", "page", "x0", "y0", "x1", "y1", "question", "index", "y", "label", "other", "figure", "count",
          "done")  # fmt: skip


def _number(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RepairError(_("A number was expected.")) from None


def _document_question(document: SourceDocument, value: Any) -> Question:
    question = Question.objects.filter(pk=_number(value), source_document=document).first()
    if question is None:
        raise RepairError(_("That question is not from this document."))
    return question


def _document_page(document: SourceDocument, value: Any) -> Page:
    page = document.pages.filter(number=_number(value)).first()
    if page is None:
        raise RepairError(_("That page is not in this document."))
    return page


@transaction.atomic
def apply_change(*, document: SourceDocument, values: Any, user: Any) -> Repair | None:
    """One change on the segmentation screen by name (the screen's POST, or a redo), kept on its Repair so
    that it can be redone after an undo. ``undo`` and ``redo`` are changes too."""
    given = {name: values.get(name) for name in PARAMS if values.get(name) is not None}
    action = given.get("action", "")
    if action == "undo":
        return undo(document=document, user=user)
    if action == "redo":
        return redo(document=document, user=user)
    mark_id = document.repairs.order_by("-id").values_list("id", flat=True).first() or 0
    box = [given.get(name) for name in ("x0", "y0", "x1", "y1")]
    if action == "add":
        add_question(document=document, page=_document_page(document, given.get("page")), box=box, user=user,
                     label=str(given.get("label", "")))  # fmt: skip
    elif action == "move":
        move_box(question=_document_question(document, given.get("question")), index=_number(given.get("index")),
                 box=box, user=user)  # fmt: skip
    elif action == "split":
        split(question=_document_question(document, given.get("question")), index=_number(given.get("index")),
              y=given.get("y"), user=user, label=str(given.get("label", "")))  # fmt: skip
    elif action == "merge":
        merge(first=_document_question(document, given.get("question")),
              second=_document_question(document, given.get("other")), user=user)  # fmt: skip
    elif action == "renumber":
        renumber(question=_document_question(document, given.get("question")), label=str(given.get("label", "")),
                 user=user)  # fmt: skip
    elif action == "figure":
        figure = Figure.objects.filter(pk=_number(given.get("figure")), question__source_document=document).first()
        if figure is None:
            raise RepairError(_("That figure is not from this document."))
        move_figure(figure=figure, to=_document_question(document, given.get("other")), user=user)
    elif action == "answer":
        move_answer(source=_document_question(document, given.get("question")),
                    to=_document_question(document, given.get("other")), user=user)  # fmt: skip
    elif action in (Segment.Kind.STEM, Segment.Kind.NOT_QUESTION):
        mark(question=_document_question(document, given.get("question")), kind=action, user=user,
             count=_number(given.get("count") or "0"))  # fmt: skip
    elif action == "page_done":
        page_done(page=_document_page(document, given.get("page")), user=user, done=given.get("done", "1") == "1")
    else:
        raise RepairError(_("Unknown change."))
    made = document.repairs.filter(id__gt=mark_id).order_by("-id").first()
    if made is not None:
        made.after = {**made.after, "params": {k: str(v) for k, v in given.items()}}
        made.save(update_fields=["after"])
    return made


def redoable(document: SourceDocument) -> Repair | None:
    """The change an undo took back most recently, while no new change was made since that undo (a redo
    is no new change: redoing two undone changes in turn works). None where there is nothing to redo."""
    repairs = list(document.repairs.order_by("-id")[:200])
    undone = [r for r in repairs if r.undone_at is not None and not r.after.get("redone") and r.after.get("params")]
    if not undone:
        return None
    last = max(undone, key=lambda r: (r.undone_at, r.pk))
    assert last.undone_at is not None
    if any(r.created > last.undone_at and not r.after.get("redo_of") for r in repairs):
        return None
    return last


@transaction.atomic
def redo(*, document: SourceDocument, user: Any) -> Repair:
    """Makes the last undone change again, with what it was given (a question it created is created anew)."""
    repair = redoable(document)
    if repair is None:
        raise RepairError(_("There is nothing to redo."))
    made = apply_change(document=document, values=repair.after["params"], user=user)
    if made is None:
        raise RepairError(_("There is nothing to redo."))
    made.after = {**made.after, "redo_of": repair.pk}
    made.save(update_fields=["after"])
    repair.after = {**repair.after, "redone": made.pk}
    repair.save(update_fields=["after"])
    return made
