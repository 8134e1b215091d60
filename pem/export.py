"""Exporting PEBench: one zip with both formats, the agreement report and the versions.

``pebench.zip`` holds

- ``pebench-reference.jsonl``: the reference PEBench format (PIPELINE.md), gold
  labels as ``step_labels`` with the nine Chinese label names the reference
  code counts by, and ``img`` (the question's figure as the reference release
  has it); only items whose every step has a gold label (the manifest lists
  the others);
- ``pebench.jsonl``: our format, every item, every label: each annotator's,
  each judge model's, panel votes, imports, and the gold label with who
  decided it;
- ``agreement.json``: ``pem.reports.agreement_report`` over the items;
- ``manifest.json``: counts, the taxonomy (codes, names, definitions) and its
  version, the guideline version, the versions the labels were made under,
  the builds that chose the items, and each file's SHA-256.

Both JSONL files import back with ``manage.py import_pebench``. Before anything
is written the items are checked once more against PEM training data: an item
used for training is never exported as benchmark data (docs/formats.md).
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from annotation.export import jpeg_base64, sha256_of
from annotation.models import Figure
from k12vista import guidelines
from k12vista.vocabulary import (
    QUESTION_TYPE_ZH,
    STAGE_LAST_GRADE,
    STEP_LABELS,
    TAXONOMY_VERSION,
    QuestionType,
    Stage,
    label_from_name,
)
from pem.models import ChainOfThought, PEBenchBuild, Step, StepLabel

CHUNK_SIZE = 200
PROGRESS_EVERY = 50
LISTED_KEYS = 100  # keys named in an error or the manifest; counts are always exact


class ExportError(ValueError):
    """The export cannot be made; the message says why."""


def pebench_chains(build: PEBenchBuild | None = None) -> QuerySet[ChainOfThought]:
    chains = ChainOfThought.objects.in_pebench()
    if build is not None:
        chains = chains.filter(pebench_item__build=build)
    return chains.order_by("id")


def check_not_training_data(chains: QuerySet[ChainOfThought]) -> None:
    """Refuses the export when any item was used as PEM training data, naming them."""
    offending = chains.filter(in_training_data=True)
    count = offending.count()
    if count:
        keys = list(offending.values_list("key", flat=True)[:LISTED_KEYS])
        more = f" and {count - len(keys)} more" if count > len(keys) else ""
        raise ExportError(
            f"{count} PEBench item(s) are marked as PEM training data and cannot be exported as benchmark data: "
            f"{', '.join(keys)}{more}. Take them out of PEBench first."
        )


# --- records ------------------------------------------------------------------------


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def _gold(step: Step) -> StepLabel | None:
    golds = [label for label in step.labels.all() if label.source == StepLabel.Source.GOLD]
    return max(golds, key=lambda label: (label.created, label.pk)) if golds else None


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def chinese_label(code: str) -> str:
    try:
        return label_from_name(code).chinese
    except ValueError:  # not one of the nine (written around the model's choices): kept as it is
        return code


def figure_base64(cot: ChainOfThought) -> str:
    """The bank question's first figure as the reference release's ``img`` (stored JPEG bytes
    unchanged); "" for a chain with no question in the bank or a question without a figure."""
    if cot.question is None:
        return ""
    figures = [f for f in cot.question.figures.all() if f.kind == Figure.Kind.FIGURE]
    return jpeg_base64(min(figures, key=lambda f: (f.position, f.pk))) if figures else ""


def question_hash_id(cot: ChainOfThought) -> str:
    return cot.question.hash_id if cot.question is not None else cot.key


def reference_record(cot: ChainOfThought) -> dict | None:
    """The reference format with gold labels; None when some step has no gold label yet."""
    steps = list(cot.steps.all())
    golds = [gold for step in steps if (gold := _gold(step)) is not None]
    if not steps or len(golds) < len(steps):  # some step has no gold label yet
        return None
    record: dict[str, Any] = {
        "hash_id": question_hash_id(cot),
        "question": cot.question_text,
        "format_solution": cot.reference_solution,
        "ground_truth": _lines(cot.reference_answer),
        "student_infer": cot.response_text,
        # The reference's PEBench code counts by the Chinese names; a code there is a KeyError.
        "step_labels": [
            [step.text, chinese_label(gold.label), gold.explanation] for step, gold in zip(steps, golds, strict=True)
        ],  # fmt: skip
        "img": figure_base64(cot),
    }
    # Beyond the reference keys (readers ignore them): what a re-import needs to find the item again.
    if record["hash_id"] != cot.key:
        record["key"] = cot.key
    if cot.subject and cot.stage:
        record["subject"] = f"{cot.subject}-g{STAGE_LAST_GRADE[Stage(cot.stage)]}"
    if cot.qtype:
        record["type"] = QUESTION_TYPE_ZH[QuestionType(cot.qtype)]
    if cot.model_name:
        record["model"] = cot.model_name
    return record


def label_record(label: StepLabel) -> dict:
    return {
        "source": label.source,
        "rater": label.rater,
        "user": label.user.get_username() if label.user else None,
        "label": label.label,
        "explanation": label.explanation,
        "taxonomy_version": label.taxonomy_version,
        "guideline_version": label.guideline_version,
        "active_seconds": label.active_seconds,
        "scoring_run": label.scoring_run_id,
        "created": _iso(label.created),
    }


def studio_record(cot: ChainOfThought) -> dict:
    steps = []
    for step in cot.steps.all():
        gold = _gold(step)
        steps.append(
            {
                "position": step.position,
                "text": step.text,
                "label": gold.label if gold else None,
                "explanation": gold.explanation if gold else "",
                "gold": label_record(gold) if gold else None,
                "labels": [label_record(label) for label in step.labels.all() if label.source != StepLabel.Source.GOLD],
            }
        )
    adjudication = getattr(cot, "adjudication", None)
    return {
        "key": cot.key,
        "hash_id": question_hash_id(cot),
        "origin": cot.origin,
        "model": cot.model_name,
        "subject": cot.subject or None,
        "grade": cot.grade,
        "stage": cot.stage or None,
        "type": cot.qtype or None,
        "question_text": cot.question_text,
        "reference_solution": cot.reference_solution,
        "reference_answer": _lines(cot.reference_answer),
        "response": cot.response_text,
        "step_source": cot.step_source,
        "status": cot.status,
        "in_training_data": cot.in_training_data,
        "pebench_build": cot.pebench_item.build_id,
        "adjudication": {
            "decided_by": adjudication.decided_by.get_username() if adjudication.decided_by else None,
            "decided": _iso(adjudication.decided),
            "note": adjudication.note,
            "guideline_version": adjudication.guideline_version,
            "active_seconds": adjudication.active_seconds,
        }
        if adjudication is not None
        else None,
        "steps": steps,
    }


def json_line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# --- writing ------------------------------------------------------------------------


def streamed(chains: QuerySet[ChainOfThought]):
    labels = StepLabel.objects.select_related("user").order_by("source", "rater")
    steps = Step.objects.order_by("position").prefetch_related(Prefetch("labels", queryset=labels))
    return (
        chains.select_related("question", "pebench_item", "adjudication__decided_by")
        .prefetch_related(Prefetch("steps", queryset=steps), "question__figures")
        .iterator(chunk_size=CHUNK_SIZE)
    )


def _agreement(chains: QuerySet[ChainOfThought]) -> Any:
    # Imported here: the report module belongs to the agreement screens and is heavy (numpy).
    from pem.reports import agreement_report

    return agreement_report(chains)


def manifest(chains: QuerySet[ChainOfThought], counts: dict, files: dict[str, str]) -> dict:
    labels = StepLabel.objects.filter(step__cot__in=chains)
    builds = PEBenchBuild.objects.filter(items__cot__in=chains).distinct().order_by("id")
    return {
        "format": "k12vista-pebench",
        "format_version": 1,
        "created": _iso(timezone.now()),
        **counts,
        "taxonomy_version": TAXONOMY_VERSION,
        "taxonomy": [
            {
                "code": label.code,
                "english": label.english,
                "chinese": label.chinese,
                "definition": label.definition,
                "definition_zh": label.definition_zh,
            }
            for label in STEP_LABELS
        ],  # fmt: skip
        "guideline_version": guidelines.current_version_name(guidelines.Kind.STEP_LABELS),
        "taxonomy_versions_used": sorted(set(labels.values_list("taxonomy_version", flat=True))),
        "guideline_versions_used": sorted(
            set(labels.exclude(guideline_version="").values_list("guideline_version", flat=True))
        ),  # fmt: skip
        "builds": [
            {
                "id": b.pk,
                "seed": b.seed,
                "target_size": b.target_size,
                "min_steps": b.min_steps,
                "strata": b.strata,
                "counts": b.counts,
                "created": _iso(b.created),
            }
            for b in builds
        ],  # fmt: skip
        "files": files,
    }


def export_pebench(
    *, out_path: str | Path, build: PEBenchBuild | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> dict:  # fmt: skip
    """Writes the zip described above to ``out_path``; returns {path, sha256, count, bytes, ...}.

    Written under a temporary name and renamed, so a crashed or repeated job
    never leaves half a file under the final name.
    """
    chains = pebench_chains(build)
    check_not_training_data(chains)
    total = chains.count()
    if not total:
        raise ExportError("PEBench has no items to export yet; build it first.")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if progress:
        progress(0, total)
    without_gold: list[str] = []
    counts = {"items": 0, "reference_items": 0, "items_without_gold": 0}
    files: dict[str, str] = {}
    partial = out_path.with_name(out_path.name + ".partial")
    try:
        with (
            tempfile.TemporaryDirectory() as scratch,
            zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        ):
            ours, reference = Path(scratch) / "pebench.jsonl", Path(scratch) / "pebench-reference.jsonl"
            with open(ours, "wb") as ours_out, open(reference, "wb") as reference_out:
                for cot in streamed(chains):
                    ours_out.write(json_line(studio_record(cot)))
                    record = reference_record(cot)
                    if record is None:
                        counts["items_without_gold"] += 1
                        if len(without_gold) < LISTED_KEYS:
                            without_gold.append(cot.key)
                    else:
                        reference_out.write(json_line(record))
                        counts["reference_items"] += 1
                    counts["items"] += 1
                    if progress and counts["items"] % PROGRESS_EVERY == 0:
                        progress(counts["items"], total)
            agreement = Path(scratch) / "agreement.json"
            agreement.write_text(json.dumps(_agreement(chains), ensure_ascii=False, indent=2, default=str))
            for path in (reference, ours, agreement):
                files[path.name] = sha256_of(path)
                archive.write(path, path.name)
            counts["items_without_gold_listed"] = without_gold  # type: ignore[assignment]
            archive.writestr("manifest.json", json.dumps(manifest(chains, counts, files), ensure_ascii=False, indent=2))
        # Checked again after writing: an item flagged for training meanwhile must not leave.
        check_not_training_data(chains)
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    if progress:
        progress(total, total)
    return {
        "path": str(out_path), "sha256": sha256_of(out_path), "count": counts["items"],
        "reference_items": counts["reference_items"], "items_without_gold": counts["items_without_gold"],
        "bytes": out_path.stat().st_size,
    }  # fmt: skip


def export_file_name(job_pk: int) -> str:
    # Named by the job, so a second delivery of the same job rewrites the same file.
    return f"exports/pebench-{job_pk}.zip"
