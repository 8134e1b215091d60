"""Chains of thought made by the studio's own runs.

**Inference runs** (``cots_from_run``): every answered response becomes a
chain keyed ``<question hash_id>:<run id>``, split by ``split_response``.

**Scoring runs** (``labels_from_scoring_run``): each judgment's own steps are
aligned onto the chain's steps by content (pem.alignment) and stored as
``StepLabel(source=MODEL, rater=<judge endpoint>)`` with an ``Alignment`` row.

Both are idempotent, so a job run again after a crash changes nothing the
first run already did.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_noop

from annotation.record_fields import split_steps
from inference.default_prompts import FINAL_ANSWER_PREFIX
from inference.models import InferenceRun, Judgment, Response, ScoringRun
from inference.parsing import answer_after_reasoning
from k12vista.line_reasons import reason as refusal
from k12vista.line_reasons import reason_templates
from k12vista.reports import REPORT_LIMIT
from k12vista.vocabulary import TAXONOMY_VERSION
from pem.alignment import align
from pem.models import Alignment, ChainOfThought, StepLabel
from pem.services import (
    PROGRESS_EVERY,
    SNAPSHOT_FIELDS,
    ChainData,
    PEBenchError,
    has_person_work,
    question_text_of,
    reference_solution_of,
    replace_steps,
)

# Why chains or labels cannot be made from a run: said before a job starts, and by the job itself (a run
# changed meanwhile), so kept as codes (k12vista.line_reasons) and worded in each reader's language.
reason_templates({
    "chains_no_answers": gettext_noop("%(run)s has no answers to make chains of: none of its questions was answered"),
    "labels_final_answers_only": gettext_noop(
        "%(run)s judged final answers only; step labels need a step-by-step scoring run"
    ),
    "labels_no_judgments": gettext_noop("%(run)s has no judgments to take labels from: none of its answers was judged"),
    "labels_no_chains": gettext_noop(
        "the answers %(run)s judged have no chains of thought yet: make chains from the run %(of)s first"
    ),
})  # fmt: skip

FINAL_ANSWER = re.compile(r"^\s*(?:" + re.escape(FINAL_ANSWER_PREFIX) + r"|最终答案[:：]|答案[:：])")
BLANK_LINES = re.compile(r"\n\s*\n")


def split_response(text: str) -> list[str]:
    """A model's answer as ordered steps, by rule (no model call):

    1. Reasoning before the last ``</think>`` is dropped: it is not the answer.
    2. Numbered steps (``步骤1：``, ``第1步``, ``1.``; the answer prompt asks for
       ``步骤N：``) are the steps; unnumbered lines continue the step before,
       except a final-answer line (``最终答案：``), which is a step of its own
       (an incomplete answer, IAE, is judged there).
    3. Otherwise paragraphs (blank-line separated) are the steps; a single
       paragraph is split into its lines.
    Step text is kept verbatim apart from the numbering.
    """
    text = answer_after_reasoning(text)
    if not text:
        return []
    lines = text.splitlines()
    final_at = next((i for i in range(len(lines) - 1, -1, -1) if FINAL_ANSWER.match(lines[i])), None)
    body, final = (lines[:final_at], lines[final_at:]) if final_at is not None else (lines, [])
    steps = split_steps("\n".join(body))
    if not steps:
        joined = "\n".join(body).strip()
        paragraphs = [p.strip() for p in BLANK_LINES.split(joined) if p.strip()]
        steps = paragraphs if len(paragraphs) > 1 else [line.strip() for line in body if line.strip()]
    if final:
        steps.append("\n".join(line.strip() for line in final if line.strip()))
    return steps


def answered(inference_runs) -> QuerySet[Response]:
    """The responses chains are made of (cots_from_run): answered, with text."""
    return Response.objects.filter(run__in=inference_runs, status=Response.Status.OK).exclude(raw_output="")


def without_answers(inference_runs: Sequence[InferenceRun]) -> list[InferenceRun]:
    """The runs with no answer to make a chain of: chains, a split or labels over them would
    "succeed" having done nothing (issue 29), so they are refused before a job starts."""
    found = set(answered(inference_runs).values_list("run_id", flat=True).distinct())
    return [run for run in inference_runs if run.pk not in found]


def check_can_make_chains(inference_run: InferenceRun) -> None:
    """PEBenchError when the run has no answer to make a chain of (issue 29): refused before a job."""
    if without_answers([inference_run]):
        raise PEBenchError(refusal("chains_no_answers", run=str(inference_run)))


def check_can_label(scoring_run: ScoringRun) -> None:
    """PEBenchError when labels from the scoring run would label nothing (issue 29): it has no
    judgment the judge's output was read for, or none of those is of an answer with a chain yet."""
    if scoring_run.method != ScoringRun.Method.JUDGE_STEPS:
        raise PEBenchError(refusal("labels_final_answers_only", run=str(scoring_run)))
    judged = scoring_run.judgments.filter(status=Judgment.Status.OK)
    if not judged.exists():
        raise PEBenchError(refusal("labels_no_judgments", run=str(scoring_run)))
    if not judged.filter(response__chain_of_thought__isnull=False).exists():
        raise PEBenchError(refusal("labels_no_chains", run=str(scoring_run), of=str(scoring_run.inference_run)))


