"""Exporting questions: the reference release format (JSONL) or ours (a zip of
``questions.jsonl`` and ``images/``), both readable by ``jsonl_import``.

Questions are streamed in chunks with their figures and knowledge points
prefetched, and the output is written to a temporary name and renamed, so a
crashed or repeated job never leaves half a file under the final name.

The reference records carry, beyond the release's keys, ``grade``,
``knowledge_points``, ``difficulty``, ``source``, ``options``,
``raw_solution`` and ``solution_steps``; release readers ignore them, and
re-importing the file gives back the same content hashes.
"""

from __future__ import annotations

import base64
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from PIL import Image

from annotation.job_shapes import ExportQuestionsParams
from annotation.models import Assignment, Figure, Question
from annotation.reference_format import put_placeholders, take_placeholders
from k12vista.files import sha256_of
from k12vista.job_shapes import WrittenFile
from k12vista.jobs import Progress, job_handler
from k12vista.models import Job
from k12vista.vocabulary import QUESTION_TYPE_ZH, QuestionType, Stage, Subject, question_type_from_name, release_tag

FORMATS = ("reference", "studio")
CHUNK_SIZE = 500
PROGRESS_EVERY = 100


class ExportError(ValueError):
    """Bad export parameters; the message says which."""


# --- choosing questions -----------------------------------------------------------


def filter_questions(params: dict[str, Any]) -> QuerySet[Question]:
    """Questions matching ``subject``, ``grade``, ``stage``, ``qtype``, ``status``, ``flag``,
    ``knowledge_point``, ``q``, ``source_document`` and ``hash_ids`` (all optional).

    Values are checked here, so that a typo fails the export instead of
    exporting nothing; the filtering itself is the list screen's.
    """
    filters = {name: params.get(name) for name in ("subject", "grade", "stage", "qtype", "status")}
    allowed = {"subject": Subject.values, "stage": Stage.values, "status": Question.Status.values}
    for name, values in allowed.items():
        if filters[name] and filters[name] not in values:
            raise ExportError(f"unknown {name} {filters[name]!r} (expected one of {', '.join(values)})")
    if filters["grade"]:
        try:
            filters["grade"] = int(filters["grade"])
        except (TypeError, ValueError):
            raise ExportError(f"grade must be a number, got {filters['grade']!r}") from None
    if filters["qtype"]:
        try:
            filters["qtype"] = question_type_from_name(filters["qtype"]).value
        except ValueError as exc:
            raise ExportError(str(exc)) from None
    # The list screen's other filters pass through as they are.
    filters |= {name: params.get(name) for name in ("flag", "knowledge_point", "q", "source_document")}
    questions = Question.objects.matching(filters).order_by("id")
    if params.get("hash_ids"):
        questions = questions.filter(hash_id__in=list(params["hash_ids"]))
    return questions


# --- records ----------------------------------------------------------------------


def options_block(question: Question) -> str:
    """The options written into the text, as the release files have them, and the figure's
    ``<image>`` placeholder where the source had it (at the stem's end when not known).

    Every record gets one, figure or not: the reference judge splits its prompt there and
    fails on a record without it (the reference code then sends an empty ``img``)."""
    # Text stored before the importers took the placeholder out still holds it: its places count.
    stored, legacy = take_placeholders(question.text)
    text = put_placeholders(stored, question.figure_positions or legacy, at_least_one=True)
    if not question.options:
        return text
    lines = [f"{option['label']}. {option['text']}" for option in question.options]
    return "\n".join([text, *lines])


def format_solution(question: Question) -> str:
    if question.solution_steps:
        return "\n".join(f"步骤{n}：{step}" for n, step in enumerate(question.solution_steps, start=1))
    return question.raw_solution


def jpeg_base64(figure: Figure) -> str:
    """The figure as base64 JPEG (the release's image format), re-encoded only when stored otherwise."""
    with figure.image.open("rb") as stored:
        content = stored.read()
    if not (figure.image.name or "").lower().endswith((".jpg", ".jpeg")):
        buffer = io.BytesIO()
        Image.open(io.BytesIO(content)).convert("RGB").save(buffer, "JPEG", quality=90)
        content = buffer.getvalue()
    return base64.b64encode(content).decode("ascii")


def knowledge_point_names(question: Question) -> list[str]:
    # .all() reads the prefetch cache; values_list would query once per question.
    return sorted(point.name for point in question.knowledge_points.all())


