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
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from queue import Full, Queue
from typing import Any

import orjson
import psycopg
from django.conf import settings
from django.db import DataError, IntegrityError, connection, transaction
from django.utils import timezone

from annotation.models import Question
from annotation.public_formats import unwrapped
from k12vista import bulk
from k12vista.import_files import MAX_LINE_BYTES, RecordError, open_source
from k12vista.line_reasons import reason, reason_of
from k12vista.line_stream import READ_CHUNK
from k12vista.text import BadLine, parse_record_line
from k12vista.vocabulary import LABEL_CODES, TAXONOMY_VERSION
from pem import services
from pem.models import ChainOfThought, Step, StepLabel
from pem.training import lines, reader
from pem.training.lines import KEY_HASH_LENGTH, chain_key

BATCH_SIZE = 1000
READ_AHEAD = 2  # batches checked ahead of the one being written
LABEL_SET = frozenset(LABEL_CODES)


class _Float(float):
    """A float as parsed from a line: orjson refuses to write it (a float subclass), so a record
    holding one gets its key from ``json.dumps``, whose float notation orjson does not share."""


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
            raise RecordError("line", reason("surrogate")) from None


def parse_line(line: bytes) -> services.ChainData:
    """One line as a chain (RecordError says what is wrong).

    Read by the importers' shared line parser (k12vista.text.parse_record_line), with one decoder
    for every line (json.loads builds one a call): bad UTF-8, deep nesting (which raised
    RecursionError and lost the whole file), a NUL or an unpaired surrogate fail the line alone."""
    try:
        record = parse_record_line(line, _Float)
    except BadLine as exc:
        raise RecordError("line", reason_of(exc)) from None
    if not isinstance(record, dict):
        raise RecordError("line", reason("expected_object"))
    if "step_labels" not in record:
        raise RecordError("step_labels", reason("pem800k_no_labels"))
    # First: the canonical JSON refuses text that no database can store.
    digest = hashlib.sha256(canonical_json(record)).hexdigest()[:KEY_HASH_LENGTH]
    data = _plain_record(record) or services.from_reference(record)
    data.key = chain_key(data.question_hash_id, digest)
    return data


def _plain_record(record: dict) -> services.ChainData | None:
    """The common case (pem.training.lines.plain) as a chain; None: the general way."""
    found = lines.plain(record, LABEL_SET)
    if found is None:
        return None
    data = services.ChainData(key="", question_hash_id=found.hash_id, question_text=found.question,
                              reference_solution=found.solution, reference_answer=found.answer,
                              response_text=found.response, model_name=found.model)  # fmt: skip
    texts, labels, label_data = data.steps, data.labels, services.LabelData
    for text, label, explanation in found.steps:
        texts.append(text)
        labels.append([label_data(label, explanation, "")])
    return data


class _Batch:
    """Chains waiting to be written, the lines that failed before them, and how far the file is read."""

    def __init__(self) -> None:
        self.chains: list[tuple[int, services.ChainData]] = []
        self.failed: list[services.Outcome] = []
        self.done = 0
        # From the reader process: {key: (chain id, steps, labels as COPY text)} of the chains it
        # made rows for, and {key: line} of every chain it read (sent without its steps).
        self.made: dict[str, tuple[int, bytes, bytes]] = {}
        self.lines: dict[str, bytes] = {}
        self.known: set[str] = set()  # the keys it found stored
        self.numbers: dict[str, int] = {}  # the line of each new chain, for a failure's report

    def __len__(self) -> int:
        return len(self.chains)


def _read_batches(source: Any, batch_size: int) -> Iterator[_Batch]:
    """The file's lines as checked chains, a batch at a time (pure Python: no database)."""
    batch = _Batch()
    done = 0
    for number, line in source.lines():
        done += 1
        if line is None:
            batch.failed.append(("failed", number, "", reason("too_long_record"), []))
        elif line.strip():
            try:
                batch.chains.append((number, parse_line(line)))
            except RecordError as exc:
                batch.failed.append(("failed", number, "", reason_of(exc), []))
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


