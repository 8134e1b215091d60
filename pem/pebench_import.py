"""The PEBench import (the rules are in pem.services' docstring), written a batch at a time.

Lines are read and checked a batch at a time outside any transaction; the
batch's questions are looked up in the bank in one query and its keys in
another. Chains new to the studio (the common case: a first import) are then
written together in one transaction, ``COPY`` on PostgreSQL and batched
inserts elsewhere (k12vista.bulk). Everything else (a key the studio holds,
one seen earlier in the file, a batch the database refuses) goes one record at
a time through ``services.save_chain`` in its own savepoint, exactly as
before, so the report is the same line for line.

Memory stays flat: a batch at a time, and the check that a key is not reused
for a different chain keeps a digest of each record, not the record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from annotation.public_formats import unwrapped
from k12vista import bulk
from k12vista.import_files import MAX_LINE_BYTES, RecordError, open_source
from k12vista.line_reasons import reason, reason_of
from k12vista.text import BadLine, parse_record_line
from pem import services
from pem.models import ChainOfThought, Step, StepLabel

BATCH_SIZE = 200

Parsed = tuple[int, services.ChainData, bytes]  # line, chain, digest of the record


def parse(number: int, line: bytes | None) -> services.Outcome | Parsed:
    """One line as a chain with its record's digest, or the failure to report."""
    if line is None:
        return "failed", number, "", reason("line_too_long", n=f"{MAX_LINE_BYTES:,}"), []
    if not line.strip():
        return "skip", number, "", "", []
    try:
        record = parse_record_line(line)  # bad UTF-8 or JSON, deep nesting, NUL, lone surrogates
    except BadLine as exc:
        return "failed", number, "", reason_of(exc), []
    found = record.get("key") or record.get("hash_id") if isinstance(record, dict) else None
    found = found if isinstance(found, str) else ""
    try:
        if not isinstance(record, dict):
            raise RecordError("line", reason("expected_object"))
        data = services.from_reference(record) if services.is_reference(record) else services.from_studio(record)
    except RecordError as exc:
        return "failed", number, found, reason_of(exc), []
    signature = json.dumps(record, sort_keys=True, ensure_ascii=False)
    return number, data, hashlib.sha256(signature.encode("utf-8", "surrogatepass")).digest()


def write_new(chains: list[services.ChainData], import_name: str) -> None:
    """Creates the chains with their steps and this import's labels from the rows save_chain writes
    (services.chain_row and its kin); every other column takes its default. Inside a transaction."""
    now = timezone.now()
    defaults = bulk.defaults_of(ChainOfThought)
    cots = [{**defaults, **services.chain_row(data), "created": now} for data in chains]
    cot_ids = bulk.insert_rows(ChainOfThought, cots, ids=True)
    steps = [
        {"cot_id": cot_id, **row}
        for cot_id, data in zip(cot_ids, chains, strict=True)
        for row in services.step_rows(data.steps)
    ]
    step_ids = iter(bulk.insert_rows(Step, steps, ids=True))
    labels, label_defaults = [], bulk.defaults_of(StepLabel)
    for data in chains:
        by_position = [next(step_ids) for _ in data.steps]
        for (position, rater), (label, explanation) in services.incoming_labels(data, import_name).items():
            row = services.imported_label_row(rater, label, explanation)
            labels.append({**label_defaults, "step_id": by_position[position - 1], **row, "created": now})
    bulk.insert_rows(StepLabel, labels)