def cot_key_for(response: Response) -> str:
    return f"{response.question.hash_id}:{response.run_id}"


def _chain_from_response(response: Response, run: InferenceRun) -> ChainData:
    question = response.question
    data = ChainData(
        key=cot_key_for(response),
        question_hash_id=question.hash_id,
        question_text=question_text_of(question),
        reference_solution=reference_solution_of(question),
        reference_answer="\n".join(question.answers),
        response_text=response.raw_output,
        model_name=run.endpoint.name,
        subject=question.subject,
        grade=question.grade,
        stage=question.stage,
        qtype=question.qtype,
        step_source=ChainOfThought.StepSource.RULE,  # split by the rule until a splitting run says otherwise
        steps=split_response(response.raw_output),
    )
    data.question = question
    return data


@transaction.atomic
def _save_response_chain(response: Response, run: InferenceRun) -> str:
    data = _chain_from_response(response, run)
    if not data.steps:
        return "no_steps"
    cot = ChainOfThought.objects.select_for_update().filter(Q(response=response) | Q(key=data.key)).first()
    if cot is None:
        cot = ChainOfThought(key=data.key, origin=ChainOfThought.Origin.INFERENCE, question=response.question,
                             response=response)  # fmt: skip
    elif cot.response_text == data.response_text and cot.response_id == response.pk:
        return "unchanged"
    elif has_person_work(cot):
        return "conflict"
    created = cot.pk is None
    for name in SNAPSHOT_FIELDS:
        setattr(cot, name, getattr(data, name))
    cot.response = response
    cot.splitter, cot.split_run = "rule", None  # a new answer is split by rule until a splitting run says otherwise
    cot.save()
    replace_steps(cot, data.steps, new=created)
    return "created" if created else "updated"


def cots_from_run(*, inference_run: InferenceRun, progress: Callable[[int, int | None], None] | None = None) -> dict:
    """One chain of thought per answered response of the run (see split_response).

    Responses that failed or said nothing are counted, not turned into chains.
    A response answered again since (a retry) replaces its chain's steps while
    no person has labelled them; after that it is a conflict and left alone.
    """
    responses = Response.objects.filter(run=inference_run).select_related("question").order_by("id")
    counts: Counter[str] = Counter()
    conflicts: list[str] = []
    total = responses.count()
    if progress:
        progress(0, total)
    for done, response in enumerate(responses.iterator(chunk_size=500), start=1):
        if response.status != Response.Status.OK or not response.raw_output.strip():
            outcome = "not_answered"
        else:
            outcome = _save_response_chain(response, inference_run)
        counts[outcome] += 1
        if outcome == "conflict" and len(conflicts) < REPORT_LIMIT:
            conflicts.append(cot_key_for(response))
        if progress and done % PROGRESS_EVERY == 0:
            progress(done, total)
    if progress:
        progress(total, total)
    outcomes = ("created", "unchanged", "updated", "conflict", "no_steps", "not_answered")
    return {**{name: counts[name] for name in outcomes}, "responses": total, "conflict_keys": conflicts}


