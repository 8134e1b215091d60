"""Importing a PEM-800K-style JSONL: hundreds of thousands of labelled chains, in batches.

A record is the reference PEBench shape (``hash_id``, ``question``,
``format_solution``, ``ground_truth``, ``student_infer``, ``step_labels`` as
``[step, label, explanation]``, optionally ``model``, ``subject``, ``type``;
docs/formats.md "PEM-800K"). About 25 records share a question's ``hash_id``:
each is a different chain, so a chain's key is ``<hash_id>:<content hash>``,
the hash of the whole record. The same record imported again has the same
key and is counted unchanged; an edited record is a different chain.

A record whose question is not in the bank keeps the snapshot it carries
(question text, reference solution and answer), as the PEBench import does,
and is counted in ``questions_missing``; one whose question is in the bank
links to it and takes its subject, grade, stage and type.

Lines are read, checked and written a batch at a time (memory stays flat),
through k12vista.bulk as the other importers: on PostgreSQL with ``COPY`` (ids
taken from the sequences first, so steps and labels can point at their rows),
elsewhere with batched inserts. A bad line fails alone with its reason; a batch
that meets a chain another import wrote at the same moment is redone one record
at a time through pem.services.
"""

from __future__ import annotations

import hashlib
import json
import operator
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from queue import Full, Queue
from typing import Any

import orjson
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext

from annotation.jsonl_import import RecordError, open_source
from annotation.models import Question
from k12vista import bulk
from k12vista.vocabulary import LABEL_CODES, TAXONOMY_VERSION
from pem import services
from pem.models import ChainOfThought, Step, StepLabel

BATCH_SIZE = 2000
READ_AHEAD = 2  # batches checked ahead of the one being written
LABEL_SET = frozenset(LABEL_CODES)
KEY_HASH_LENGTH = 24


class _Float(float):
    """A float as parsed from a line: orjson refuses to write it (a float subclass), so a record
    holding one gets its key from ``json.dumps``, whose float notation orjson does not share."""


_DECODER = json.JSONDecoder(parse_float=_Float)


def canonical_json(record: dict) -> bytes:
    """The record as canonical JSON: sorted keys, no spaces, UTF-8. orjson writes the same bytes as
    ``json.dumps(sort_keys=True, ensure_ascii=False, separators=(",", ":"))`` for text, whole
    numbers, lists and objects, in a fifth of the time; floats (written 1e-05 by one and 0.00001 by
    the other) and integers over 64 bits go through ``json.dumps``, so every key stays what it was."""
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        try:
            return canonical.encode()
        except UnicodeEncodeError:  # "\ud800" in the line: no database can store it
            raise RecordError("line", gettext("the text holds an unpaired surrogate (\\ud800-\\udfff)")) from None


def chain_key(hash_id: str, digest: str) -> str:
    """The question and the chain's content (``digest``: of the whole record, canonical): the same
    record always gets the same key."""
    return f"{hash_id[: 200 - KEY_HASH_LENGTH - 1]}:{digest}"


def parse_line(line: bytes) -> services.ChainData:
    """One line as a chain (RecordError says what is wrong)."""
    try:
        # What json.loads does, with one decoder for every line (json.loads builds one a call).
        record = _DECODER.decode(line.decode(json.detect_encoding(line), "surrogatepass"))
    except ValueError as exc:
        raise RecordError("line", gettext("not valid JSON: %(error)s") % {"error": exc}) from None
    if not isinstance(record, dict):
        raise RecordError("line", gettext("expected a JSON object"))
    if "step_labels" not in record:
        raise RecordError("step_labels", gettext("missing: a PEM-800K record labels its steps"))
    # First: the canonical JSON refuses text that no database can store.
    digest = hashlib.sha256(canonical_json(record)).hexdigest()[:KEY_HASH_LENGTH]
    data = _plain_record(record) or services.from_reference(record)
    data.key = chain_key(data.question_hash_id, digest)
    return data


def _lines(value: Any) -> str | None:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "\n".join(value)
    return None


def _plain_record(record: dict) -> services.ChainData | None:
    """The common case read directly: exact label codes, [step, label, explanation] triples, plain
    strings, no metadata tags. Anything else (names for labels, pairs, tags, odd types) returns
    None and goes through pem.services.from_reference, which forgives or explains."""
    hash_id, steps = record.get("hash_id"), record.get("step_labels")
    question, response, model = record.get("question"), record.get("student_infer"), record.get("model")
    solution, answer = _lines(record.get("format_solution")), _lines(record.get("ground_truth"))
    if (
        not isinstance(hash_id, str) or not hash_id.strip() or len(hash_id.strip()) > 200
        or record.get("key") or record.get("subject") or record.get("type")
        or not isinstance(question, str | None) or not isinstance(response, str | None)
        or not isinstance(model, str | None) or solution is None or answer is None
        or not isinstance(steps, list) or not steps
    ):  # fmt: skip
        return None
    data = services.ChainData(key="", question_hash_id=hash_id.strip(), question_text=question or "",
                              reference_solution=solution, reference_answer=answer, response_text=response or "",
                              model_name=(model or "").strip())  # fmt: skip
    texts, labels, label_data = data.steps, data.labels, services.LabelData
    for entry in steps:
        if type(entry) is not list or len(entry) != 3:
            return None
        text, label, explanation = entry
        if (
            type(text) is not str or type(label) is not str or type(explanation) is not str
            or label not in LABEL_SET or not text.strip()
        ):  # fmt: skip
            return None
        texts.append(text)
        labels.append([label_data(label, explanation.strip(), "")])
    return data


