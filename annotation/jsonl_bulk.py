"""The question import's bulk path (annotation.jsonl_import opens the file, annotation.jsonl_records reads the records).

Lines go through two stages:

1. **Prepare** (CPU work, outside any transaction; in ``IMPORT_WORKERS``
   processes for a large file): parse the line, read the record, validate it,
   hash its content, and for a question not in the bank yet decode and store
   its figures and run the structural checks, the KaTeX check of a whole chunk
   of questions in one round trip to the process's own checker. A question
   the bank already holds (looked up by ``hash_id`` for the chunk before it is
   sent) is only parsed and hashed: re-importing a file costs no figure work.
2. **Write** (this process, a batch of questions per transaction): one query
   for the batch's ``hash_id`` values, then the new questions, their
   knowledge points, figures, history rows and flags, by ``COPY`` on
   PostgreSQL and batched inserts elsewhere (k12vista.bulk). Anything
   unusual (a ``hash_id`` seen twice, one already stored, a batch the
   database refuses, a question another import created meanwhile) is handled
   one record at a time in its own savepoint, exactly as the one-line import
   did, so the report (created / unchanged / conflict / failed, per line) is
   the same.

Memory stays flat: a bounded window of chunks is in flight, and nothing is
kept from one batch to the next but the report.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from django.core.files.base import ContentFile
from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from annotation import checks, images, latex
from annotation.images import BadImage
from annotation.jsonl_records import read_record
from annotation.models import Figure, Flag, KnowledgePoint, Question, QuestionEdit, SourceDocument
from annotation.services import (
    QuestionDataError,
    content_of,
    creation_edit_row,
    figure_row,
    hash_content,
    question_row,
    stored_point_names,
    validate,
)
from k12vista import bulk, import_files
from k12vista.import_files import ImportSource, RecordError
from k12vista.line_reasons import Reason, reason, reason_of
from k12vista.text import BadLine, parse_record_line

# Lines a worker prepares in one task (and checks with KaTeX in one round trip).
CHUNK_LINES = 64
# Questions written per transaction.
WRITE_BATCH = 500
# Below this many lines a pool costs more than it saves: prepared in this process.
POOL_MIN_LINES = 300
NOTE = "imported from JSONL"


@dataclass
class Prepared:
    """One line, ready to be written (or already known to have failed)."""

    number: int
    kind: str  # new | known | failed | skip
    hash_id: str = ""  # for a failure: the hash_id the record named, if any
    reason: str | Reason = ""  # a failure's, as a code (k12vista.line_reasons)
    content: dict = field(default_factory=dict)
    content_hash: str = ""
    row: dict = field(default_factory=dict)  # the Question's columns (services.question_row), for a new one
    knowledge_points: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)  # stored files and their measures
    findings: list[dict] = field(default_factory=list)  # the rule flags' columns (checks.rule_flag_row)
    line: bytes | None = None  # kept for "known" ones, in case the question is gone at write time
    fmt: str = ""  # the format the record was read in, for the report
    guessed: list[str] = field(default_factory=list)  # the fields guessed for it, for the report


# --- stage 1: preparing ------------------------------------------------------------


def prepare_chunk(items: list[tuple[int, bytes | None]], known: set[str], source: Any = None) -> list[Prepared]:
    """Prepares a chunk of lines; never raises for a bad line."""
    source = source if source is not None else _worker["source"]
    out: list[Prepared] = []
    fresh: list[tuple[Prepared, Any, list[Any]]] = []
    for number, line in items:
        if line is None:
            out.append(Prepared(number, "failed", reason=reason("line_too_long", n=f"{import_files.MAX_LINE_BYTES:,}")))
            continue
        if not line.strip():
            out.append(Prepared(number, "skip"))
            continue
        try:
            record = parse_record_line(line)  # bad UTF-8 or JSON, deep nesting, NUL, lone surrogates
        except BadLine as exc:
            out.append(Prepared(number, "failed", reason=reason_of(exc)))
            continue
        found_id = record.get("hash_id") if isinstance(record, dict) else None
        found_id = found_id if isinstance(found_id, str) else ""
        try:
            data, fmt, guessed = read_record(record, source)
            validate(data)
            content = content_of(data)
            prepared = Prepared(number, "known", data.hash_id, content=content, content_hash=hash_content(content),
                                fmt=fmt, guessed=guessed)  # fmt: skip
            if data.hash_id in known:
                prepared.line = line
                out.append(prepared)
                continue
            ready = [images.prepare_figure(f.content, name=f.name) for f in data.figures]
        except (RecordError, QuestionDataError, BadImage) as exc:
            out.append(Prepared(number, "failed", found_id, reason=reason_of(exc)))
            continue
        prepared.kind = "new"
        prepared.knowledge_points = data.knowledge_points
        prepared.row = question_row(data, content_hash=prepared.content_hash)
        prepared.figures = [
            {**figure_row(i, f, p), "content": p.content, "extension": p.extension}
            for i, (f, p) in enumerate(zip(data.figures, ready, strict=True))
        ]
        # What the rules read of a figure (model instances cost more than the rest of this line).
        unsaved = [SimpleNamespace(**item) for item in prepared.figures]
        # Likewise what they read of the question: making a Question cost two thirds of the rules' time.
        question: Any = SimpleNamespace(**prepared.row)
        fresh.append((prepared, question, unsaved))
        out.append(prepared)
    # One KaTeX round trip for the whole chunk.
    problems, _checked = latex.latex_problems_of_many([checks.latex_texts(q) for _p, q, _f in fresh])
    for (prepared, question, unsaved), found in zip(fresh, problems, strict=True):
        prepared.findings = [checks.rule_flag_row(*finding)
                             for finding in checks.rule_findings(question, figures=unsaved, latex=found)]  # fmt: skip
        for item in prepared.figures:
            item["image"] = store_figure(prepared.hash_id, item["position"], item.pop("content"), item.pop("extension"))
    return out


def store_figure(hash_id: str, position: int, content: bytes, extension: str) -> str:
    """Stores a figure's file under the name its Figure row will hold (as attach_figure does)."""
    image = Figure._meta.get_field("image")
    unsaved = SimpleNamespace(question=SimpleNamespace(hash_id=hash_id), position=position)  # what upload_to reads
    name = image.generate_filename(unsaved, f"{hash_id}-{position}.{extension}")  # type: ignore[arg-type]
    return image.storage.save(name, ContentFile(content), max_length=image.max_length)