# --- judge models' labels from a scoring run ------------------------------------------------


@transaction.atomic
def _label_from_judgment(judgment: Judgment, cot: ChainOfThought, scoring_run: ScoringRun) -> dict:
    gold = list(cot.steps.order_by("position"))
    judged = list(judgment.steps.order_by("position"))
    alignment = align([s.text for s in gold], [s.text for s in judged])
    rater = scoring_run.judge.name[:200]
    labels = alignment.labels_for_gold([s.label for s in judged])
    reasons = alignment.labels_for_gold([s.reason for s in judged])
    kept = []
    for step, label, reason in zip(gold, labels, reasons, strict=True):
        if label is None:
            continue
        StepLabel.objects.update_or_create(
            step=step, source=StepLabel.Source.MODEL, rater=rater,
            defaults={"label": label, "explanation": reason or "", "scoring_run": scoring_run,
                      "taxonomy_version": TAXONOMY_VERSION},
        )  # fmt: skip
        kept.append(step.pk)
    # A step this judge no longer covers keeps no label from an earlier alignment.
    StepLabel.objects.filter(step__cot=cot, source=StepLabel.Source.MODEL, rater=rater).exclude(step__in=kept).delete()
    Alignment.objects.update_or_create(
        cot=cot, scoring_run=scoring_run,
        defaults={"gold_steps": len(gold), "judge_steps": len(judged), "pairs": alignment.as_pairs()},
    )  # fmt: skip
    return {
        "kind": alignment.kind,
        "same_count": alignment.same_count,
        "unlabelled": sum(label is None for label in labels),
        "extra": len(alignment.unmatched_judge),
    }


def labels_from_scoring_run(
    *, scoring_run: ScoringRun, progress: Callable[[int, int | None], None] | None = None
) -> dict:
    """Each judgment's labels, aligned onto its chain's steps, as MODEL labels of the judge.

    The report says how many chains the judge split differently (different
    step counts), how each was aligned (identical, realigned, partial), how
    many gold steps got no judge label and how many judge steps matched no
    gold step: nothing is cut off silently. A second scoring run of the same
    judge over the same chains replaces its labels (one rater, one label).
    """
    if scoring_run.method != ScoringRun.Method.JUDGE_STEPS:
        raise PEBenchError(refusal("labels_final_answers_only", run=str(scoring_run)))
    judgments = (
        scoring_run.judgments.select_related("response__chain_of_thought")
        .filter(status=Judgment.Status.OK)
        .order_by("id")
    )
    report: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    different: list[dict] = []
    total = scoring_run.judgments.count()
    if progress:
        progress(0, total)
    for done, judgment in enumerate(judgments.iterator(chunk_size=200), start=1):
        cot = getattr(judgment.response, "chain_of_thought", None)
        if cot is None or not cot.steps.exists():
            report["no_chain_of_thought"] += 1
        elif not judgment.steps.exists():
            report["no_judged_steps"] += 1
        else:
            result = _label_from_judgment(judgment, cot, scoring_run)
            report["labelled"] += 1
            kinds[result["kind"]] += 1
            report["unlabelled_gold_steps"] += result["unlabelled"]
            report["unmatched_judge_steps"] += result["extra"]
            if not result["same_count"]:
                report["different_step_counts"] += 1
                if len(different) < REPORT_LIMIT:
                    different.append({"key": cot.key, "kind": result["kind"]})
        if progress and done % PROGRESS_EVERY == 0:
            progress(done, total)
    report["not_scored"] = total - scoring_run.judgments.filter(status=Judgment.Status.OK).count()
    if progress:
        progress(total, total)
    names = ("labelled", "no_chain_of_thought", "no_judged_steps", "not_scored", "different_step_counts",
             "unlabelled_gold_steps", "unmatched_judge_steps")  # fmt: skip
    return {**{name: report[name] for name in names}, "alignment": dict(kinds), "different": different,
            "judge": scoring_run.judge.name}  # fmt: skip