def reference_record(question: Question) -> dict:
    figures = list(question.figures.all())
    record = {
        "hash_id": question.hash_id,
        "question": options_block(question),
        "type": QUESTION_TYPE_ZH[QuestionType(question.qtype)],
        "subject": release_tag(question.subject, question.grade),
        "img": jpeg_base64(figures[0]) if figures else "",
        "format_answer": {"ground_truth": question.answers, "format_solution": format_solution(question)},
        # The stage's last grade stands in for an unknown one; it is never written as a grade.
        "grade": question.grade if question.grade_known else None,
        "knowledge_points": knowledge_point_names(question),
        "difficulty": question.difficulty,
        "source": question.source,
        "options": question.options,
        "raw_solution": question.raw_solution,
        "solution_steps": question.solution_steps,
    }
    return record


def image_name(question: Question, figure: Figure) -> str:
    return f"images/{question.hash_id}-{figure.position}{Path(figure.image.name or '').suffix.lower()}"


def studio_record(question: Question, figure_names: list[str]) -> dict:
    return {
        "hash_id": question.hash_id,
        "subject": question.subject,
        "grade": question.grade,
        "type": question.qtype,
        "text": question.text,
        "options": question.options,
        "answers": question.answers,
        "raw_solution": question.raw_solution,
        "solution_steps": question.solution_steps,
        "knowledge_points": knowledge_point_names(question),
        "difficulty": question.difficulty,
        "source": question.source,
        "figures": [{"path": name} for name in figure_names],
        "figure_positions": question.figure_positions,
        "grade_known": question.grade_known,
        # Who reviewed and corrected it, how long they worked on it (active seconds) and under which rules.
        "work": [
            {
                "task": a.task,
                "by": a.annotator.get_username(),
                "done": a.done_at.isoformat(),
                "active_seconds": a.active_seconds,
                "guideline_version": a.guideline_version,
            }
            for a in question.assignments.all()
            if a.done_at is not None
        ],
    }


def json_line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# --- writing ------------------------------------------------------------------------


def streamed(queryset: QuerySet[Question]) -> Any:
    work = Prefetch("assignments", queryset=Assignment.objects.select_related("annotator").order_by("done_at", "id"))
    return queryset.prefetch_related("figures", "knowledge_points", work).iterator(chunk_size=CHUNK_SIZE)


def write_reference(queryset: QuerySet[Question], out: Any, tick: Callable[[], None]) -> int:
    count = 0
    for question in streamed(queryset):
        out.write(json_line(reference_record(question)))
        count += 1
        tick()
    return count


def write_studio(queryset: QuerySet[Question], out: Any, tick: Callable[[], None]) -> int:
    """Images go in as the questions stream; the JSONL waits in a temporary file,
    since a zip can only write one entry at a time."""
    count = 0
    with zipfile.ZipFile(out, "w") as archive, tempfile.TemporaryFile() as lines:
        for question in streamed(queryset):
            names = []
            for figure in question.figures.all():
                names.append(image_name(question, figure))
                with figure.image.open("rb") as stored:
                    # Images are compressed already; deflating them again costs time for nothing.
                    archive.writestr(names[-1], stored.read(), compress_type=zipfile.ZIP_STORED)
            lines.write(json_line(studio_record(question, names)))
            count += 1
            tick()
        lines.seek(0)
        info = zipfile.ZipInfo("questions.jsonl")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as entry:
            for chunk in iter(lambda: lines.read(1024 * 1024), b""):
                entry.write(chunk)
    return count


def export_questions(
    *, queryset: QuerySet[Question], fmt: str, out_path: str | Path,
    progress: Callable[[int, int | None], None] | None = None,
) -> dict:  # fmt: skip
    """Writes the questions to ``out_path``; returns {path, sha256, count, bytes}."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    total = queryset.count()
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress and done % PROGRESS_EVERY == 0:
            progress(done, total)

    if progress:
        progress(0, total)
    partial = out_path.with_name(out_path.name + ".partial")
    try:
        with open(partial, "wb") as out:
            write = write_reference if fmt == "reference" else write_studio
            count = write(queryset, out, tick)
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    if progress:
        progress(count, count)
    return {"path": str(out_path), "sha256": sha256_of(out_path), "count": count, "bytes": out_path.stat().st_size}


def export_file_name(job: Job, fmt: str) -> str:
    # Named by the job, so a second delivery of the same job rewrites the same file.
    return f"exports/questions-{job.pk}-{fmt}.{'jsonl' if fmt == 'reference' else 'zip'}"


@job_handler("annotation.export_questions", queue=Job.Queue.CPU, params=ExportQuestionsParams, result=WrittenFile)
def export_questions_job(job: Job, progress: Progress) -> dict:
    fmt = job.params.get("fmt", "reference")
    name = export_file_name(job, fmt)
    result = export_questions(
        queryset=filter_questions(job.params.get("filters") or {}),
        fmt=fmt,
        out_path=Path(settings.MEDIA_ROOT) / name,
        progress=progress,
    )
    return {**result, "path": name}
