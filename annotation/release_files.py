"""A release's files, written once by the build job and checksummed:

- the reference JSONL (the paper's release format; ``export.write_reference``),
- the studio zip with every figure (``export.write_studio``),
- a Hugging Face ``datasets`` copy: Parquet shards carrying ``datasets``'
  Features in their schema (images included as bytes) and a dataset card
  (README.md with a YAML header), zipped for download and kept unzipped so
  ``datasets.load_dataset(folder)`` reads it.

Everything lives under ``MEDIA_ROOT/releases/v<version>/`` with names made from
the version, is written to a ``.partial`` name and renamed, and is served only
by ``views.release_file`` (researchers and administrators).
"""

from __future__ import annotations

import io
import itertools
import json
import math
import os
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
import yaml
from datasets import Features, Image, List, Value
from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from annotation import export, statistics
from annotation.models import Question, Release, ReleaseFile, ReleaseItem
from k12vista import releases
from k12vista.vocabulary import QUESTION_TYPE_ZH

SPLIT = "test"  # a benchmark: everything is for evaluation
FEATURES = Features({
    "hash_id": Value("string"),
    "subject": Value("string"),
    "grade": Value("int32"),
    "stage": Value("string"),
    "type": Value("string"),
    "type_zh": Value("string"),
    "question": Value("string"),
    "options": List({"label": Value("string"), "text": Value("string")}),
    "answers": List(Value("string")),
    "raw_solution": Value("string"),
    "solution_steps": List(Value("string")),
    "knowledge_points": List(Value("string")),
    "core_units": List(Value("string")),
    "difficulty": Value("float32"),
    "source": Value("string"),
    "content_hash": Value("string"),
    "provenance": Value("string"),  # JSON: document, page, box, refinement runs, audits
    "images": List(Image()),
})  # fmt: skip
ROW_GROUP = 500
CITATION = """@misc{k12vista,
  title={K12Vista: Exploring the Boundaries of MLLMs in K-12 Education},
  author={{K12Vista authors}},
  howpublished={\\url{https://github.com/lichongod/K12Vista}}
}"""


def release_dir(release: Release) -> Path:
    return Path(settings.MEDIA_ROOT) / "releases" / f"v{release.version}"


def record(release: Release, form: str, path: Path, count: int) -> ReleaseFile:
    found, _ = ReleaseFile.objects.update_or_create(
        release=release, form=form,
        defaults={**releases.checksummed(path), "count": count},
    )  # fmt: skip
    return found


# --- the Hugging Face copy ------------------------------------------------------------------


ITEM_FIELDS = ("hash_id", "content_hash", "content", "provenance")


def item_rows(items: QuerySet[ReleaseItem]) -> QuerySet:
    """The items as ``ITEM_FIELDS`` tuples, content and provenance as the database's JSON text:
    the copy stores provenance as a JSON string (decoding it only to encode it again would be
    wasted) and pyarrow parses the content itself (``parsed_group``)."""
    return items.annotate(
        content_text=Cast("content", TextField()), provenance_text=Cast("provenance", TextField())
    ).values_list("hash_id", "content_hash", "content_text", "provenance_text")


def figure_path(name: str) -> str | None:
    try:
        return default_storage.path(name)
    except NotImplementedError:  # a storage without local paths
        return None


def read_figure_bytes(name: str) -> bytes:
    path = figure_path(name)
    if path is None:
        with default_storage.open(name, "rb") as stored:
            return stored.read()
    with open(path, "rb") as stored:
        return stored.read()


def read_figure(name: str) -> dict:
    return {"bytes": read_figure_bytes(name), "path": Path(name).name}


def hf_row(item: tuple, images: list[dict]) -> dict:
    """One row of the Hugging Face copy from an item's (hash_id, content_hash, content, provenance)."""
    hash_id, content_hash, c, provenance = item
    return {
        "hash_id": hash_id, "subject": c["subject"], "grade": known_grade(c), "stage": c.get("stage", ""),
        "type": c["qtype"], "type_zh": QUESTION_TYPE_ZH.get(c["qtype"], c["qtype"]), "question": c["text"],
        "options": [{"label": str(o.get("label", "")), "text": str(o.get("text", ""))} for o in c["options"]],
        "answers": c["answers"], "raw_solution": c["raw_solution"], "solution_steps": c["solution_steps"],
        "knowledge_points": c["knowledge_points"], "core_units": c.get("core_units", []),
        "difficulty": c["difficulty"], "source": c["source"], "content_hash": content_hash,
        "provenance": json.dumps(provenance, ensure_ascii=False), "images": images,
    }  # fmt: skip


