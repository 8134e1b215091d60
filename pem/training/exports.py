"""PEM training exports: the chains a filter run kept, streamed into four fine-tuning formats.

An export is a directory under ``MEDIA_ROOT/pem-training/export-<id>/`` (our
names, from ids) holding ``llamafactory.jsonl`` with ``dataset_info.json`` and
an example ``llamafactory-qwen2_5vl-lora.yaml``, ``swift.jsonl``,
``trl.jsonl``, ``qwen.jsonl`` (pem/training/formats.py), ``images/`` (each
figure once, ``<figure id>.<ext>``, referenced by relative path),
``manifest.json`` (counts, the pinned ``min_pixels``/``max_pixels``, the
filter run and its parameters, every file's SHA-256) and ``datasheet.md``.

Rows are read with one ordered query through a server-side cursor, a chain
at a time, so memory stays flat. The directory is written under a temporary
name and renamed when complete: a crashed export leaves nothing half-written.

Chains already in PEBench are refused before anything is written, and named;
after writing, the exported chains are marked ``in_training_data`` in the
same transaction that checks PEBench once more, so a PEBench build (which
refuses such chains) and an export never share a chain.
"""

# SQL here is assembled from our own table names; values travel as parameters.
# ruff: noqa: S608

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext

from annotation import statistics
from annotation.export import sha256_of
from annotation.models import Figure
from inference.models import PromptTemplate
from inference.reference import register as reference_register
from k12vista.vocabulary import STEP_LABELS, TAXONOMY_VERSION, QuestionType
from pem.models import ChainOfThought, FilteredChain, FilterRun, Step, StepLabel, TrainingExport
from pem.training import formats

# Qwen2.5-VL's processor defaults (28x28 patches): 4 to 16384 patches per image.
DEFAULT_MIN_PIXELS = 4 * 28 * 28
DEFAULT_MAX_PIXELS = 16384 * 28 * 28
PROGRESS_EVERY = 2000
LISTED_KEYS = 100
FETCH_ROWS = 5000


class ExportError(ValueError):
    """The export cannot be made; the message says why."""


def export_dir_name(export: TrainingExport) -> str:
    return f"pem-training/export-{export.pk}"


def export_path(export: TrainingExport) -> Path:
    return Path(settings.MEDIA_ROOT) / export_dir_name(export)


def kept_chain_ids(run: FilterRun):
    return FilteredChain.objects.filter(run=run, removed_by="").values("cot_id")


def pebench_conflicts(run: FilterRun) -> tuple[int, list[str]]:
    """How many kept chains are PEBench items, and the keys of the first of them."""
    chains = ChainOfThought.objects.in_pebench().filter(pk__in=kept_chain_ids(run)).order_by("id")
    return chains.count(), list(chains.values_list("key", flat=True)[:LISTED_KEYS])


def refuse_pebench(run: FilterRun) -> None:
    count, keys = pebench_conflicts(run)
    if count:
        listed = ", ".join(keys)
        if count > len(keys):
            listed += gettext(" and %(n)d more") % {"n": count - len(keys)}
        raise ExportError(
            gettext("%(n)d kept chains are PEBench items and may never be training data: %(keys)s")
            % {"n": count, "keys": listed}
        )


def start_export(
    *, filter_run: FilterRun, user: Any, formats_wanted=formats.FORMATS,
    min_pixels: int = DEFAULT_MIN_PIXELS, max_pixels: int = DEFAULT_MAX_PIXELS,
    style: str = TrainingExport.Style.STUDIO, prompt_set: str = "",
) -> TrainingExport:  # fmt: skip
    wanted = [name for name in formats.FORMATS if name in set(formats_wanted)]
    if not wanted or set(formats_wanted) - set(formats.FORMATS):
        raise ExportError(gettext("choose formats among %(formats)s") % {"formats": ", ".join(formats.FORMATS)})
    if filter_run.finished is None:
        raise ExportError(gettext("%(run)s has not finished") % {"run": filter_run})
    if not filter_run.kept:  # an export of nothing would "succeed" with 0 records and fail training later
        raise ExportError(gettext("%(run)s kept no chains: nothing to export") % {"run": filter_run})
    if not 0 < min_pixels <= max_pixels:
        raise ExportError(gettext("min_pixels must be positive and at most max_pixels"))
    if style not in TrainingExport.Style.values:
        raise ExportError(gettext("unknown style %(style)s") % {"style": style})
    if style == TrainingExport.Style.REFERENCE:
        prompt_set = prompt_set or reference_register.latest_set()
        try:
            for qtype in QuestionType.values:
                reference_register.reference_prompt(PromptTemplate.Kind.JUDGE_STEPS, qtype, prompt_set=prompt_set)
        except LookupError as exc:
            raise ExportError(str(exc)) from None
    refuse_pebench(filter_run)
    if style != TrainingExport.Style.REFERENCE:
        prompt_set = ""
    return TrainingExport.objects.create(filter_run=filter_run, formats=wanted, min_pixels=min_pixels,
                                         max_pixels=max_pixels, created_by=user, style=style,
                                         prompt_set=prompt_set)  # fmt: skip