def delete_figures(prepared: Prepared) -> None:
    """The files of a question that was not created after all."""
    storage = Figure._meta.get_field("image").storage
    for item in prepared.figures:
        if item.get("image"):
            storage.delete(item["image"])
    prepared.figures = []


_worker: dict[str, Any] = {}


def _start_worker(path: str) -> None:
    """A pool process: its own KaTeX checker and its own handle on the archive."""
    latex.restart_checker()
    source = ImportSource(open_lines=lambda: None)
    if zipfile.is_zipfile(path):
        source.archive = zipfile.ZipFile(path)  # checked as a whole by the parent already
        source.members = {info.filename: info for info in source.archive.infolist()}
    _worker["source"] = source


HASH_ID = re.compile(rb'"hash_id"\s*:\s*("(?:[^"\\]|\\.)*"|\d+)')


def stored_among(chunk: list[tuple[int, bytes | None]]) -> set[str]:
    """The hash_ids of the chunk's lines that the bank holds already, read off the raw lines
    (only a hint for skipping figure work: the writer checks again)."""
    found = set()
    for _number, line in chunk:
        match = HASH_ID.search(line) if line else None
        if match:
            try:
                value = json.loads(match.group(1))
            except ValueError:
                continue
            found.add(str(value).strip())
    if not found:
        return set()
    return set(Question.objects.filter(hash_id__in=found).values_list("hash_id", flat=True))


