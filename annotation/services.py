"""Question bank operations. Screens, API, jobs and commands all call these.

Every change to a question's content goes through ``edit_question``: it checks
the version the editor started from (optimistic concurrency), writes one
QuestionEdit per changed field, and re-runs the structural checks.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext

from annotation import checks, images
from annotation.models import (
    Assignment,
    EditConflict,
    Figure,
    KnowledgePoint,
    LifecycleError,
    Page,
    Question,
    QuestionEdit,
    SourceDocument,
    StepProposal,
)
from annotation.queues import TASK_INPUT
from k12vista.line_reasons import Reason, ReasonError, reason, reason_wording
from k12vista.vocabulary import QuestionType, Subject, stage_of_grade


class QuestionDataError(ReasonError):
    """The data for a question is invalid; the message says which field and why (``reason``: as a code,
    for an import's report, k12vista.line_reasons)."""


@dataclass
class FigureData:
    """A figure to attach: encoded image bytes plus where it came from."""

    content: bytes
    name: str = "figure.png"
    origin: str = Figure.Origin.IMPORTED
    page: Page | None = None
    bbox: list[float] | None = None
    kind: str = Figure.Kind.FIGURE
    # What the source held before the figure was enlarged: quality flags are measured on it.
    source_size: tuple[int, int] | None = None
    source_sharpness: float | None = None


@dataclass
class QuestionData:
    """Everything needed to create a question; importers fill this in."""

    hash_id: str
    subject: str
    grade: int
    qtype: str
    text: str = ""
    options: list[dict] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    raw_solution: str = ""
    solution_steps: list[str] = field(default_factory=list)
    knowledge_points: list[str] = field(default_factory=list)
    difficulty: float | None = None
    source: str = ""
    figures: list[FigureData] = field(default_factory=list)
    source_document: SourceDocument | None = None
    source_page: Page | None = None
    bbox: list[float] | None = None
    boxes: list[list[float]] = field(default_factory=list)  # [page number, x0, y0, x1, y1], as Question.boxes
    figure_positions: list[int] = field(default_factory=list)  # as Question.figure_positions
    grade_known: bool = True  # as Question.grade_known


# --- content and its hash ----------------------------------------------------


def content_of(question: Question | QuestionData, knowledge_points: Iterable[str] | None = None) -> dict:
    """The canonical content compared on re-import: fields, knowledge points, figure bytes excluded."""
    content = {name: getattr(question, name) for name in Question.CONTENT_FIELDS}
    if knowledge_points is None:
        knowledge_points = (
            question.knowledge_points
            if isinstance(question, QuestionData)
            else question.knowledge_points.values_list("name", flat=True)
        )
    content["knowledge_points"] = sorted(knowledge_points)
    # Only when they say something: the hashes stored before these fields existed stay valid.
    if question.figure_positions:
        content["figure_positions"] = list(question.figure_positions)
    if not question.grade_known:
        content["grade_known"] = False
    return content


def hash_content(content: dict) -> str:
    encoded = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def validate(data: QuestionData) -> None:
    """Every field of the kind and size its column holds: every path into the bank (create, edit, import,
    correction) calls this, so a value of the wrong kind is refused here, never met later by the checks.
    Raises QuestionDataError with a message in the reader's language."""
    if not isinstance(data.hash_id, str) or not 1 <= len(data.hash_id) <= HASH_ID_MAX:
        raise QuestionDataError(reason("hash_id_length"))
    if not isinstance(data.subject, str) or data.subject not in Subject.values:
        raise QuestionDataError(reason("bad_subject", value=data.subject))
    if not isinstance(data.qtype, str) or data.qtype not in QuestionType.values:
        raise QuestionDataError(reason("bad_type", value=data.qtype))
    if isinstance(data.grade, bool) or not isinstance(data.grade, int) or not 1 <= data.grade <= 12:
        raise QuestionDataError(reason("bad_grade", value=data.grade))
    for name in ("text", "raw_solution", "source"):
        value, limit = getattr(data, name), TEXT_LIMITS.get(name)
        if not isinstance(value, str):
            raise QuestionDataError(reason("must_be_text", field=field_reason(name)))
        if limit is not None and len(value) > limit:
            raise QuestionDataError(reason("too_long", field=field_reason(name), limit=limit))
    for name in ("answers", "solution_steps", "knowledge_points"):
        value = getattr(data, name)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise QuestionDataError(reason("must_be_strings", field=field_reason(name)))
    if not isinstance(data.options, list) or not all(
        isinstance(o, dict) and isinstance(o.get("label"), str) and isinstance(o.get("text"), str) for o in data.options
    ):
        raise QuestionDataError(reason("bad_options"))
    difficulty = data.difficulty
    if difficulty is not None and (
        isinstance(difficulty, bool) or not isinstance(difficulty, int | float) or not 0 <= difficulty <= 1
    ):
        raise QuestionDataError(reason("bad_difficulty", value=difficulty))


def field_label(name: str) -> str:
    """``raw_solution`` -> 原始解析: a question field's name as the reader reads it, else the name as stored."""
    if name == "knowledge_points":
        return gettext("knowledge points")
    if name == "figures":
        return gettext("Figures")
    try:
        return str(getattr(Question._meta.get_field(name), "verbose_name", name))
    except FieldDoesNotExist:
        return name


def field_reason(name: str) -> Reason:
    """A question field's name as a reason's parameter, worded when shown (field_label)."""
    return reason("question_field", name=name)


@reason_wording("question_field")
def _field_wording(params: dict[str, Any]) -> str:
    return field_label(str(params["name"]))


# The text columns with a length limit: validate() refuses what they cannot hold.
HASH_ID_MAX = Question._meta.get_field("hash_id").max_length or 64
TEXT_LIMITS = {"source": Question._meta.get_field("source").max_length}


def stored_point_names(names: Iterable[str]) -> list[str]:
    """The names a question's knowledge points are stored under (here and in the bulk import):
    stripped, non-empty, at most 200 characters, once each."""
    return list(dict.fromkeys(n.strip()[:200] for n in names if n and n.strip()))


def knowledge_points_for(subject: str, names: Iterable[str]) -> list[KnowledgePoint]:
    return [KnowledgePoint.objects.get_or_create(subject=subject, name=name)[0] for name in stored_point_names(names)]


# --- creating -----------------------------------------------------------------


def create_question(*, data: QuestionData, user: Any = None, note: str = "created") -> Question:
    """Creates a question with its figures and flags, all or nothing.

    Raises QuestionDataError for invalid data or a figure that is not an image.
    The slow parts (decoding figures, the checks, KaTeX) run before the
    transaction opens, so the database is locked only for the writes.
    """
    validate(data)
    prepared = [images.prepare_figure(f.content, name=f.name) for f in data.figures]
    question = Question(**question_row(data, content_hash=hash_content(content_of(data))))
    unsaved = [Figure(**figure_row(i, f, p)) for i, (f, p) in enumerate(zip(data.figures, prepared, strict=True))]
    findings = checks.rule_findings(question, figures=unsaved)
    with transaction.atomic():
        question.save()
        question.knowledge_points.set(knowledge_points_for(data.subject, data.knowledge_points))
        for position, row in enumerate(unsaved):
            row.question = question
            _store_figure(row, prepared[position])
        edit = creation_edit_row(user_id=getattr(user, "pk", None), note=note)
        QuestionEdit.objects.create(question=question, **edit)
        checks.refresh_rule_flags(question, findings)
    return question


# The rows a new question is written as. create_question and the bulk import (annotation.jsonl_bulk)
# both build them here, so the two cannot drift (tests/test_creation_paths.py compares what each
# stores). Plain dicts of attnames, not model instances: the bulk path builds them for every line
# in worker processes and sends them back (a Question cost two thirds of the rules' time there).
# A column not given takes the model's default on both paths.


def question_row(data: QuestionData, *, content_hash: str) -> dict[str, Any]:
    """A new question's columns from its data (validated already)."""
    return {
        "hash_id": data.hash_id, "subject": str(data.subject), "grade": data.grade,
        "stage": str(stage_of_grade(data.grade).value), "qtype": str(data.qtype), "text": data.text,
        "options": data.options, "answers": data.answers, "raw_solution": data.raw_solution,
        "solution_steps": data.solution_steps, "difficulty": data.difficulty, "source": data.source,
        "source_document_id": data.source_document.pk if data.source_document else None,
        "source_page_id": data.source_page.pk if data.source_page else None, "bbox": data.bbox,
        "boxes": data.boxes, "figure_positions": data.figure_positions, "grade_known": data.grade_known,
        "content_hash": content_hash,
    }  # fmt: skip


def figure_row(position: int, data: FigureData, prepared: images.PreparedFigure) -> dict[str, Any]:
    """A new figure's columns but its question and file; its quality is the source's where the source is known."""
    source = data.source_size or (None, None)
    sharpness = data.source_sharpness if data.source_size else prepared.sharpness
    return {"position": position, "width": prepared.width, "height": prepared.height, "sharpness": sharpness,
            "origin": str(data.origin), "page_id": data.page.pk if data.page else None, "bbox": data.bbox,
            "kind": str(data.kind), "source_width": source[0], "source_height": source[1]}  # fmt: skip


def creation_edit_row(*, user_id: int | None, note: str) -> dict[str, Any]:
    """The history row a new question starts with: version 1, every field ("*") new."""
    return {"user_id": user_id, "field": "*", "version": 1, "old": None, "new": None, "note": note}


def attach_figure(
    *,
    question: Question,
    prepared: images.PreparedFigure,
    position: int,
    origin: str,
    page: Page | None = None,
    bbox: list[float] | None = None,
) -> Figure:
    figure = Figure(
        question=question, position=position, origin=origin, page=page, bbox=bbox, sharpness=prepared.sharpness
    )
    return _store_figure(figure, prepared)


def _store_figure(figure: Figure, prepared: images.PreparedFigure) -> Figure:
    question, position = figure.question, figure.position
    figure.image.save(f"{question.hash_id}-{position}.{prepared.extension}", ContentFile(prepared.content), save=False)
    # Known already; saves Django from reopening the file to measure it.
    figure.width, figure.height = prepared.width, prepared.height
    figure.save()
    return figure


# --- editing ------------------------------------------------------------------

EDITABLE_FIELDS = (*Question.CONTENT_FIELDS, "knowledge_points")


@transaction.atomic
def edit_question(
    *, question: Question, changes: dict[str, Any], user: Any, expected_version: int, note: str = ""
) -> Question:
    """Saves changed fields if nobody saved since ``expected_version``.

    The version check and the write are one conditional UPDATE, so of two
    concurrent saves exactly one wins; the other gets EditConflict with what
    the winner changed, and its own changes are not written.
    """
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise QuestionDataError(
            gettext("these fields cannot be edited: %(fields)s") % {"fields": ", ".join(sorted(unknown))}
        )
    current = Question.objects.select_for_update().get(pk=question.pk)
    if current.version != expected_version:
        raise EditConflict(current, current.changes_since(expected_version))

    before = content_of(current)
    after = {**before, **changes}
    validate(QuestionData(hash_id=current.hash_id, knowledge_points=after["knowledge_points"],
                          **{k: after[k] for k in Question.CONTENT_FIELDS}))  # fmt: skip
    if "knowledge_points" in changes:
        after["knowledge_points"] = sorted(dict.fromkeys(n.strip() for n in changes["knowledge_points"] if n.strip()))
    if "grade" in changes and changes["grade"] != before["grade"]:
        after.pop("grade_known", None)  # a person set the grade: it is known now

    changed = {name: (before[name], after[name]) for name in after if before[name] != after[name]}
    if not changed:
        return current
    fields = {name: after[name] for name in changed if name != "knowledge_points"}
    if "grade" in fields:
        fields["stage"] = stage_of_grade(fields["grade"])
        fields["grade_known"] = True
    won = Question.objects.filter(pk=current.pk, version=expected_version).update(
        **fields, version=F("version") + 1, content_hash=hash_content(after), updated=timezone.now()
    )
    if not won:  # cannot happen under select_for_update, kept for databases without row locks
        current.refresh_from_db()
        raise EditConflict(current, current.changes_since(expected_version))
    if "knowledge_points" in changed:
        current.knowledge_points.set(knowledge_points_for(after["subject"], after["knowledge_points"]))
    QuestionEdit.objects.bulk_create(
        QuestionEdit(question=current, user=user, field=name, version=expected_version + 1, old=old, new=new, note=note)
        for name, (old, new) in changed.items()
    )
    current.refresh_from_db()
    checks.refresh_rule_flags(current)
    return current


# --- lifecycle ----------------------------------------------------------------
# The work's steps are methods of Question (accept_ocr, submit_steps) and of its
# querysets (audit, release); rejecting and sending back for rework live here.


def _set_status(current: Question, target: str, *, user: Any, note: str, **fields: Any) -> None:
    """Moves a locked question to ``target`` with a new version and the history row saying why."""
    Question.objects.filter(pk=current.pk).update(
        status=target, version=F("version") + 1, updated=timezone.now(), **fields
    )
    QuestionEdit.objects.create(
        question=current,
        user=user,
        field="status",
        version=current.version + 1,
        old=current.status,
        new=target,
        note=note[:300],
    )


@transaction.atomic
def reject(*, question: Question, reason: str, user: Any) -> Question:
    reason = reason.strip()
    if not reason:
        raise QuestionDataError(gettext("a rejection needs a reason"))
    current = Question.objects.select_for_update().get(pk=question.pk)
    _set_status(current, Question.Status.REJECTED, user=user, note=reason, reject_reason=reason)
    question.refresh_from_db()
    return question


REJECT_BATCH = 500


def reject_many(
    questions: Iterable[int] | Any,
    *,
    reason: str,
    user: Any,
    keep: Sequence[str] = (Question.Status.REJECTED,),
    batch_size: int = REJECT_BATCH,
    progress: Any = None,
) -> int:
    """:func:`reject` for a set: one UPDATE and one bulk insert of the history
    rows per batch, the same rows ``reject`` writes one by one.

    ``questions`` is a queryset of questions or their ids. Questions whose status
    is in ``keep`` are left alone (by default those already rejected, so running
    it again changes nothing). Each batch is locked, re-read and written in its
    own transaction; ``progress(done, total)`` is called after each. Returns how
    many questions were rejected now.
    """
    reason = reason.strip()
    if not reason:
        raise QuestionDataError(gettext("a rejection needs a reason"))
    if hasattr(questions, "values_list"):
        ids = sorted(questions.values_list("pk", flat=True))
    else:
        ids = sorted({int(pk) for pk in questions})
    rejected = 0
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        with transaction.atomic():
            locked = (
                Question.objects.select_for_update()
                .filter(pk__in=chunk)
                .exclude(status__in=list(keep))
                .order_by("id")
                .values_list("id", "status", "version")
            )
            rows = list(locked)
            if rows:
                now = timezone.now()
                Question.objects.filter(pk__in=[pk for pk, _status, _version in rows]).update(
                    status=Question.Status.REJECTED, version=F("version") + 1, updated=now, reject_reason=reason
                )
                QuestionEdit.objects.bulk_create(
                    QuestionEdit(
                        question_id=pk,
                        user=user,
                        field="status",
                        version=version + 1,
                        old=status,
                        new=Question.Status.REJECTED,
                        note=reason[:300],
                        created=now,
                    )  # fmt: skip
                    for pk, status, version in rows
                )
                rejected += len(rows)
        if progress is not None:
            progress(min(start + batch_size, len(ids)), len(ids))
    return rejected


@transaction.atomic
def submit_steps(*, question: Question, user: Any, proposal: StepProposal | None = None) -> Question:
    """Corrected steps are final: the question moves on and the proposal is marked used."""
    if not question.solution_steps:
        raise QuestionDataError(gettext("a solution needs at least one step"))
    question.submit_steps(by=user, expected_version=question.version)
    if proposal is not None:
        StepProposal.objects.filter(pk=proposal.pk).update(status=StepProposal.Status.USED)
    return question


# A question sent back by an audit waits this long for its annotator before the
# queue lets anyone else take it (the usual lock is minutes, a rework may wait for a shift).
REWORK_HOLD = timedelta(days=7)


@transaction.atomic
def return_for_rework(*, question: Question, task: str, annotator: Any, note: str, by: Any) -> Any:
    """Sends a question back to the stage ``task`` produced, for ``annotator``, with the note.

    The question moves back to the status that task starts from and an open
    assignment carrying the note waits in the annotator's queue. Refused (with
    LifecycleError) when the question has not been through that stage or is
    already held for it.
    """
    note = note.strip()
    if not note:
        raise QuestionDataError(gettext("a rework needs a note saying what to fix"))
    if task not in TASK_INPUT:
        raise QuestionDataError(gettext("unknown task %(task)s") % {"task": repr(task)})
    current = Question.objects.select_for_update().get(pk=question.pk)
    order: list[str] = list(Question.STATUS_ORDER)
    target = TASK_INPUT[task]
    if current.status not in order or order.index(current.status) <= order.index(target):
        raise LifecycleError(f"question {current.hash_id} is {current.status}: it has not been through {task} yet")
    if Assignment.objects.open().filter(question=current, task=task).exists():
        raise LifecycleError(f"question {current.hash_id} is already being worked on for {task}")
    _set_status(current, target, user=by, note=f"rework: {note}")
    question.refresh_from_db()
    return Assignment.objects.create(question=current, annotator=annotator, task=task, rework_note=note,
                                     locked_until=timezone.now() + REWORK_HOLD)  # fmt: skip


def add_step_proposal(*, question: Question, steps: list[str], run_ref: str = "", model_name: str = "") -> StepProposal:
    """A model's restructured solution (the inference app calls this); older
    pending proposals are superseded."""
    steps = [s.strip() for s in steps if isinstance(s, str) and s.strip()]
    if not steps:
        raise QuestionDataError(gettext("a proposal needs at least one step"))
    question.step_proposals.filter(status=StepProposal.Status.PENDING).update(status=StepProposal.Status.DISCARDED)
    return StepProposal.objects.create(question=question, steps=steps, run_ref=run_ref, model_name=model_name)


def step_diff(proposal: Sequence[str], steps: Sequence[str]) -> list[tuple[str, str]]:
    """Line diff of steps against a proposal: ("same"|"added"|"removed", text)."""
    import difflib

    out: list[tuple[str, str]] = []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(a=list(proposal), b=list(steps), autojunk=False).get_opcodes():
        if op == "equal":
            out += [("same", s) for s in proposal[a0:a1]]
        else:
            out += [("removed", s) for s in proposal[a0:a1]]
            out += [("added", s) for s in steps[b0:b1]]
    return out


# --- figures, splitting and merging (OCR review) ------------------------------------


@transaction.atomic
def recrop_figure(*, figure: Figure, bbox: Sequence[float], user: Any) -> Figure:
    """Cuts the figure again from its rendered page with a corrected box (PDF points)."""
    if figure.page is None or not figure.page.width_pt:
        raise QuestionDataError(gettext("this figure did not come from a PDF page, so it has no crop box"))
    page = figure.page
    x0, y0, x1, y1 = (float(v) for v in bbox)
    x0, x1 = sorted((max(0.0, x0), min(page.width_pt, x1)))
    y0, y1 = sorted((max(0.0, y0), min(page.height_pt, y1)))
    if x1 - x0 < 2 or y1 - y0 < 2:
        raise QuestionDataError(gettext("the crop box is empty"))
    scale = page.width / page.width_pt
    with page.image.open("rb") as stored:
        crop = images.open_image(stored.read(), name=f"page {page.number}").crop(
            (round(x0 * scale), round(y0 * scale), round(x1 * scale), round(y1 * scale))
        )
    buffer = io.BytesIO()
    crop.save(buffer, "PNG")
    prepared = images.prepare_figure(buffer.getvalue(), name="crop")
    old_bbox, old_file = figure.bbox, figure.image.name
    figure.bbox = [round(v, 2) for v in (x0, y0, x1, y1)]
    figure.sharpness = prepared.sharpness
    # Cut from the rendered page: its pixels are the source now.
    figure.source_width, figure.source_height = crop.size
    figure.image.save(
        f"{figure.question.hash_id}-{figure.position}-crop.png", ContentFile(prepared.content), save=False
    )
    figure.width, figure.height = prepared.width, prepared.height
    figure.save()
    if old_file:  # a stored figure always has a name; the check keeps delete() from being given None
        figure.image.storage.delete(old_file)
    question = figure.question
    Question.objects.filter(pk=question.pk).update(version=F("version") + 1, updated=timezone.now())
    question.refresh_from_db()
    QuestionEdit.objects.create(question=question, user=user, field=f"figure {figure.position + 1}",
                                version=question.version, old=old_bbox, new=figure.bbox, note="recrop")  # fmt: skip
    checks.refresh_rule_flags(question)
    return figure


@transaction.atomic
def split_question(*, question: Question, at: int, user: Any) -> Question:
    """Splits a detected question whose text holds two questions: the text from
    character ``at`` on becomes a new draft question on the same page."""
    current = Question.objects.select_for_update().get(pk=question.pk)
    first, second = current.text[:at].rstrip(), current.text[at:].strip()
    if not first or not second:
        raise QuestionDataError(gettext("split inside the text, so that both parts keep some of it"))
    # A PDF question's id is a whole SHA-256 (64 characters): cut to leave room for the suffix, never the suffix.
    base = current.hash_id[:56]
    suffix = Question.objects.filter(hash_id__startswith=f"{base}-s").count() + 1
    data = QuestionData(
        hash_id=f"{base}-s{suffix}", subject=current.subject, grade=current.grade,
        qtype=current.qtype, text=second, source=current.source, source_document=current.source_document,
        source_page=current.source_page, bbox=current.bbox, boxes=current.boxes,
    )  # fmt: skip
    created = create_question(data=data, user=user, note=f"split from {current.hash_id}")
    edit_question(question=current, changes={"text": first}, user=user, expected_version=current.version,
                  note=f"split into {created.hash_id}")  # fmt: skip
    return created


def boxes_of(question: Question) -> list[list[float]]:
    """[page, x0, y0, x1, y1] for each region of the question (its first-page box for older imports)."""
    if question.boxes:
        return question.boxes
    if question.bbox and question.source_page is not None:
        return [[question.source_page.number, *question.bbox]]
    return []


def _renumbered(text: str, offset: int) -> str:
    return checks.FORMULA_PLACEHOLDER.sub(lambda m: f"[[formula:{int(m.group(1)) + offset}]]", text)


@transaction.atomic
def merge_questions(*, first: Question, second: Question, user: Any) -> Question:
    """Joins a question cut in two by the detector: the second's text, options,
    answers and figures move to the first, and the second is rejected as merged."""
    if first.pk == second.pk:
        raise QuestionDataError(gettext("a question cannot be merged with itself"))
    first = Question.objects.select_for_update().get(pk=first.pk)
    second = Question.objects.select_for_update().get(pk=second.pk)
    changes = {
        "text": "\n".join(t for t in (first.text, second.text) if t),
        "options": first.options + second.options,
        "answers": first.answers + second.answers,
    }
    offset = first.figures.count()
    for figure in second.figures.all():
        Figure.objects.filter(pk=figure.pk).update(question=first, position=offset + figure.position)
    # Its formula placeholders follow their images to their new positions.
    changes["text"] = "\n".join(t for t in (first.text, _renumbered(second.text, offset)) if t)
    changes["options"] = first.options + [{**o, "text": _renumbered(o.get("text", ""), offset)} for o in second.options]
    first.boxes = first.boxes + second.boxes
    Question.objects.filter(pk=first.pk).update(boxes=first.boxes)
    merged = edit_question(question=first, changes=changes, user=user, expected_version=first.version,
                           note=f"merged {second.hash_id}")  # fmt: skip
    reject(question=second, reason=f"merged into {first.hash_id}", user=user)
    checks.refresh_rule_flags(merged)
    return merged