def _from_join(run: FilterRun) -> tuple[str, list]:
    q = connection.ops.quote_name
    sql = f"""
        FROM {q(FilteredChain._meta.db_table)} f
        JOIN {q(ChainOfThought._meta.db_table)} c ON c.id = f.cot_id
        JOIN {q(Step._meta.db_table)} s ON s.cot_id = c.id
        LEFT JOIN {q(StepLabel._meta.db_table)} l ON l.step_id = s.id AND l.source = %s AND l.rater = %s
        WHERE f.run_id = %s AND f.removed_by = ''
    """
    return sql, [run.label_source, run.label_rater, run.pk]


def _rows(run: FilterRun) -> Iterator[tuple]:
    """(cot id, question id, question text, reference answer, reference solution, question type,
    [step texts], [labels], [explanations]), by chain."""
    joined, params = _from_join(run)
    if connection.vendor == "postgresql":
        # One row per chain, its steps gathered by the server, read by COPY: it streams as the server
        # produces it (the client's reading paces it, so memory stays flat), psycopg decodes the
        # binary rows in C, and the plan is the one for all rows, not a cursor's for the first tenth.
        sql = f"""
            SELECT c.id::int8, c.question_id::int8, c.question_text::text, c.reference_answer::text,
                   c.reference_solution::text, c.qtype::text, array_agg(s.text::text ORDER BY s.position),
                   array_agg(l.label::text ORDER BY s.position), array_agg(l.explanation::text ORDER BY s.position)
            {joined} GROUP BY c.id ORDER BY c.id
        """
        # psycopg's own cursor (.cursor): Django's debug wrapper (DEBUG=1) takes a COPY without parameters.
        statement = f"COPY ({sql}) TO STDOUT (FORMAT BINARY)"
        with connection.cursor() as cursor, cursor.cursor.copy(statement, params) as copy:
            copy.set_types(["int8", "int8", "text", "text", "text", "text", "text[]", "text[]", "text[]"])
            yield from copy.rows()
        return
    sql = f"""
        SELECT c.id, c.question_id, c.question_text, c.reference_answer, c.reference_solution, c.qtype, s.text,
               l.label, l.explanation
        {joined} ORDER BY c.id, s.position
    """
    chain: tuple | None = None
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(FETCH_ROWS):
            for cot_id, question_id, question, answer, solution, qtype, text, label, explanation in rows:
                if chain is None or chain[0] != cot_id:
                    if chain is not None:
                        yield chain
                    chain = (cot_id, question_id, question, answer, solution, qtype, [], [], [])
                chain[6].append(text)
                chain[7].append(label)
                chain[8].append(explanation)
    if chain is not None:
        yield chain


def examples(run: FilterRun) -> Iterator[dict]:
    """One dict per kept chain: question, reference answer, steps, labels, question id."""
    for cot_id, question_id, question, answer, solution, qtype, texts, labels, explanations in _rows(run):
        if None in labels:
            raise ExportError(
                gettext("chain %(chain)s has a step without a label: run the filters again") % {"chain": cot_id}
            )
        pairs = [(label, why or "") for label, why in zip(labels, explanations, strict=True)]
        yield {"cot_id": cot_id, "question_id": question_id, "question": question, "reference_answer": answer,
               "reference_solution": solution, "qtype": qtype, "steps": texts, "labels": pairs}  # fmt: skip


class _Images:
    """Copies each figure of the kept chains' questions once into images/, before the rows are
    read (on PostgreSQL the rows come by COPY, and the connection serves nothing else meanwhile),
    and remembers each question's relative paths: memory grows with the questions, not the records."""

    def __init__(self, root: Path, run: FilterRun) -> None:
        self.root = root
        (root / "images").mkdir()
        self.by_question: dict[int, list[str]] = {}
        self.written = 0
        questions = ChainOfThought.objects.filter(pk__in=kept_chain_ids(run)).values("question_id")
        figures = Figure.objects.filter(question_id__in=questions).order_by("question_id", "position", "id")
        for figure in figures.iterator(chunk_size=2000):
            suffix = Path(figure.image.name or "").suffix.lower() or ".png"
            relative = f"images/{figure.pk}{suffix}"
            try:
                with figure.image.open("rb") as source, open(root / relative, "wb") as out:
                    shutil.copyfileobj(source, out)
            except OSError as exc:
                raise ExportError(
                    gettext("figure %(figure)s of question %(question)s cannot be read: %(error)s")
                    % {"figure": figure.pk, "question": figure.question_id, "error": exc}
                ) from exc
            self.written += 1
            self.by_question.setdefault(figure.question_id, []).append(relative)

    def for_question(self, question_id: int | None) -> list[str]:
        return self.by_question.get(question_id, []) if question_id is not None else []