class Importer:
    def __init__(self, import_name: str) -> None:
        self.import_name = import_name
        self.report = services.ImportReport()
        self.seen: dict[str, tuple[int, bytes]] = {}  # key -> (first line, digest of its record)

    def flush(self, batch: list[Any]) -> None:
        parsed: list[Parsed] = [item for item in batch if len(item) == 3]
        services.fill_from_bank([data for _n, data, _d in parsed])
        stored = set(
            ChainOfThought.objects.filter(key__in={d.key for _n, d, _g in parsed}).values_list("key", flat=True)
        )
        outcomes: dict[int, services.Outcome] = {item[1]: item for item in batch if len(item) != 3}
        new: dict[str, Parsed] = {}
        careful: list[Parsed] = []
        for item in parsed:
            key = item[1].key
            if key in stored or key in self.seen or key in new:
                careful.append(item)
            else:
                new[key] = item
        if new:
            try:
                with transaction.atomic():
                    write_new([data for _n, data, _d in new.values()], self.import_name)
            except (DataError, IntegrityError):  # one record the database refuses, or a race: one at a time
                careful += new.values()
            else:
                for number, data, digest in new.values():
                    self.seen.setdefault(data.key, (number, digest))
                    outcomes[number] = ("created", number, data.key, "", data.warnings)
        same = self.unchanged([item for item in careful if item[1].key in stored])
        for item in sorted(careful, key=lambda item: item[0]):
            outcomes[item[0]] = self.save_one(*item, unchanged=id(item) in same)
        for item in batch:
            self.report.tally(outcomes[item[0] if len(item) == 3 else item[1]])
        batch.clear()

    def unchanged(self, items: list[Parsed]) -> set[int]:
        """Which of these records (by id()) match their stored chain exactly: the same snapshot,
        steps and this import's labels, and no training-data mark to add. Three queries for the
        batch; save_chain would find them unchanged one by one and write nothing."""
        if not items:
            return set()
        fields = ("id", "key", "in_training_data", *services.SNAPSHOT_FIELDS)
        cots = {row["key"]: row for row in ChainOfThought.objects.filter(
            key__in={data.key for _n, data, _d in items}).values(*fields)}  # fmt: skip
        steps: dict[int, list[str]] = {}
        for cot_id, text in Step.objects.filter(cot_id__in=[c["id"] for c in cots.values()]).order_by(
            "cot_id", "position").values_list("cot_id", "text"):  # fmt: skip
            steps.setdefault(cot_id, []).append(text)
        incoming = {id(item): services.incoming_labels(item[1], self.import_name) for item in items}
        raters = {rater for labels in incoming.values() for _position, rater in labels}
        labels: dict[int, dict] = {}
        rows = StepLabel.objects.filter(step__cot_id__in=[c["id"] for c in cots.values()],
                                        source=StepLabel.Source.IMPORTED, rater__in=raters)  # fmt: skip
        for cot_id, position, rater, label, explanation in rows.values_list(
            "step__cot_id", "step__position", "rater", "label", "explanation"):  # fmt: skip
            labels.setdefault(cot_id, {})[(position, rater)] = (label, explanation)
        same = set()
        for item in items:
            data, cot = item[1], cots.get(item[1].key)
            if cot is None or (data.in_training_data and not cot["in_training_data"]):
                continue
            if any(cot[name] != getattr(data, name) for name in services.SNAPSHOT_FIELDS):
                continue
            wanted = {(pos, rater) for pos, rater in incoming[id(item)]}
            stored = {k: v for k, v in labels.get(cot["id"], {}).items() if k[1] in {r for _p, r in wanted}}
            if steps.get(cot["id"], []) == data.steps and stored == incoming[id(item)]:
                same.add(id(item))
        return same

    def save_one(
        self, number: int, data: services.ChainData, digest: bytes, *, unchanged: bool = False
    ) -> services.Outcome:
        """One record through the careful path (its own savepoint), as the line-by-line import did."""
        if data.key in self.seen and self.seen[data.key][1] != digest:
            reused = reason("key_reused", key=repr(data.key), line=self.seen[data.key][0])
            return "failed", number, data.key, reused, data.warnings
        if unchanged:
            self.seen.setdefault(data.key, (number, digest))
            return "unchanged", number, data.key, "", data.warnings
        try:
            outcome, detail = services.save_chain(data, import_name=self.import_name)
        except (DataError, IntegrityError) as exc:  # a value this database cannot hold; others stop the job
            return "failed", number, data.key, reason("database_refused", error=str(exc)), data.warnings
        self.seen.setdefault(data.key, (number, digest))
        return outcome, number, data.key, detail, data.warnings


def import_records(
    *, path: str | Path, name: str = "", progress: Callable[[int, int | None], None] | None = None,
    batch_size: int = BATCH_SIZE,
) -> services.ImportReport:  # fmt: skip
    """Imports every line of a JSONL file (or a zip holding one); see pem.services' docstring.

    ``name`` is the rater of the imported labels (the file's name when empty).
    Raises k12vista.import_files.ImportFileError when the file as a whole is
    unusable; problems of single lines go in the report.
    """
    import_name = (name or Path(path).name).strip()[:200]
    importer = Importer(import_name)
    batch: list[Any] = []
    # A published set's wrapper file reads as records here too, as it always has (each then fails as no chain).
    with open_source(path, unwrap=unwrapped) as source:
        total = source.count_lines()
        if progress:
            progress(0, total)
        for done, (number, line) in enumerate(source.lines(), start=1):
            batch.append(parse(number, line))
            if len(batch) >= batch_size:
                importer.flush(batch)
                if progress:
                    progress(done, total)
        importer.flush(batch)
        if progress:
            progress(total, total)
    if importer.report.created:
        bulk.analyze(ChainOfThought, Step, StepLabel)
    return importer.report