def chunks(lines: Iterable[tuple[int, bytes | None]], size: int) -> Iterator[list[tuple[int, bytes | None]]]:
    chunk: list[tuple[int, bytes | None]] = []
    for item in lines:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def prepared_lines(source: Any, *, path: str | Path, workers: int, total: int) -> Iterator[Prepared]:
    """Every line prepared, in file order: in a pool of ``workers`` processes for a large file."""
    if workers <= 1 or total < POOL_MIN_LINES:
        for chunk in chunks(source.lines(), CHUNK_LINES):
            yield from prepare_chunk(chunk, stored_among(chunk), source)
        return
    # billiard (Celery's multiprocessing) may start processes from a Celery worker's own
    # (daemonic) pool process; forking keeps the settings this process runs with.
    import billiard

    pool = billiard.get_context("fork").Pool(workers, initializer=_start_worker, initargs=(str(path),))
    try:
        window: deque = deque()
        for chunk in chunks(source.lines(), CHUNK_LINES):
            window.append(pool.apply_async(prepare_chunk, (chunk, stored_among(chunk))))
            if len(window) >= 3 * workers:  # bounded: the reader waits for the pool
                yield from window.popleft().get()
        while window:
            yield from window.popleft().get()
    except BaseException:  # an error, or the writer stopped early: nothing left worth finishing
        pool.terminate()
        pool.join()
        raise
    # Every chunk is back: let the processes read their stop signal and leave. Terminating
    # them here took the task queue's lock while they were still reading it, and once a
    # process stayed blocked on that lock and the import never returned.
    pool.close()
    pool.join()


# --- stage 2: writing ----------------------------------------------------------------