def _manifest(export: TrainingExport, root: Path, counts: dict) -> dict:
    run = export.filter_run
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return {
        "export": export.pk,
        "created": timezone.now().isoformat(),
        "formats": export.formats,
        "style": export.style,
        "prompt_set": export.prompt_set,
        "records": counts["records"],
        "steps": counts["steps"],
        "images": counts["images"],
        "labels": counts["labels"],
        "min_pixels": export.min_pixels,
        "max_pixels": export.max_pixels,
        "filter_run": {
            "id": run.pk,
            "label_source": run.label_source,
            "label_rater": run.label_rater,
            "params": run.params,
            "funnel_kept": run.kept,
        },  # fmt: skip
        "taxonomy_version": TAXONOMY_VERSION,
        # The paper's Table 3 rows for PEM-800K over this export, its tokenizer named.
        "statistics": counts.get("statistics"),
        "files": {name: sha256_of(root / name) for name in files if name != "manifest.json"},
    }


def _datasheet(export: TrainingExport, manifest: dict) -> str:
    run = export.filter_run
    funnel = run.funnel
    stages = "\n".join(
        f"| {name} | {funnel[name]['chains']:,} | {funnel[name]['steps']:,} |"
        for name in ("format", "consistency", "coverage", "balance")
        if name in funnel
    )
    labels = "\n".join(
        f"| {label.code} | {label.english} | {manifest['labels'].get(label.code, 0):,} |" for label in STEP_LABELS
    )
    return f"""# PEM training data, export {export.pk}

Process-evaluation training data (PEM-800K style): each record is a model's chain of thought on a K-12
question, split into steps, each step labelled with one of the nine step labels and a short reason.

- Records: {manifest["records"]:,}; steps: {manifest["steps"]:,}; images: {manifest["images"]:,}
- Labels: source `{run.label_source}`, rater `{run.label_rater}` (taxonomy {TAXONOMY_VERSION})
- Filter run {run.pk}; parameters: `{json.dumps(run.params, ensure_ascii=False)}`
- Images: min_pixels {export.min_pixels}, max_pixels {export.max_pixels} (pinned for every trainer)
- Formats: {", ".join(export.formats)}
- Excluded: every PEBench item (checked when exporting); the exported chains are marked as training data
  and can never enter PEBench.

## What the filters removed

| filter | chains | steps |
|---|---|---|
| input | {funnel.get("input", {}).get("chains", 0):,} | {funnel.get("input", {}).get("steps", 0):,} |
{stages}

## Steps per label in this export

| code | label | steps |
|---|---|---|
{labels}
{_table_3(manifest.get("statistics"))}"""


def _table_3(found: dict | None) -> str:
    """The paper's Table 3 (K12-PEM-800K rows) for this export, the paper's figures beside."""
    if not found:
        return ""
    rows = "\n".join(f"| {label} | {'—' if ours is None else ours} | {paper} |"
                     for label, ours, paper in statistics.table_3_pem_rows(found))  # fmt: skip
    return f"""
## Statistics (the paper's Table 3)

Tokens counted by: {found["tokenizer"]}; token means over {found["tokens_counted_on"]:,} of the {found["records"]:,}
records (every k-th); records and error steps (labels other than CS) over all of them. The student input is the
chain's steps, the output the training target.

| statistic | this export | K12-PEM-800K (the paper) |
|---|---|---|
{rows}
"""


def _style(export: TrainingExport) -> Callable[[dict], tuple[str, str, str]]:
    """(user text, answer, system) of an example in the export's style. K12-PEM's: the registered
    reference step-judge prompt of the chain's question type, the reference list as the answer, no system."""
    if export.style != TrainingExport.Style.REFERENCE:
        return lambda example: (formats.user_text(example), formats.assistant_text(example), formats.SYSTEM_PROMPT)
    # Read before the rows: on PostgreSQL they come by COPY, and the connection serves nothing else meanwhile.
    templates = {
        qtype: reference_register.reference_prompt(
            PromptTemplate.Kind.JUDGE_STEPS, qtype, prompt_set=export.prompt_set
        ).user_template
        for qtype in QuestionType.values
    }

    def reference(example: dict) -> tuple[str, str, str]:
        template = templates.get(example.get("qtype") or "", templates[QuestionType.FREE_RESPONSE])
        return formats.reference_user_text(example, template), formats.reference_target(example), ""

    return reference