def known_grade(c: dict) -> int | None:
    """The grade as the release JSONL writes it: null where the source gave only the stage (the
    stored grade is then the stage's last, a stand-in never published as a grade)."""
    return c["grade"] if c.get("grade_known", True) else None


def row_groups(items: Any, size: int) -> Any:
    """Items in groups of ``size`` as row dicts with their figures read (the bench's pyarrow-alone input)."""
    for group in itertools.batched(items, size):
        yield [hf_row(item, [read_figure(n) for n in item[2].get("figures", [])]) for item in group]


def _strings(values: list) -> pa.Array:
    return pa.array(values, pa.string())


def _string_lists(values: list) -> pa.Array:
    return pa.array(values, pa.list_(pa.string()))


# The content fields the copy reads, as pyarrow's JSON reader parses them from the content's JSON text.
CONTENT_SCHEMA = pa.schema([
    ("subject", pa.string()), ("grade", pa.int64()), ("stage", pa.string()), ("qtype", pa.string()),
    ("text", pa.string()), ("options", pa.list_(pa.struct([("label", pa.string()), ("text", pa.string())]))),
    ("answers", pa.list_(pa.string())), ("raw_solution", pa.string()), ("solution_steps", pa.list_(pa.string())),
    ("knowledge_points", pa.list_(pa.string())), ("core_units", pa.list_(pa.string())), ("difficulty", pa.float64()),
    ("source", pa.string()), ("figures", pa.list_(pa.string())),
])  # fmt: skip
COPIED = {"subject": "subject", "stage": "stage", "type": "qtype", "question": "text", "options": "options",
          "answers": "answers", "raw_solution": "raw_solution", "solution_steps": "solution_steps",
          "knowledge_points": "knowledge_points", "core_units": "core_units", "source": "source"}  # fmt: skip


def figure_reader() -> Callable[[str], bytes]:
    """Reads stored figures by name. On a local folder it joins the folder and the name itself
    (the storage's ``path`` normalises and checks every name, a tenth of the writer's time);
    names that could leave the folder, and other storages, go through the storage."""
    try:
        base = default_storage.path("")
    except NotImplementedError:
        return read_figure_bytes

    def read(name: str) -> bytes:
        if name.startswith("/") or "\\" in name or ".." in name.split("/"):
            return read_figure_bytes(name)
        with open(os.path.join(base, name), "rb") as stored:
            return stored.read()

    return read


def images_array(names: list[list[str]], image_type: pa.DataType) -> pa.Array:
    """The images column: every figure's bytes joined into one buffer, cut into images by
    offsets (handing pyarrow a list of bytes objects converts them one by one: 20x slower)."""
    read = figure_reader()
    blobs, paths, row_offsets = [], [], [0]
    for found in names:
        for name in found:
            blobs.append(read(name))
            paths.append(name.rsplit("/", 1)[-1])
        row_offsets.append(len(blobs))
    ends = list(itertools.accumulate(map(len, blobs), initial=0))
    if ends[-1] >= 2**31:
        raise ValueError("a row group's figures exceed 2 GiB; write smaller row groups")
    data = pa.BinaryArray.from_buffers(
        pa.binary(), len(blobs), [None, pa.array(ends, pa.int32()).buffers()[1], pa.py_buffer(b"".join(blobs))]
    )  # fmt: skip
    return pa.ListArray.from_arrays(
        pa.array(row_offsets, pa.int32()),
        pa.StructArray.from_arrays([data, _strings(paths)], fields=list(image_type.value_type)),
        type=image_type,
    )  # fmt: skip


Columns = tuple[dict[str, Any], list[list[str]]]  # every column but the images, and each row's figure names


