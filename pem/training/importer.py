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

Lines are read, checked and written a batch at a time (memory stays flat):
on PostgreSQL with ``COPY`` (ids taken from the sequences first, so steps and
labels can point at their rows), elsewhere with batched inserts. A bad line
fails alone with its reason; a batch that meets a chain another import wrote
at the same moment is redone one record at a time through pem.services.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.jsonl_import import RecordError, open_source
from annotation.models import Question
from k12vista.vocabulary import LABEL_CODES, TAXONOMY_VERSION
from pem import services
from pem.models import ChainOfThought, Step, StepLabel

BATCH_SIZE = 1000
LABEL_SET = frozenset(LABEL_CODES)
KEY_HASH_LENGTH = 24


def chain_key(hash_id: str, record: dict) -> str:
    """The question and the chain's content: the same record always gets the same key."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:KEY_HASH_LENGTH]
    return f"{hash_id[: 200 - KEY_HASH_LENGTH - 1]}:{digest}"


def parse_line(line: bytes) -> services.ChainData:
    """One line as a chain (RecordError says what is wrong)."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise RecordError("line", f"not valid JSON: {exc}") from None
    if not isinstance(record, dict):
        raise RecordError("line", "expected a JSON object")
    if "step_labels" not in record:
        raise RecordError("step_labels", "missing: a PEM-800K record labels its steps")
    data = _plain_record(record) or services.from_reference(record)
    data.key = chain_key(data.question_hash_id, record)
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
    for entry in steps:
        if not (
            isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and entry[0].strip()
            and entry[1] in LABEL_SET and isinstance(entry[2], str)
        ):  # fmt: skip
            return None
        data.steps.append(entry[0])
        data.labels.append([services.LabelData(entry[1], entry[2].strip(), "")])
    return data


class _Batch:
    """Chains waiting to be written, and the report lines they will produce."""

    def __init__(self) -> None:
        self.chains: list[tuple[int, services.ChainData]] = []

    def __len__(self) -> int:
        return len(self.chains)


def _fill_from_bank(chains: list[services.ChainData]) -> int:
    """Links chains to the bank's questions in one query; returns how many found none."""
    hash_ids = {data.question_hash_id for data in chains}
    questions = {q.hash_id: q for q in Question.objects.filter(hash_id__in=hash_ids)}
    missing = 0
    for data in chains:
        question = questions.get(data.question_hash_id)
        data.question = question
        if question is None:
            missing += 1
            continue
        if not data.subject:
            data.subject, data.grade, data.stage = question.subject, question.grade, question.stage
        data.qtype = data.qtype or question.qtype
        data.question_text = data.question_text or services.question_text_of(question)
        data.reference_solution = data.reference_solution or services.reference_solution_of(question)
        data.reference_answer = data.reference_answer or "\n".join(question.answers)
    return missing


def _model_rows(model: Any, values: list[dict]) -> tuple[list[str], list[tuple]]:
    """Columns and rows for every concrete field, defaults for the ones not given: a field
    added to the model later (with a default) does not break the bulk path."""
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and "id" not in values[0])]
    defaults = {f.attname: f.get_default() for f in fields if f.attname not in values[0]}
    columns = [f.column for f in fields]
    rows = [tuple(v[f.attname] if f.attname in v else defaults[f.attname] for f in fields) for v in values]
    return columns, rows


def _copy(model: Any, values: list[dict]) -> None:
    if not values:
        return
    columns, rows = _model_rows(model, values)
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _take_ids(model: Any, n: int) -> list[int]:
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, n])
        return [row[0] for row in cursor.fetchall()]


def _chain_values(data: services.ChainData, now) -> dict:
    values = {name: getattr(data, name) for name in services.SNAPSHOT_FIELDS}
    values.update(key=data.key, origin=ChainOfThought.Origin.IMPORTED,
                  question_id=data.question.pk if data.question else None, response_id=None,
                  in_training_data=False, status=ChainOfThought.Status.NEW, created=now)  # fmt: skip
    return values