def write_export(export: TrainingExport, progress: Callable[[int, int | None], None] | None = None) -> dict:
    """Writes the export's directory (again, from scratch, when run again) and marks its chains."""
    run = export.filter_run
    refuse_pebench(run)
    final = export_path(export)
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    images = _Images(partial, run)
    lines_of = _style(export)
    reference = export.style == TrainingExport.Style.REFERENCE  # K12-PEM's lines keep the image first
    total = run.kept
    counts: dict[str, Any] = {"records": 0, "steps": 0, "labels": {}}
    table_3 = statistics.PemTable3(total)
    outs = {name: open(partial / formats.FILE_NAMES[name], "wb") for name in export.formats}  # noqa: SIM115
    try:
        if progress:
            progress(0, total)
        for example in examples(run):
            example["images"] = images.for_question(example["question_id"])
            # The prompt and the answer once for every format; lines written by orjson (UTF-8, the
            # same JSON as json.dumps without its spaces): json.dumps was half the export's time.
            text, answer, system = lines_of(example)
            for name, out in outs.items():
                line = formats.render(name, example, text=text, answer=answer, system=system, images_first=reference)
                out.write(orjson.dumps(line))
                out.write(b"\n")
            table_3.add(problem=example["question"], solution=example["reference_solution"] or "",
                        steps=example["steps"], output=answer)  # fmt: skip
            counts["records"] += 1
            counts["steps"] += len(example["steps"])
            for label, _ in example["labels"]:
                counts["labels"][label] = counts["labels"].get(label, 0) + 1
            if progress and counts["records"] % PROGRESS_EVERY == 0:
                progress(counts["records"], total)
    finally:
        for out in outs.values():
            out.close()
    if not counts["records"]:  # the kept chains went meanwhile (a PEBench build took them): not a success
        shutil.rmtree(partial, ignore_errors=True)
        raise ExportError(gettext("%(run)s has no chains left to export") % {"run": run})
    counts["images"] = images.written
    counts["statistics"] = table_3.result(counts["labels"])
    if "llamafactory" in export.formats:
        (partial / "dataset_info.json").write_text(json.dumps(formats.dataset_info(), indent=2), encoding="utf-8")
        yaml = formats.llamafactory_yaml(min_pixels=export.min_pixels, max_pixels=export.max_pixels)
        (partial / "llamafactory-qwen2_5vl-lora.yaml").write_text(yaml, encoding="utf-8")
    manifest = _manifest(export, partial, counts)
    (partial / "datasheet.md").write_text(_datasheet(export, manifest), encoding="utf-8")
    manifest["files"]["datasheet.md"] = sha256_of(partial / "datasheet.md")
    (partial / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2), encoding="utf-8")
    with transaction.atomic():
        marked = ChainOfThought.objects.filter(pk__in=kept_chain_ids(run)).update(in_training_data=True)
        refuse_pebench(run)  # a PEBench build that took a chain meanwhile undoes the mark with this error
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
        export.status = TrainingExport.Status.DONE
        export.records, export.images = counts["records"], counts["images"]
        export.manifest_sha256 = sha256_of(final / "manifest.json")
        export.directory = export_dir_name(export)
        export.save(update_fields=["status", "records", "images", "manifest_sha256", "directory"])
    if progress:
        progress(total, total)
    return {"export": export.pk, "records": counts["records"], "images": counts["images"], "marked": marked,
            "manifest_sha256": export.manifest_sha256, "directory": export.directory}  # fmt: skip


def export_files(export: TrainingExport) -> dict[str, str]:
    """The export's files and their SHA-256, from its manifest (plus the manifest itself)."""
    if export.status != TrainingExport.Status.DONE:
        return {}
    manifest = json.loads((export_path(export) / "manifest.json").read_text(encoding="utf-8"))
    return {**manifest["files"], "manifest.json": export.manifest_sha256}


def verify_export(export: TrainingExport) -> dict[str, int]:
    """Checks every line of every format against its rules and every file against the manifest."""
    root = export_path(export)
    for name, digest in export_files(export).items():
        if sha256_of(root / name) != digest:
            raise formats.FormatError(f"{name} does not match its SHA-256 in the manifest")

    def exists(path: str) -> bool:
        return (root / path).is_file()

    checked = {}
    for name in export.formats:
        n = 0
        with open(root / formats.FILE_NAMES[name], encoding="utf-8") as lines:
            for n, line in enumerate(lines, 1):  # noqa: B007
                try:
                    formats.check_line(name, json.loads(line), exists)
                except formats.FormatError as exc:
                    raise formats.FormatError(f"{formats.FILE_NAMES[name]} line {n}: {exc}") from None
        checked[name] = n
    if "llamafactory" in export.formats:
        info = json.loads((root / "dataset_info.json").read_text(encoding="utf-8"))
        formats.check_dataset_info(info, set(formats.FILE_NAMES.values()))
    return checked