def assemble(columns: dict[str, Any], figures: list[list[str]], schema: pa.Schema) -> pa.Table:
    """The row group with its images read (done by the writer thread: the reads wait on the disk)."""
    columns = columns | {"images": images_array(figures, schema.field("images").type)}
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def parsed_group(group: tuple, schema: pa.Schema) -> Columns | None:
    """The row group with the content parsed by pyarrow's JSON reader (C++, no Python object
    per value), or None when some content does not fit the copy's types as it stands (a number
    for a label, a missing field): the caller then builds it in Python, which converts."""
    hash_ids, digests, contents, provenance = zip(*group, strict=True)
    if any('"grade_known"' in content for content in contents):
        return None  # an unknown grade is written null: the Python path reads grade_known
    data = "\n".join(contents).encode("utf-8")
    try:
        parsed = pa_json.read_json(
            io.BytesIO(data),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
            parse_options=pa_json.ParseOptions(explicit_schema=CONTENT_SCHEMA, unexpected_field_behavior="ignore",
                                               newlines_in_values=False),
        )  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if parsed.num_rows != len(group) or any(parsed.column(name).null_count for name in CONTENT_SCHEMA.names):
        return None
    options = parsed.column("options").combine_chunks().flatten()
    if options.field("label").null_count or options.field("text").null_count:
        return None  # an option without its label or text: the Python path writes ""
    qtypes = parsed.column("qtype").to_pylist()
    columns = {out: parsed.column(name) for out, name in COPIED.items()}
    columns |= {
        "hash_id": _strings(list(hash_ids)), "content_hash": _strings(list(digests)),
        "provenance": _strings([p if isinstance(p, str) else json.dumps(p, ensure_ascii=False) for p in provenance]),
        "grade": parsed.column("grade").cast(pa.int32()), "difficulty": parsed.column("difficulty").cast(pa.float32()),
        "type_zh": _strings([QUESTION_TYPE_ZH.get(kind, kind) for kind in qtypes]),
    }  # fmt: skip
    return columns, parsed.column("figures").to_pylist()


def arrow_group(group: tuple, schema: pa.Schema) -> pa.Table:
    return assemble(*group_columns(group, schema), schema)


def group_columns(group: tuple, schema: pa.Schema) -> Columns:
    """One row group built column by column from the items (no row dicts, figures as bytes).

    Content given as JSON text (as ``item_rows`` reads it) is parsed by pyarrow where it fits
    the copy's types; otherwise, and for content given as dicts, it is built here.

    This is the writer's hot path: each column is one Python list handed to
    pyarrow once, and the images column is assembled from one flat binary
    array and its offsets rather than from a dict per image."""
    if group and isinstance(group[0][2], str):
        found = parsed_group(group, schema)
        if found is not None:
            return found
        group = tuple((h, d, json.loads(c) if isinstance(c, str) else c, p) for h, d, c, p in group)
    hash_ids, digests, provenance = [], [], []
    subject, grade, stage, qtype, type_zh, text, options = [], [], [], [], [], [], []
    answers, raw, steps, points, units, difficulty, source = [], [], [], [], [], [], []
    figures: list[list[str]] = []
    zh = QUESTION_TYPE_ZH
    for hash_id, content_hash, c, prov in group:
        hash_ids.append(hash_id)
        digests.append(content_hash)
        provenance.append(prov if isinstance(prov, str) else json.dumps(prov, ensure_ascii=False))
        subject.append(c["subject"])
        grade.append(known_grade(c))
        stage.append(c.get("stage", ""))
        kind = c["qtype"]
        qtype.append(kind)
        type_zh.append(zh.get(kind, kind))
        text.append(c["text"])
        options.append([{"label": str(o.get("label", "")), "text": str(o.get("text", ""))} for o in c["options"]])
        answers.append(c["answers"])
        raw.append(c["raw_solution"])
        steps.append(c["solution_steps"])
        points.append(c["knowledge_points"])
        units.append(c.get("core_units", []))
        difficulty.append(c["difficulty"])
        source.append(c["source"])
        figures.append(c.get("figures", []))
    columns = {
        "hash_id": _strings(hash_ids), "subject": _strings(subject), "grade": pa.array(grade, pa.int32()),
        "stage": _strings(stage), "type": _strings(qtype), "type_zh": _strings(type_zh), "question": _strings(text),
        "options": pa.array(options, schema.field("options").type), "answers": _string_lists(answers),
        "raw_solution": _strings(raw), "solution_steps": _string_lists(steps),
        "knowledge_points": _string_lists(points), "core_units": _string_lists(units),
        "difficulty": pa.array(difficulty, pa.float32()), "source": _strings(source),
        "content_hash": _strings(digests), "provenance": _strings(provenance),
    }  # fmt: skip
    return columns, figures


