"""A scoring run's answers and judgments in the reference code's result layout, so a lab can run
the reference's own aggregation (``evalaute.py``) on the studio's results (docs/formats.md).

One zip: ``{mode}_infer/{model}_infer.jsonl`` (each answered question: the reference record of
the question, ``prompt2infer`` for a run of the reference protocol, and ``infer_result`` =
{``{model}_response``, ``infer_model``}) and ``{mode}_eval/{model}_eval.jsonl`` (the same plus
``judgement_result`` = {``{model}_judged_response`` (the judge's list: extracted reference answers,
the model's answers and 0/1 marks in direct mode; ``[step, 中文标签, 解释]`` per step otherwise),
``{model}_judged_score``, ``judgement_model``, ``infer_model``}), ``mode`` being ``directly`` or
``step_by_step`` as the reference names them.

As the reference writes them: an answer the model did not give is not in the infer file, and a
judgment whose reply was not read (score None) is not in the eval file; the reference's aggregation
then counts what the studio's reference table counts. Questions of a subject-stage tag outside the
reference's eleven are left out of the eval file (its aggregation fails on them). Subject and
type are the bank's now, as the table's are the bank's when the judge scored: the two agree while
the bank has not changed since.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Prefetch

from annotation import export
from inference.job_shapes import ReferenceResultsParams, ReferenceResultsResult
from inference.models import InferenceRun, JudgedStep, Judgment, Protocol, Response, ScoringRun
from inference.reference import messages
from k12vista.jobs import Progress, job_handler
from k12vista.models import Job
from k12vista.vocabulary import RELEASE_TAGS, STEP_LABELS

MODE_DIR = {InferenceRun.Mode.DIRECT: "directly", InferenceRun.Mode.STEP_BY_STEP: "step_by_step"}
CHINESE = {label.code: label.chinese for label in STEP_LABELS}
CHUNK = 500
KIND = "inference.export_reference_results"


def model_key(run: InferenceRun) -> str:
    """The name the reference files are keyed by (its ``infer_model``): the served model's name,
    safe as a file name."""
    key = re.sub(r"[^0-9A-Za-z_.-]+", "_", run.endpoint.model_name or run.endpoint.name).strip("._")
    return key or f"run{run.pk}"


def question_record(response: Response) -> dict[str, Any]:
    """The reference record of the question, without the studio's extra keys."""
    record = export.reference_record(response.question)
    return {key: record[key] for key in ("hash_id", "question", "type", "subject", "img", "format_answer")}


def infer_record(run: InferenceRun, response: Response, model: str) -> dict[str, Any]:
    record = question_record(response)
    if run.protocol == Protocol.REFERENCE:
        record["prompt2infer"] = messages.answer_prompt(_prompt(run, response.question.qtype), response.question)
    record["infer_result"] = {f"{model}_response": response.raw_output, "infer_model": model}
    return record


def _prompt(run: InferenceRun, qtype: str) -> Any:
    from inference.services import prompt_of  # services builds on this package

    return prompt_of(run, qtype)


def judged_list(judgment: Judgment) -> Any:
    """The judge's reply as the reference keeps it: its list."""
    if isinstance(judgment.parsed, list):
        return judgment.parsed  # a reply read the reference's way is that list already
    if judgment.scoring_run.method == ScoringRun.Method.JUDGE_DIRECT:
        return [judgment.reference_answers, judgment.model_answers, judgment.item_scores]
    return [[step.text, CHINESE.get(step.label, step.label), step.reason] for step in judgment.steps.all()]


def eval_record(run: InferenceRun, judgment: Judgment, model: str) -> dict[str, Any]:
    record = infer_record(run, judgment.response, model)
    record["judgement_result"] = {
        f"{model}_judged_response": judged_list(judgment),
        f"{model}_judged_score": judgment.score,
        "judgement_model": judgment.scoring_run.judge.model_name or judgment.scoring_run.judge.name,
        "infer_model": model,
    }
    return record


def answered(run: InferenceRun) -> Iterator[Response]:
    rows = run.responses.filter(status=Response.Status.OK).exclude(raw_output="")
    return rows.select_related("question").prefetch_related("question__figures").order_by("id").iterator(CHUNK)


def scored(scoring_run: ScoringRun) -> Iterator[Judgment]:
    rows = scoring_run.judgments.filter(status=Judgment.Status.OK, score__isnull=False)
    return (
        rows.select_related("response__question", "scoring_run__judge")
        .prefetch_related("response__question__figures", Prefetch("steps", JudgedStep.objects.order_by("position")))
        .order_by("id")
        .iterator(CHUNK)
    )


def write_results(scoring_run: ScoringRun, out_path: Path, tick: Callable[[], None] = lambda: None) -> dict:
    """Writes the zip; returns what it holds."""
    run = scoring_run.inference_run
    model, mode = model_key(run), MODE_DIR[InferenceRun.Mode(run.mode)]
    counts = {"infer": 0, "eval": 0, "outside_tags": 0}
    partial = out_path.with_name(out_path.name + ".partial")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            infer, evals = Path(scratch) / "infer.jsonl", Path(scratch) / "eval.jsonl"
            with open(infer, "wb") as out:
                for response in answered(run):
                    out.write(export.json_line(infer_record(run, response, model)))
                    counts["infer"] += 1
                    tick()
            with open(evals, "wb") as out:
                for judgment in scored(scoring_run):
                    record = eval_record(run, judgment, model)
                    if record["subject"] not in RELEASE_TAGS:
                        counts["outside_tags"] += 1
                        continue
                    out.write(export.json_line(record))
                    counts["eval"] += 1
                    tick()
            archive.write(infer, f"{mode}_infer/{model}_infer.jsonl")
            archive.write(evals, f"{mode}_eval/{model}_eval.jsonl")
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    return {"model": model, "mode": mode, **counts}


def export_file_name(job_pk: int) -> str:
    return f"exports/reference-results-{job_pk}.zip"


@job_handler(KIND, queue=Job.Queue.CPU, params=ReferenceResultsParams, result=ReferenceResultsResult)
def export_results_job(job: Job, progress: Progress) -> dict:
    scoring_run = ScoringRun.objects.select_related("inference_run__endpoint", "judge").get(
        pk=job.params["scoring_run_id"]
    )
    total = scoring_run.inference_run.responses.count() + scoring_run.judgments.count()
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if done % 200 == 0:
            progress(done, total)

    name = export_file_name(job.pk)
    found = write_results(scoring_run, Path(settings.MEDIA_ROOT) / name, tick)
    return {**found, "path": name}
