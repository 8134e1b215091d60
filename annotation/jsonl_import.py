"""Importing questions from a JSONL file, plain or zipped with its images.

The file is read one line at a time, so memory stays flat whatever its size;
every line is its own transaction, so good lines are kept when others fail.
Re-importing is idempotent: a question is looked up by ``hash_id`` and

- created when no question has that id,
- left alone ("unchanged") when the stored content hash equals the line's,
- reported as a conflict, with the fields that differ, when the content
  differs. Conflicts never overwrite: people decide on the question page.

Two record formats are read; the format is decided per line (docs/formats.md
has examples):

**Reference release** (PIPELINE.md, "The data"): a line with a ``question`` or
``format_answer`` key. ``hash_id``; ``question`` (text); ``type`` (选择题,
填空题, 问答题, or our code); ``subject`` as a release tag (``math-g9``);
``img`` (base64 JPEG, or a list of them); ``format_answer`` =
{``ground_truth``: sub-answers, ``format_solution``: a string or a list of
steps}. Optional: ``grade`` (used when it lies in the tag's stage, otherwise
the tag's last grade), ``knowledge_points``, ``difficulty``, ``source``, and
``options``, ``raw_solution``, ``solution_steps`` which, when present, win over
what is derived. Multiple-choice options embedded in the text ("A. …
B. …", also ``A、`` and ``A．``) are split out of it; a string solution with
``步骤1：`` or numbered lines is split into steps and kept whole as the raw
solution.

**Studio** (what ``export.py`` writes in its zip): any other line.
``hash_id``, ``subject`` (code), ``grade`` (1-12), ``type`` (code or Chinese),
``text``, ``options`` [{label, text}], ``answers``, ``raw_solution``,
``solution_steps``, ``knowledge_points``, ``difficulty`` (0-1 or null),
``source``, ``figures``: a list of base64 strings (a ``data:image/…`` prefix is
allowed) or ``{"path": "images/x.png"}`` naming a file in the same zip.

A zip holds one ``.jsonl`` file (``questions.jsonl`` when there are several)
and the images. Entries with absolute paths or ``..`` are refused, as are
archives whose declared size or compression ratio passes the settings'
limits; reads stop at each entry's declared size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.db import OperationalError

from annotation.job_shapes import ImportQuestionsResult, ImportSourceParams
from annotation.jsonl_bulk import import_lines
from annotation.models import Figure, Question, SourceDocument
from annotation.public_formats import MAPPED_OF, unwrapped
from annotation.uploads import check_import_file
from k12vista import job_text
from k12vista.bulk import analyze
from k12vista.import_files import ImportFileError, open_source
from k12vista.jobs import Progress, TransientJobError, job_handler, start_job
from k12vista.line_reasons import reason
from k12vista.models import Job
from k12vista.reports import LineReport

PROGRESS_EVERY = 100


# --- the report -----------------------------------------------------------------


@dataclass
class ImportReport(LineReport):
    key_name = "hash_id"

    formats: dict[str, int] = field(default_factory=dict)  # records read in each format, by the format's name
    guessed: dict[str, int] = field(default_factory=dict)  # records with a field guessed, by the field

    def read_as(self, fmt: str, guessed: list[str]) -> None:
        if fmt:
            self.formats[fmt] = self.formats.get(fmt, 0) + 1
        for name in guessed:
            self.guessed[name] = self.guessed.get(name, 0) + 1

    def as_dict(self) -> dict:
        return {
            **super().as_dict(), "formats": self.formats, "guessed": self.guessed,
            "mapped": {fmt: MAPPED_OF[fmt] for fmt in self.formats if fmt in MAPPED_OF},
        }  # fmt: skip

    def conflict(self, line: int, hash_id: str, fields: list[str]) -> None:
        self.conflict_at(line, hash_id, reason("question_conflict", fields=", ".join(fields)), fields=fields)


# --- saving -------------------------------------------------------------------------


def tally(report: ImportReport, outcome: tuple[str, int, str, Any]) -> None:
    kind, number, hash_id, detail = outcome
    if kind == "created":
        report.created += 1
    elif kind == "unchanged":
        report.unchanged += 1
    elif kind == "conflict":
        report.conflict(number, hash_id, detail)
    elif kind == "failed":
        report.fail(number, hash_id, detail)


def import_questions_file(
    *, path: str | Path, user: Any, progress: Callable[[int, int | None], None] | None = None,
    source_document: SourceDocument | None = None, workers: int = 1,
) -> ImportReport:  # fmt: skip
    """Imports every line of a JSONL or zip file; see the module docstring.

    Lines are prepared (figures, checks, KaTeX) outside any transaction, by
    ``workers`` processes for a large file, and written a batch per
    transaction (annotation.jsonl_bulk). Memory stays flat: a bounded window
    of lines is in flight.

    Raises ImportFileError when the file as a whole is unusable (not JSONL or
    zip, an unsafe archive); problems with single lines go in the report.
    """
    report = ImportReport()
    with open_source(path, unwrap=unwrapped) as source:
        for name in source.skipped:  # line 0: the file, not a line of it
            report.fail(0, name, reason("not_published_file", name=name))
        total = source.count_lines()
        if progress:
            progress(0, total)
        done = 0

        def count(outcome: tuple[str, int, str, Any]) -> None:
            nonlocal done
            tally(report, outcome)
            done += 1
            if progress and done % PROGRESS_EVERY == 0:
                progress(done, total)

        created = import_lines(source, path=path, user=user, source_document=source_document, workers=workers,
                               total=total, tally=count, read_as=report.read_as)  # fmt: skip
        if progress:
            progress(total, total)
    if created:
        analyze(Question, Figure, Question.knowledge_points.through)
    return report


# --- uploads and the job --------------------------------------------------------------


class HashingFile(File):
    """Hashes and measures the bytes as storage copies them, so the file is read once."""

    def chunks(self, chunk_size: int | None = None) -> Iterator[bytes]:
        self.sha256, self.copied = hashlib.sha256(), 0
        for chunk in super().chunks(chunk_size):
            self.copied += len(chunk)
            if self.copied > settings.MAX_UPLOAD_BYTES:
                raise ImportFileError(reason("over_upload_limit_copying", limit=f"{settings.MAX_UPLOAD_BYTES:,}"))
            self.sha256.update(chunk)
            yield chunk


def register_upload(*, uploaded_file: Any = None, path: str | Path | None = None, user: Any) -> SourceDocument:
    """Stores an uploaded file (or a local one) as a SourceDocument, checking size and kind first."""
    if (uploaded_file is None) == (path is None):
        raise TypeError("pass exactly one of uploaded_file and path")
    with open(path, "rb") if path is not None else _rewound(uploaded_file) as handle:  # noqa: SIM115
        name = Path(path).name if path is not None else Path(uploaded_file.name).name
        size = Path(path).stat().st_size if path is not None else uploaded_file.size
        if size > settings.MAX_UPLOAD_BYTES:
            raise ImportFileError(reason("over_upload_limit", size=f"{size:,}", limit=f"{settings.MAX_UPLOAD_BYTES:,}"))
        kind = check_import_file(handle, size=size)
        content = HashingFile(handle, name=name)
        document = SourceDocument(kind=kind, original_name=name[:300], sha256="", size=0, uploaded_by=user)
        # Stored under a name of ours (SourceDocument.file's upload_to), never the uploader's.
        document.file.save(f"upload.{kind}", content, save=False)
        document.sha256, document.size = content.sha256.hexdigest(), content.copied
        document.save()
    return document


@contextmanager
def _rewound(uploaded_file: Any) -> Iterator[Any]:
    # An UploadedFile may have been read already (by a form's validation); storage must see it all.
    uploaded_file.seek(0)
    yield uploaded_file


def start_import(*, document: SourceDocument, user: Any) -> Job:
    job = start_job(
        kind="annotation.import_questions",
        user=user,
        params={"source_document_id": document.pk},
        title=job_text.title("import_file", file=document.original_name),
    )
    SourceDocument.objects.filter(pk=document.pk).update(job=job)
    document.job = job
    return job


@job_handler("annotation.import_questions", queue=Job.Queue.CPU, params=ImportSourceParams,
             result=ImportQuestionsResult)  # fmt: skip
def import_questions_job(job: Job, progress: Progress) -> dict:
    """Safe to run again after a crash: lines already imported come back as unchanged."""
    document = SourceDocument.objects.get(pk=job.params["source_document_id"])
    try:
        report = import_questions_file(
            path=document.file.path,
            user=job.started_by,
            progress=progress,
            source_document=document,
            workers=settings.IMPORT_WORKERS,
        )
    except ImportFileError as exc:
        document.record_error(exc.reason)  # the job fails with the same code (k12vista.jobs)
        raise
    except OperationalError as exc:  # a locked or restarting database: worth another try
        raise TransientJobError(str(exc)) from exc
    return report.as_dict()