def write_parquet(items: Any, folder: Path, total: int, *, rows_per_shard: int, tick: Callable[[], None]) -> list[str]:
    """Shards named as the Hub names them (``data/test-00000-of-00002.parquet``); ``items`` yields
    ``ITEM_FIELDS`` tuples in order.

    Row groups are built here while one writer thread reads the previous one's
    figures, encodes and compresses it (file reads and pyarrow let go of the GIL),
    so reading the database overlaps with reading the figures and writing."""
    schema = FEATURES.arrow_schema
    shards = max(1, math.ceil(total / rows_per_shard))
    names = [f"data/{SPLIT}-{i:05d}-of-{shards:05d}.parquet" for i in range(shards)]
    (folder / "data").mkdir(parents=True, exist_ok=True)
    group_size = math.gcd(ROW_GROUP, rows_per_shard)  # a row group never straddles two shards
    state: dict[str, Any] = {"writer": None, "written": 0}

    def write(columns: dict[str, Any], figures: list[list[str]]) -> None:
        table = assemble(columns, figures, schema)
        written = state["written"]
        if state["writer"] is None or written % rows_per_shard == 0:
            if state["writer"] is not None:
                state["writer"].close()
            state["writer"] = pq.ParquetWriter(folder / names[written // rows_per_shard], schema)
        state["writer"].write_table(table)
        state["written"] = written + table.num_rows

    pending = None
    try:
        with ThreadPoolExecutor(max_workers=1) as writer_thread:
            for group in itertools.batched(items, group_size):
                columns, figures = group_columns(group, schema)
                if pending is not None:
                    pending.result()  # in order, and an error stops the build here
                pending = writer_thread.submit(write, columns, figures)
                for _row in group:
                    tick()
            if pending is not None:
                pending.result()
        if state["writer"] is None:  # an empty release still has its (empty) shard
            state["writer"] = pq.ParquetWriter(folder / names[0], schema)
    finally:
        if state["writer"] is not None:
            state["writer"].close()
    return names


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "100K<n<1M"


def rate_text(p: dict) -> str:
    if not p or p.get("value") is None:
        return "—"
    low, high = p["ci95"] or (None, None)
    interval = f" (95% CI {low:.3f}–{high:.3f})" if low is not None else ""
    return f"{p['value']:.3f}{interval}, {p['successes']}/{p['n']}"


def grade_text(cell: dict) -> str:
    """A cell's grade, or its stage where the source gave only that (never the stand-in grade)."""
    return str(cell["grade"]) if cell["grade"] is not None else f"{cell.get('stage', '')} (grade not given)"


def statistics_section(found: dict | None) -> list[str]:
    """The paper's Table 2 for this release, beside the paper's own figures for its release."""
    if not found:
        return []
    lines = ["", "## Statistics (the paper's Table 2)", "", f"Tokens counted by: {found['tokenizer']}.", "",
             "| statistic | this release | K12Vista paper (its own release) |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {label} | {'—' if ours is None else ours} | {paper} |" for label, ours, paper in
              statistics.table_2_rows(found)]  # fmt: skip
    return lines


def dataset_card(release: Release) -> str:
    """README.md: the YAML header the Hub reads, then counts, coverage, audit quality, provenance, citation."""
    summary = release.summary
    header = {
        "license": release.licence.lower(),
        "language": ["zh"],
        "pretty_name": release.name,
        "size_categories": [size_category(summary.get("questions", 0))],
        "task_categories": ["visual-question-answering"],
        "tags": ["k12", "education", "multimodal", "benchmark"],
        "configs": [{"config_name": "default", "data_files": [{"split": SPLIT, "path": f"data/{SPLIT}-*"}]}],
        "k12vista": {
            "release": release.version,
            "studio_commit": release.studio_commit,
            "candidate_set": summary.get("candidate_set"),
            "built": release.created.isoformat(),
        },  # fmt: skip
    }
    lines = ["---", yaml.safe_dump(header, allow_unicode=True, sort_keys=False).strip(), "---", "",
             f"# {release.name}", "",
             f"K12Vista release v{release.version}: {summary.get('questions', 0)} questions, built by K12Vista "
             "Studio from an audited question bank.", "", "## Counts per cell", "",
             "| subject | grade | type | questions |", "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {c['subject']} | {grade_text(c)} | {c['qtype']} | {c['count']} |" for c in summary.get("cells", [])]
    lines += statistics_section(summary.get("statistics"))
    kp = summary.get("knowledge_points", {})
    lines += ["", "## Knowledge-point coverage", "",
              f"- knowledge points covered: {kp.get('covered', 0)} of {kp.get('in_bank', 0)} in the bank",
              f"- core units covered: {kp.get('core_units_covered', 0)} of {kp.get('core_units', 0)}", "",
              "## Audit quality", ""]  # fmt: skip
    audits = summary.get("audits", [])
    if not audits:
        lines.append("No audit results were recorded for these questions.")
    for audit in audits:
        lines += [
            f"### Audit #{audit['id']}: {audit['name']}",
            "",
            f"Plan: ISO 2859-1 single sampling, normal inspection, level II, AQL {audit.get('aql')}; "
            f"decision: {audit.get('decision') or '—'}.",
            "",
            "| dimension | high-quality rate |",
            "|---|---|",
        ]
        lines += [f"| {name} | {rate_text(p)} |" for name, p in audit.get("rates", {}).items()]
        lines.append("")  # fmt: skip
    refinement = summary.get("refinement", {})
    lines += ["", "## Provenance", "",
              f"- release version: {release.version}", f"- studio commit: `{release.studio_commit or 'unknown'}`",
              f"- models used in refinement: {', '.join(refinement.get('models', [])) or 'none recorded'}",
              f"- model runs: {', '.join(refinement.get('runs', [])) or 'none recorded'}",
              "- each row's `content_hash` is the studio's hash of its content and `provenance` (JSON) names its "
              "source document, page and box, the model runs that refined it and the audits that passed it", "",
              "## Licence", "", f"{release.licence}", "", "## Citation", "",
              "Cite the K12Vista paper and name this release's version:", "", "```bibtex", CITATION, "```",
              ""]  # fmt: skip
    return "\n".join(lines)


def zip_folder(folder: Path, out: Path) -> None:
    partial = out.with_name(out.name + ".partial")
    try:
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    # Parquet is compressed already.
                    kind = zipfile.ZIP_STORED if path.suffix == ".parquet" else zipfile.ZIP_DEFLATED
                    archive.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}", compress_type=kind)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)


def write_huggingface(release: Release, tick: Callable[[], None]) -> tuple[Path, int]:
    base = release_dir(release)
    folder = base / f"k12vista-v{release.version}-hf"
    for old in folder.rglob("*.parquet"):
        old.unlink()  # a rerun of the job starts the shards again
    items = release.items.order_by("hash_id")
    total = items.count()
    rows_per_shard = getattr(settings, "RELEASE_PARQUET_ROWS_PER_SHARD", 5000)
    rows = item_rows(items).iterator(chunk_size=ROW_GROUP)
    write_parquet(rows, folder, total, rows_per_shard=rows_per_shard, tick=tick)
    (folder / "README.md").write_text(dataset_card(release), encoding="utf-8")
    out = base / f"k12vista-v{release.version}-hf.zip"
    zip_folder(folder, out)
    return out, total


def write_all(release: Release, progress: Callable[[int], None] | None = None) -> list[ReleaseFile]:
    """Writes the three forms; ``progress(done)`` counts questions over all forms / 3."""
    base = release_dir(release)
    base.mkdir(parents=True, exist_ok=True)
    questions = Question.objects.in_release(release).order_by("id")
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress and done % 300 == 0:
            progress(done // 3)

    files = []
    forms = ((ReleaseFile.Form.REFERENCE, "reference", f"k12vista-v{release.version}.jsonl"),
             (ReleaseFile.Form.STUDIO, "studio", f"k12vista-v{release.version}-studio.zip"))  # fmt: skip
    for form, fmt, name in forms:
        partial = base / f"{name}.partial"
        try:
            with open(partial, "wb") as out:
                write = export.write_reference if fmt == "reference" else export.write_studio
                count = write(questions, out, tick)
            os.replace(partial, base / name)
        finally:
            partial.unlink(missing_ok=True)
        files.append(record(release, form, base / name, count))
    path, count = write_huggingface(release, tick)
    files.append(record(release, ReleaseFile.Form.HUGGINGFACE, path, count))
    return files