def _tables(import_name: str, *, ids: bool) -> tuple[bulk.Table, bulk.Table, bulk.Table]:
    """The chains', steps' and labels' writers, with what a batch's rows share (its time, the
    import's name); ``ids``: chains and steps are given their ids (taken from the sequences)."""
    now = timezone.now()
    pk = ("id",) if ids else ()
    cots = bulk.Table(ChainOfThought, (*pk, *_COT_GIVEN), fixed={
        "origin": ChainOfThought.Origin.IMPORTED, "response_id": None, "in_training_data": False,
        "status": ChainOfThought.Status.NEW, "created": now,
    })  # fmt: skip
    steps = bulk.Table(Step, (*pk, "cot_id", "position", "text"))
    labels = bulk.Table(StepLabel, ("step_id", "label", "explanation"), fixed={
        "source": StepLabel.Source.IMPORTED, "rater": import_name, "user_id": None, "scoring_run_id": None,
        "taxonomy_version": TAXONOMY_VERSION, "guideline_version": "", "created": now,
    })  # fmt: skip
    return cots, steps, labels


def _write(chains: list[services.ChainData], import_name: str) -> None:
    """The chains, their steps and labels by batched inserts (databases other than PostgreSQL),
    rows built as tuples straight from the data: no dict per row."""
    cots, steps, labels = _tables(import_name, ids=False)
    snapshot_of = operator.attrgetter(*services.SNAPSHOT_FIELDS)
    cot_ids = cots.insert([(data.key, data.question.pk if data.question else None,
                            *snapshot_of(data)) for data in chains], ids=True)  # fmt: skip
    step_ids = steps.insert([
        (cot_id, position, text)
        for cot_id, data in zip(cot_ids, chains, strict=True)
        for position, text in enumerate(data.steps, 1)
    ], ids=True)  # fmt: skip
    labels_of_steps = (step_labels for data in chains for step_labels in data.labels)
    labels.insert([
        (step_id, label.label, label.explanation)
        for step_id, step_labels in zip(step_ids, labels_of_steps, strict=True)
        for label in step_labels
    ])  # fmt: skip


@dataclass
class _Whole:
    """A batch's rows as COPY takes them: tuples with their ids and shared values, and the rows
    the reader process wrote as COPY text."""

    tables: tuple[bulk.Table, bulk.Table, bulk.Table]
    cots: list[tuple] = field(default_factory=list)
    steps: list[tuple] = field(default_factory=list)
    labels: list[tuple] = field(default_factory=list)
    steps_text: bytes = b""
    labels_text: bytes = b""


def _whole_rows(chains: list[services.ChainData], *, made: dict[str, tuple], import_name: str) -> _Whole:
    """The new chains' rows (PostgreSQL): the reader process ``made`` the steps and labels of most
    ({key: (chain id, steps text, labels text)}); the others' ids are taken here."""
    whole = _Whole(_tables(import_name, ids=True))
    cot_rest, step_rest, label_rest = (table.rest for table in whole.tables)
    others = [data for data in chains if data.key not in made]
    cot_ids = iter(bulk.take_ids(ChainOfThought, len(others))).__next__
    next_step_id = iter(bulk.take_ids(Step, sum(len(data.steps) for data in others))).__next__
    snapshot_of = operator.attrgetter(*services.SNAPSHOT_FIELDS)
    steps_text, labels_text = [], []
    for data in chains:
        if data.key in made:
            cot_id, steps, labels = made[data.key]
            steps_text.append(steps)
            labels_text.append(labels)
        else:
            cot_id = cot_ids()
            for position, (text, step_labels) in enumerate(zip(data.steps, data.labels, strict=True), 1):
                step_id = next_step_id()
                whole.steps.append((step_id, cot_id, position, text, *step_rest))
                whole.labels.extend((step_id, label.label, label.explanation, *label_rest) for label in step_labels)
        question_id = data.question.pk if data.question else None
        whole.cots.append((cot_id, data.key, question_id, *snapshot_of(data), *cot_rest))
    whole.steps_text, whole.labels_text = b"".join(steps_text), b"".join(labels_text)
    return whole