def _write_postgres(chains: list[services.ChainData], import_name: str) -> None:
    now = timezone.now()
    cot_ids = _take_ids(ChainOfThought, len(chains))
    step_ids = iter(_take_ids(Step, sum(len(d.steps) for d in chains)))
    cots, steps, labels = [], [], []
    for cot_id, data in zip(cot_ids, chains, strict=True):
        cots.append({"id": cot_id, **_chain_values(data, now)})
        for position, (text, step_labels) in enumerate(zip(data.steps, data.labels, strict=True), 1):
            step_id = next(step_ids)
            steps.append({"id": step_id, "cot_id": cot_id, "position": position, "text": text})
            labels += [_label_values(step_id, label, import_name, now) for label in step_labels]
    _copy(ChainOfThought, cots)
    _copy(Step, steps)
    _copy(StepLabel, labels)


def _label_values(step_id: int, label: services.LabelData, import_name: str, now) -> dict:
    return {"step_id": step_id, "source": StepLabel.Source.IMPORTED, "rater": import_name, "user_id": None,
            "scoring_run_id": None, "label": label.label, "explanation": label.explanation,
            "taxonomy_version": TAXONOMY_VERSION, "guideline_version": "", "created": now}  # fmt: skip


def _write_batched(chains: list[services.ChainData], import_name: str) -> None:
    """Batched inserts (SQLite returns the new ids, so steps can point at them)."""
    now = timezone.now()
    cots = ChainOfThought.objects.bulk_create(ChainOfThought(**_chain_values(d, now)) for d in chains)
    steps = Step.objects.bulk_create(
        Step(cot_id=cot.pk, position=n, text=text)
        for cot, data in zip(cots, chains, strict=True)
        for n, text in enumerate(data.steps, 1)
    )
    step_iter = iter(steps)
    rows = []
    for data in chains:
        for step_labels in data.labels:
            step = next(step_iter)
            rows += [StepLabel(**_label_values(step.pk, label, import_name, now)) for label in step_labels]
    StepLabel.objects.bulk_create(rows, batch_size=2000)


def _flush(batch: _Batch, report: services.ImportReport, import_name: str) -> int:
    """Writes the batch; returns how many of its chains have no question in the bank."""
    if not batch:
        return 0
    chains = [data for _, data in batch.chains]
    missing = _fill_from_bank(chains)
    existing = set(ChainOfThought.objects.filter(key__in=[d.key for d in chains]).values_list("key", flat=True))
    new: dict[str, services.ChainData] = {}
    for number, data in batch.chains:
        if data.key in existing or data.key in new:
            report.tally(("unchanged", number, data.key, "", data.warnings))
        else:
            new[data.key] = data
            report.tally(("created", number, data.key, "", data.warnings))
    write = _write_postgres if connection.vendor == "postgresql" else _write_batched
    try:
        with transaction.atomic():
            write(list(new.values()), import_name)
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
    batch = _Batch()
    with open_source(path) as source:
        total = source.count_lines()
        if progress:
            progress(0, total)
        done = 0
        for number, line in source.lines():
            done += 1
            if line is None:
                report.tally(("failed", number, "", "the line is too long to be a record", []))
                continue
            if not line.strip():
                continue
            try:
                batch.chains.append((number, parse_line(line)))
            except RecordError as exc:
                report.tally(("failed", number, "", str(exc), []))
            if len(batch) >= batch_size:
                missing += _flush(batch, report, import_name)
                if progress:
                    progress(done, total)
        missing += _flush(batch, report, import_name)
        if progress:
            progress(total, total)
    if connection.vendor == "postgresql" and report.created:
        # Statistics for the filters' plans: a bulk load leaves the planner guessing a few rows.
        with connection.cursor() as cursor:
            for model in (ChainOfThought, Step, StepLabel):
                cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    return {**report.as_dict(), "questions_missing": missing, "rater": import_name}