def knowledge_point_ids(wanted: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(subject, name) -> id, creating the missing points (two queries a subject)."""
    ids: dict[tuple[str, str], int] = {}
    for subject in {s for s, _n in wanted}:
        names = {n for s, n in wanted if s == subject}
        rows = KnowledgePoint.objects.filter(subject=subject, name__in=names).values_list("name", "id")
        ids.update(((subject, name), pk) for name, pk in rows)
        missing = [name for name in names if (subject, name) not in ids]
        if missing:
            KnowledgePoint.objects.bulk_create(
                [KnowledgePoint(subject=subject, name=name) for name in missing], ignore_conflicts=True
            )
            rows = KnowledgePoint.objects.filter(subject=subject, name__in=missing).values_list("name", "id")
            ids.update(((subject, name), pk) for name, pk in rows)
    return ids


def point_names(prepared: Prepared) -> list[str]:
    return stored_point_names(prepared.knowledge_points)


def write_questions(batch: list[Prepared], *, user_id: int | None, document_id: int | None) -> None:
    """Writes new questions with everything create_question writes, from the same row builders
    (annotation.services); call inside a transaction. The source document is the import's, not the
    record's; every column the builders leave out takes its default, as in create_question."""
    now = timezone.now()
    base = {"source_document_id": document_id, "created": now, "updated": now}
    defaults = bulk.defaults_of(Question)
    ids = bulk.insert_rows(Question, [{**defaults, **p.row, **base} for p in batch], ids=True)
    points = knowledge_point_ids({(p.row["subject"], name) for p in batch for name in point_names(p)})
    through = Question.knowledge_points.through
    bulk.insert_rows(through, [
        {"question_id": pk, "knowledgepoint_id": points[(p.row["subject"], name)]}
        for pk, p in zip(ids, batch, strict=True) for name in point_names(p)
    ])  # fmt: skip
    bulk.insert_rows(Figure, [
        {"question_id": pk, **item} for pk, p in zip(ids, batch, strict=True) for item in p.figures
    ])  # fmt: skip
    edit = creation_edit_row(user_id=user_id, note=NOTE)
    bulk.insert_rows(QuestionEdit, [{"question_id": pk, **edit, "created": now} for pk in ids])
    flag_defaults = bulk.defaults_of(Flag)
    bulk.insert_rows(Flag, [
        {**flag_defaults, "question_id": pk, **flag, "created": now}
        for pk, p in zip(ids, batch, strict=True) for flag in p.findings
    ])  # fmt: skip


Outcome = tuple[str, int, str, Any]  # (created|unchanged|conflict|failed|skip, line, hash_id, detail)


class Writer:
    """Writes prepared lines a batch at a time and gives their outcomes in line order."""

    def __init__(self, *, source: Any, user: Any, source_document: SourceDocument | None) -> None:
        self.source = source
        self.user_id = getattr(user, "pk", None)
        self.document_id = source_document.pk if source_document else None

    def write(self, batch: list[Prepared]) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        named = [p for p in batch if p.kind in ("new", "known")]
        stored = set(Question.objects.filter(hash_id__in={p.hash_id for p in named}).values_list("hash_id", flat=True))
        clean: dict[str, Prepared] = {}
        careful: list[Prepared] = []
        for p in batch:
            if p.kind == "failed":
                outcomes[p.number] = ("failed", p.number, p.hash_id, p.reason)
            elif p.kind == "skip":
                outcomes[p.number] = ("skip", p.number, "", None)
            elif p.kind == "new" and p.hash_id not in stored and p.hash_id not in clean:
                clean[p.hash_id] = p
            else:
                careful.append(p)
        if clean:
            try:
                with transaction.atomic():
                    write_questions(list(clean.values()), user_id=self.user_id, document_id=self.document_id)
            except (DataError, IntegrityError):  # one line the database refuses, or a race: line by line
                careful += clean.values()
            else:
                outcomes.update((p.number, ("created", p.number, p.hash_id, [])) for p in clean.values())
        for p in sorted(careful, key=lambda p: p.number):
            outcomes[p.number] = self.write_one(p)
            if outcomes[p.number][0] != "created":
                delete_figures(p)
        return [outcomes[p.number] for p in batch]

    def write_one(self, p: Prepared) -> Outcome:
        """One record in its own savepoint, as the line-by-line import did."""
        for _attempt in range(2):
            existing = Question.objects.filter(hash_id=p.hash_id).first()
            if existing is not None:
                return self.compare(existing, p)
            if p.kind == "known":  # the bank held it when the chunk was sent, not now: prepare it after all
                p = prepare_chunk([(p.number, p.line)], set(), self.source)[0]
                if p.kind != "new":
                    return ("failed", p.number, p.hash_id, p.reason)
            try:
                with transaction.atomic():
                    write_questions([p], user_id=self.user_id, document_id=self.document_id)
                return ("created", p.number, p.hash_id, [])
            except IntegrityError as exc:
                if not Question.objects.filter(hash_id=p.hash_id).exists():  # not a race: a refused value
                    delete_figures(p)
                    return ("failed", p.number, p.hash_id, reason("database_refused", error=str(exc)))
            except DataError as exc:  # a value this database cannot hold; others stop the job
                delete_figures(p)
                return ("failed", p.number, p.hash_id, reason("database_refused", error=str(exc)))
        return ("failed", p.number, p.hash_id, reason("created_and_removed"))

    @staticmethod
    def compare(existing: Question, p: Prepared) -> Outcome:
        if existing.content_hash == p.content_hash:
            return ("unchanged", p.number, p.hash_id, [])
        stored = content_of(existing)
        fields = sorted(name for name in stored if stored[name] != p.content[name])
        return ("conflict", p.number, p.hash_id, fields) if fields else ("unchanged", p.number, p.hash_id, [])


def import_lines(
    source: Any, *, path: str | Path, user: Any, source_document: SourceDocument | None, workers: int, total: int,
    tally: Callable[[Outcome], None], read_as: Callable[[str, list[str]], None] | None = None,
) -> int:  # fmt: skip
    """Prepares and writes every line of ``source``; returns how many were created."""
    writer = Writer(source=source, user=user, source_document=source_document)
    batch: list[Prepared] = []
    created = 0
    for prepared in prepared_lines(source, path=path, workers=workers, total=total):
        if read_as and prepared.kind in ("new", "known"):
            read_as(prepared.fmt, prepared.guessed)
        batch.append(prepared)
        if len(batch) >= WRITE_BATCH:
            for outcome in writer.write(batch):
                created += outcome[0] == "created"
                tally(outcome)
            batch = []
    for outcome in writer.write(batch):
        created += outcome[0] == "created"
        tally(outcome)
    return created