def _copy(whole: _Whole) -> None:
    cots, steps, labels = whole.tables
    cots.copy(whole.cots, complete=True)
    steps.copy(whole.steps, complete=True, text=whole.steps_text)
    labels.copy(whole.labels, complete=True, text=whole.labels_text)


def _stored_keys(keys: list[str]) -> set[str]:
    if connection.vendor == "postgresql":
        # One array parameter: ``key__in`` sends a placeholder a key, which psycopg's client-side
        # binding parses and fills in Python for every batch. Joined to the keys, not ``key = ANY``:
        # probes of the unique index whatever the statistics say in the middle of a load (ANY was
        # planned as a scan of the whole table).
        table = connection.ops.quote_name(ChainOfThought._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT c.key FROM unnest(%s::text[]) AS k(key) JOIN {table} c ON c.key = k.key", [keys])  # noqa: S608
            return {key for (key,) in cursor.fetchall()}
    return set(ChainOfThought.objects.filter(key__in=keys).values_list("key", flat=True))


def _sort_out(
    batch: _Batch, report: services.ImportReport, *, known: set[str] | None = None
) -> tuple[list[services.ChainData], int]:
    """The batch's new chains (linked to the bank's questions) and how many have no question in
    the bank; every line is tallied, in order. ``known``: the keys stored already, as the reader
    process saw them; None: looked up here."""
    for outcome in batch.failed:
        report.tally(outcome)
    chains = [data for _, data in batch.chains]
    services.fill_from_bank(chains)
    missing = sum(data.question is None for data in chains)
    existing = _stored_keys([d.key for d in chains]) if known is None else known
    new: dict[str, services.ChainData] = {}
    for number, data in batch.chains:
        if data.key in existing or data.key in new:
            report.tally(("unchanged", number, data.key, "", data.warnings))
        else:
            new[data.key] = data
            batch.numbers[data.key] = number
            report.tally(("created", number, data.key, "", data.warnings))
    batch.chains.clear()
    return list(new.values()), missing


def _save(
    chains: list[services.ChainData], report: services.ImportReport, import_name: str, *,
    rows: Callable[[list[services.ChainData]], _Whole] | None = None, lines_of: dict[str, bytes] | None = None,
    checks_per_row: bool = True, look_again: bool = False, numbers: dict[str, int] | None = None,
) -> None:  # fmt: skip
    """Writes the batch's new chains in one transaction: by COPY when given their ``rows``
    (``lines_of``: the lines of the chains the reader process sent without their steps).

    ``look_again``: the chains were sorted out by the reader process's view of the stored keys,
    which may be older than a chain this import or another wrote since: on a clash the keys are
    looked up here and the rest is written again by COPY. A batch the database refuses (a value
    longer than its column, or a clash not looked up) is written again one chain at a time, each
    in its own savepoint, and a chain refused then fails its line alone (``numbers``: each key's
    line), as the question and PEBench imports do."""
    if not chains:
        return
    try:
        checks = nullcontext() if checks_per_row else _checks_set_based(chains)
        with transaction.atomic(), checks:
            if rows is None:
                _write(chains, import_name)
            else:
                _copy(rows(chains))  # after the checks: a question deleted meanwhile is unlinked
    except (DataError, IntegrityError) as exc:
        if look_again and isinstance(exc, IntegrityError):
            stored = _stored_keys([data.key for data in chains])
            report.created -= len(stored)
            report.unchanged += len(stored)
            rest = [data for data in chains if data.key not in stored]
            _save(rest, report, import_name, rows=rows, lines_of=lines_of, checks_per_row=checks_per_row,
                  numbers=numbers)  # fmt: skip
            return
        _save_one_at_a_time(chains, report, import_name, lines_of=lines_of or {}, numbers=numbers or {})


def _save_one_at_a_time(
    chains: list[services.ChainData], report: services.ImportReport, import_name: str, *,
    lines_of: dict[str, bytes], numbers: dict[str, int],
) -> None:  # fmt: skip
    """The careful path (pem.services.save_chain, a savepoint each) for a batch the database
    refused: another import wrote some of these chains meanwhile, or one holds a value the
    database cannot keep, which fails its own line only."""
    report.created -= len(chains)
    for data in _in_full(chains, lines_of):
        try:
            outcome, _detail = services.save_chain(data, import_name=import_name)
        except (DataError, IntegrityError) as exc:
            report.fail(numbers.get(data.key, 0), data.key, reason("database_refused", error=str(exc)))
            continue
        report.created += outcome == "created"
        report.unchanged += outcome != "created"


# --- the reader process (PostgreSQL) ------------------------------------------------


def _conninfo() -> str:
    """This connection's parameters for the reader process's own connection (libpq's keywords only)."""
    keywords = {default.keyword.decode() for default in psycopg.pq.Conninfo.get_defaults()}
    params = connection.get_connection_params()
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if k in keywords and v not in (None, "")})