class _Batch:
    """Chains waiting to be written, the lines that failed before them, and how far the file is read."""

    def __init__(self) -> None:
        self.chains: list[tuple[int, services.ChainData]] = []
        self.failed: list[services.Outcome] = []
        self.done = 0

    def __len__(self) -> int:
        return len(self.chains)


def _read_batches(source: Any, batch_size: int) -> Iterator[_Batch]:
    """The file's lines as checked chains, a batch at a time (pure Python: no database)."""
    batch = _Batch()
    done = 0
    for number, line in source.lines():
        done += 1
        if line is None:
            batch.failed.append(("failed", number, "", gettext("the line is too long to be a record"), []))
        elif line.strip():
            try:
                batch.chains.append((number, parse_line(line)))
            except RecordError as exc:
                batch.failed.append(("failed", number, "", str(exc), []))
        if len(batch) >= batch_size:
            batch.done = done
            yield batch
            batch = _Batch()
    batch.done = done
    yield batch


_END = object()
_ANALYZED = {
    ChainOfThought: ("id", "key", "question_id", "model_name", "subject", "stage", "qtype", "status"),
    Step: ("id", "cot_id", "position"),
    StepLabel: ("id", "step_id", "source", "rater", "label"),
}


def _read_ahead(batches: Iterator[_Batch], depth: int = READ_AHEAD) -> Iterator[_Batch]:
    """``batches`` produced by a thread up to ``depth`` ahead, so reading and checking the next
    batch overlaps the database writing this one (psycopg releases the GIL while it waits on
    the server). The thread never touches the database; its error is raised here, in order."""
    queue: Queue = Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def produce() -> None:
        try:
            for batch in batches:
                if not put(batch):
                    return
        except BaseException as exc:  # noqa: BLE001 (handed to the consumer, raised there)
            put(exc)
            return
        finally:
            getattr(batches, "close", lambda: None)()  # closes the file in this thread
        put(_END)

    thread = threading.Thread(target=produce, name="pem800k-reader", daemon=True)
    thread.start()
    try:
        while (item := queue.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


_COT_GIVEN = ("key", "question_id", *services.SNAPSHOT_FIELDS)


def may_skip_row_checks() -> bool:
    """Whether this connection may turn off the per-row triggers for a transaction
    (``session_replication_role``: a superuser, or ``GRANT SET ON PARAMETER`` on PostgreSQL 15+)."""
    query = "SELECT current_setting('is_superuser') = 'on'"
    if connection.pg_version >= 150000:  # type: ignore[attr-defined]  # PostgreSQL's own attribute
        query += " OR has_parameter_privilege('session_replication_role', 'SET')"
    with connection.cursor() as cursor:
        cursor.execute(query)
        return bool(cursor.fetchone()[0])


@contextmanager
def _checks_set_based(chains: list[services.ChainData]) -> Iterator[None]:
    """Inside the batch's transaction: the foreign-key triggers off while the batch is written,
    their work done for the whole batch at once.

    A COPY into tables with foreign keys queues one check per row, run at commit: 11 million
    for the paper's file, 40% of the server's work of an import (bench/pem800k.py). Here they
    prove nothing one query cannot: every step and label points at a row this transaction
    wrote, with ids it took from the sequences, so only the chains' questions need checking,
    and those are locked ``FOR KEY SHARE`` (the lock each check would take, so no one deletes
    them before the commit); a chain whose question was deleted since it was looked up keeps
    its snapshot unlinked. Unique indexes are not triggers: a key written meanwhile by another
    import still raises IntegrityError."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('session_replication_role')")
        before = cursor.fetchone()[0]
        cursor.execute("SELECT set_config('session_replication_role', 'replica', true)")
        linked = {data.question.pk for data in chains if data.question is not None}
        if linked:
            table = connection.ops.quote_name(Question._meta.db_table)
            cursor.execute(f"SELECT id FROM {table} WHERE id = ANY(%s) FOR KEY SHARE", [sorted(linked)])  # noqa: S608
            found = {row[0] for row in cursor.fetchall()}
            for data in chains:
                if data.question is not None and data.question.pk not in found:
                    data.question = None
    yield
    # A failure rolls the setting back with the rest; after a success, SET LOCAL would outlive
    # a savepoint: a caller's own transaction gets its triggers back.
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('session_replication_role', %s, true)", [before])


def _write(chains: list[services.ChainData], import_name: str) -> None:
    """The chains, their steps and labels through k12vista.bulk (COPY on PostgreSQL, batched
    inserts elsewhere), rows built as tuples straight from the data: no dict per row."""
    if not chains:
        return
    now = timezone.now()
    snapshot_of = operator.attrgetter(*services.SNAPSHOT_FIELDS)
    cots = bulk.Table(ChainOfThought, _COT_GIVEN, fixed={
        "origin": ChainOfThought.Origin.IMPORTED, "response_id": None, "in_training_data": False,
        "status": ChainOfThought.Status.NEW, "created": now,
    })  # fmt: skip
    cot_ids = cots.insert([(data.key, data.question.pk if data.question else None,
                            *snapshot_of(data)) for data in chains], ids=True)  # fmt: skip
    steps = [
        (cot_id, position, text)
        for cot_id, data in zip(cot_ids, chains, strict=True)
        for position, text in enumerate(data.steps, 1)
    ]
    step_ids = bulk.Table(Step, ("cot_id", "position", "text")).insert(steps, ids=True)
    labels_of_steps = (step_labels for data in chains for step_labels in data.labels)
    labels = bulk.Table(StepLabel, ("step_id", "label", "explanation"), fixed={
        "source": StepLabel.Source.IMPORTED, "rater": import_name, "user_id": None, "scoring_run_id": None,
        "taxonomy_version": TAXONOMY_VERSION, "guideline_version": "", "created": now,
    })  # fmt: skip
    labels.insert([
        (step_id, label.label, label.explanation)
        for step_id, step_labels in zip(step_ids, labels_of_steps, strict=True)
        for label in step_labels
    ])  # fmt: skip


def _stored_keys(keys: list[str]) -> set[str]:
    if connection.vendor == "postgresql":
        # One array parameter: ``key__in`` sends 2,000 placeholders, which psycopg's client-side
        # binding parses and fills in Python for every batch (a tenth of the import's main thread).
        table = connection.ops.quote_name(ChainOfThought._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT key FROM {table} WHERE key = ANY(%s)", [keys])  # noqa: S608
            return {key for (key,) in cursor.fetchall()}
    return set(ChainOfThought.objects.filter(key__in=keys).values_list("key", flat=True))


def _flush(batch: _Batch, report: services.ImportReport, import_name: str, *, checks_per_row: bool = True) -> int:
    """Writes the batch; returns how many of its chains have no question in the bank."""
    if not batch:
        return 0
    chains = [data for _, data in batch.chains]
    services.fill_from_bank(chains)
    missing = sum(data.question is None for data in chains)
    existing = _stored_keys([d.key for d in chains])
    new: dict[str, services.ChainData] = {}
    for number, data in batch.chains:
        if data.key in existing or data.key in new:
            report.tally(("unchanged", number, data.key, "", data.warnings))
        else:
            new[data.key] = data
            report.tally(("created", number, data.key, "", data.warnings))
    try:
        fresh = list(new.values())
        checks = nullcontext() if checks_per_row or not fresh else _checks_set_based(fresh)
        with transaction.atomic(), checks:
            _write(fresh, import_name)
    except IntegrityError:
        # Another import wrote some of these chains meanwhile: one at a time, through the careful path.
        report.created -= len(new)
        for data in new.values():
            outcome, _detail = services.save_chain(data, import_name=import_name)
            report.created += outcome == "created"
            report.unchanged += outcome != "created"
    batch.chains.clear()
    return missing


def import_pem800k(
    *, path: str | Path, name: str = "", progress: Callable[[int, int | None], None] | None = None,
    batch_size: int = BATCH_SIZE,
) -> dict:  # fmt: skip
    """Imports a PEM-800K JSONL (or a zip holding one); the report has per-line failures.

    ``name`` is the rater of the imported labels (the file's name when empty).
    """
    import_name = (name or Path(path).name).strip()[:200]
    report = services.ImportReport()
    missing = 0
    checks_per_row = connection.vendor != "postgresql" or not may_skip_row_checks()
    with open_source(path) as source:
        total = source.count_lines()
        if progress:
            progress(0, total)
        for batch in _read_ahead(_read_batches(source, batch_size)):
            for outcome in batch.failed:
                report.tally(outcome)
            missing += _flush(batch, report, import_name, checks_per_row=checks_per_row)
            if progress and batch.done < total:
                progress(batch.done, total)
        if progress:
            progress(total, total)
    if report.created:
        # Statistics for the filters' plans: a bulk load leaves the planner guessing a few rows.
        # Only the columns the filters join, group and look up on: the long texts' statistics
        # are never used and were half of the ANALYZE.
        bulk.analyze(*_ANALYZED, columns=_ANALYZED, vacuum=False)
    return {**report.as_dict(), "questions_missing": missing, "rater": import_name}