def _tail(table: bulk.Table) -> str:
    return "".join("\t" + lines.copy_field(value) for value in table.rest)


@contextmanager
def _reader_process(source: Any, path: str | Path, batch_size: int, import_name: str) -> Iterator[Iterator[_Batch]]:
    """Starts pem.training.reader on the file at ``path`` (``source``, opened) and yields its
    batches, in order.

    A zip's member is fed to the process by a thread (its limits still apply: an oversized member
    stops the import as before); the process's failure is raised here with what it said."""
    _cots, steps, labels = _tables(import_name, ids=True)
    setup = {
        "conninfo": _conninfo(), "label_codes": sorted(LABEL_SET), "batch_size": batch_size,
        "max_line_bytes": MAX_LINE_BYTES, "chain_table": connection.ops.quote_name(ChainOfThought._meta.db_table),
        "chain_sequence": bulk.sequence_of(ChainOfThought), "step_sequence": bulk.sequence_of(Step),
        "step_tail": _tail(steps), "label_tail": _tail(labels),
        # A plain file is read by the process itself; a zip's member comes through the pipe, read
        # here with the archive's limits (k12vista.import_files.open_member).
        "path": str(path) if source.archive is None else "",
    }  # fmt: skip
    with tempfile.TemporaryFile() as said:
        process = subprocess.Popen(  # noqa: S603 (this interpreter, our own module)
            [sys.executable, "-m", "pem.training.reader"], cwd=settings.BASE_DIR,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=said,
        )  # fmt: skip
        fed: list[BaseException] = []
        assert process.stdin is not None and process.stdout is not None  # noqa: S101 (PIPE above)

        def feed(stdin: Any = process.stdin) -> None:
            try:
                reader.write_frame(stdin, setup)
                if setup["path"]:
                    return
                with source.open_lines() as stream:
                    while chunk := stream.read(READ_CHUNK):
                        stdin.write(chunk)
            except BrokenPipeError:  # the process stopped; what it said is raised below
                pass
            except BaseException as exc:  # noqa: BLE001 (raised in the import's thread)
                fed.append(exc)
            finally:
                with suppress(OSError):
                    stdin.close()

        def frames(stdout: Any = process.stdout) -> Iterator[_Batch]:
            while (frame := reader.read_frame(stdout)) is not None:
                yield _from_frame(frame)
            if process.wait() != 0 or fed:
                if fed:
                    raise fed[0]
                said.seek(0)
                raise RuntimeError(f"the PEM-800K reader process failed (exit {process.returncode}): "
                                   f"{_last_error(said.read().decode(errors='replace'))}")  # fmt: skip

        feeder = threading.Thread(target=feed, name="pem800k-feeder", daemon=True)
        feeder.start()
        try:
            # No thread reads ahead: the process makes its next batch while this one writes the
            # last, and waits on the pipe with it, so each process holds one batch at a time.
            yield frames()
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            feeder.join()
            process.stdout.close()


def _last_error(said: str) -> str:
    """A traceback's last exception line and what follows it (a hint, indented)."""
    lines_said = said.strip().splitlines()
    at = max((n for n, line in enumerate(lines_said) if line and not line[0].isspace()), default=0)
    return " ".join(line.strip() for line in lines_said[at:])[:1000]


def _from_frame(frame: dict) -> _Batch:
    """A reader process's frame as a batch: its chains, with the rows it made, and the lines it
    left to the general reading."""
    batch = _Batch()
    batch.done = frame["done"]
    batch.failed = [("failed", number, "", reason("too_long_record"), [])
                    for number in frame["too_long"]]  # fmt: skip
    chains = batch.chains
    for number, line in frame["raw"]:
        try:
            chains.append((number, parse_line(line)))
        except RecordError as exc:
            batch.failed.append(("failed", number, "", reason_of(exc), []))
    chain_data, lines_of = services.ChainData, batch.lines
    for number, key, hash_id, line in frame["stored"]:
        chains.append((number, chain_data(key=key, question_hash_id=hash_id)))
        lines_of.setdefault(key, line)
        batch.known.add(key)
    for number, key, cot_id, fields, steps, labels, line in frame["chains"]:
        hash_id, question, solution, answer, response, model = fields
        chains.append((number, chain_data(key=key, question_hash_id=hash_id, question_text=question,
                                          reference_solution=solution, reference_answer=answer,
                                          response_text=response, model_name=model)))  # fmt: skip
        batch.made.setdefault(key, (cot_id, steps, labels))
        lines_of.setdefault(key, line)
    batch.failed.sort(key=operator.itemgetter(1))
    chains.sort(key=operator.itemgetter(0))
    return batch


def _in_full(chains: list[services.ChainData], lines_of: dict[str, bytes], *, but: Container[str] = ()) -> list:
    """``chains`` with those the reader process sent without their steps read in full from their
    lines, ``but`` those whose rows it made: a chain it found stored but that is gone by now, or
    any of them when the batch is written one chain at a time."""
    light = [data.key for data in chains if not data.steps and data.key in lines_of and data.key not in but]
    if not light:
        return chains
    read = {key: parse_line(lines_of[key]) for key in light}
    services.fill_from_bank(list(read.values()))
    return [read.get(data.key, data) for data in chains]


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
    copying = connection.vendor == "postgresql"
    checks_per_row = not copying or not may_skip_row_checks()
    # The reader process looks up the committed keys; a caller's own transaction may hold chains
    # it cannot see, so inside one they are looked up again on this connection.
    trusted = copying and not connection.in_atomic_block
    # A published set's wrapper file reads as records here too, as it always has (each then fails as no chain).
    with open_source(path, unwrap=unwrapped) as source:
        total = source.count_lines()
        if progress:
            progress(0, total)
        # On PostgreSQL the lines are read in a process of their own (pem.training.reader), so
        # that this one only looks up, links and writes: the server is kept busy.
        reading = _reader_process(source, path, batch_size, import_name) if copying else nullcontext(None)
        with reading as batches:
            for batch in batches or _read_ahead(_read_batches(source, batch_size)):
                new, batch_missing = _sort_out(batch, report, known=batch.known if trusted else None)
                missing += batch_missing
                if copying:
                    new = _in_full(new, batch.lines, but=batch.made)
                    rows = partial(_whole_rows, made=batch.made, import_name=import_name)
                    _save(new, report, import_name, rows=rows, lines_of=batch.lines, checks_per_row=checks_per_row,
                          look_again=trusted, numbers=batch.numbers)  # fmt: skip
                else:
                    _save(new, report, import_name, numbers=batch.numbers)
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
