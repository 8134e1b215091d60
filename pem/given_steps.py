"""PEBench as the paper measures it (K12_PEMBench/code/infer.py), beside the studio's aligned mode.

The studio's mode (pem.chains.labels_from_scoring_run) lets the judge split a
response itself and aligns its steps onto the gold ones. The paper's mode hands
the judge the gold step list with the reference's PEBench prompt (registered
from a checkout: PromptTemplate kind judge_given_steps), requires one label per
given step, and compares labels by position: accuracy per gold label and the
micro average over all steps (Table 9's "Overall"). Items whose reply never
reads are left out, as the reference leaves them out of its result file; the
job reports how many.

The labels are stored as MODEL labels of the rater "<judge> · PEBench given
steps" on the chain's own steps, so the agreement page lists this judge beside
the aligned ones; ``positional_accuracy`` is the reference's metric itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils.translation import gettext

from inference import calls, client
from inference.models import ModelEndpoint, PromptTemplate
from inference.parsing import reference as reference_reader
from inference.reference import judging as reference_judging
from inference.reference import prompts as reference_prompts
from inference.reference import register as reference_register
from inference.services import ALLOWED_PARAMS, require_api_key
from k12vista import job_text
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.models import Job
from k12vista.vocabulary import LABELS_BY_CODE, STEP_LABELS
from pem.job_shapes import GivenStepsParams, GivenStepsResult
from pem.models import ChainOfThought, Step, StepLabel

JOB_KIND = "pem.pebench_given_steps"
RATER_SUFFIX = " · PEBench given steps"
# The names in the order of the reference's metric file: "all", then the nine.
NAMES = [label.chinese for label in STEP_LABELS]
CODE_OF = {label.chinese: label.code for label in STEP_LABELS}
# The reference's PEBench client asks up to 100 times (and, as published, never reads a reply:
# its step_check lacks self); the studio asks as many times as its reference judge, 10.
TRIES = reference_judging.JUDGE_TRIES


class GivenStepsError(ValueError):
    """A PEBench run in the paper's mode that cannot start; the message says why."""


def rater_for(judge: ModelEndpoint) -> str:
    return f"{judge.name}{RATER_SUFFIX}"


def positional_accuracy(items: Iterable[tuple[Sequence[str], Sequence[str]]]) -> dict[str, dict[str, Any]]:
    """The reference's PEBench metric: for each item (predicted labels, gold labels), labels
    compared by position (zip: the shorter list decides), counted per gold label and over all.
    Each entry: correct, count, accuracy (None for an empty count; the reference writes 0) and
    ``rounded`` as the reference writes it (4 places, 0 when empty)."""
    counts = {name: [0, 0] for name in ["all", *NAMES]}
    for predicted, gold in items:
        for mine, theirs in zip(predicted, gold, strict=False):
            right = int(mine == theirs)
            for key in ("all", theirs):
                counts.setdefault(key, [0, 0])
                counts[key][0] += right
                counts[key][1] += 1
    return {
        name: {
            "correct": right, "count": count, "accuracy": right / count if count else None,
            "rounded": round(right / count, 4) if count else 0,
        }
        for name, (right, count) in counts.items()
    }  # fmt: skip


def pebench_chains():
    """PEBench's chains whose every step has a gold label, in id order."""
    return ChainOfThought.objects.in_pebench().with_gold().order_by("id")


def _gold_names(cot: ChainOfThought) -> tuple[list[Step], list[str]] | None:
    steps = list(cot.steps.order_by("position"))
    gold = {
        label.step_id: label.label for label in StepLabel.objects.gold().filter(step__cot=cot).order_by("created", "pk")
    }  # the newest gold label of a step wins
    if not steps or any(step.pk not in gold for step in steps):
        return None
    return steps, [LABELS_BY_CODE[gold[step.pk]].chinese for step in steps]


def report(rater: str) -> dict[str, Any]:
    """The positional metric of one rater's labels against gold, over the PEBench chains it labelled."""
    pairs = []
    labelled = StepLabel.objects.filter(source=StepLabel.Source.MODEL, rater=rater).values("step__cot_id")
    for cot in pebench_chains().filter(pk__in=labelled):
        found = _gold_names(cot)
        if found is None:
            continue
        steps, gold = found
        mine = dict(
            StepLabel.objects.filter(step__cot=cot, source=StepLabel.Source.MODEL, rater=rater).values_list(
                "step_id", "label"
            )
        )
        names = [LABELS_BY_CODE[mine[s.pk]].chinese if mine.get(s.pk) in LABELS_BY_CODE else "" for s in steps]
        pairs.append((names, gold))
    return {"rater": rater, "items": len(pairs), "metric": positional_accuracy(pairs)}


def stored_reports() -> list[dict[str, Any]]:
    """The newest finished report of each judge run in this mode (its job's result), newest first:
    what the agreement page shows without computing anything. ``labels`` holds the nine in the
    reference's order, each with its name, code and entry."""
    found: dict[str, dict[str, Any]] = {}
    finished = Job.objects.filter(kind=JOB_KIND, status=Job.Status.SUCCEEDED).order_by("-finished_at", "-id")
    for job in finished.only("id", "params", "result", "finished_at")[:500]:
        stored, rater = job.result.get("report"), job.params.get("rater")
        if not stored or rater in found:
            continue
        metric = stored["metric"]
        labels = [{"name": name, "code": CODE_OF[name], **metric[name]} for name in NAMES if name in metric]
        found[rater] = {"rater": rater, "items": stored["items"], "overall": metric["all"], "labels": labels,
                        "computed": job.finished_at, "job": job.pk}  # fmt: skip
    return list(found.values())


def start(*, judge: ModelEndpoint, user: Any, prompt_set: str = "") -> Job:
    """Starts the paper's PEBench mode for one judge: the registered reference PEBench prompt."""
    if not judge.active:
        raise GivenStepsError(gettext("endpoint %(name)s is switched off") % {"name": judge})
    if judge.kind != ModelEndpoint.Kind.OPENAI:
        raise GivenStepsError(gettext("only an OpenAI-compatible endpoint can judge PEBench in the paper's mode"))
    require_api_key(judge)
    try:
        template = reference_register.reference_prompt(PromptTemplate.Kind.JUDGE_GIVEN_STEPS, prompt_set=prompt_set)
    except LookupError as exc:
        raise GivenStepsError(str(exc)) from None
    params = {"judge_id": judge.pk, "prompt_id": template.pk, "rater": rater_for(judge)}
    return start_job(kind=JOB_KIND, user=user, params=params,
                     title=job_text.title("given_steps", judge=judge.name))  # fmt: skip


def messages_for(cot: ChainOfThought, steps: list[Step], template: PromptTemplate, *, images: bool) -> list[dict]:
    """The reference's prompt_dict['step_by_step_infer'].format(...) with the gold step list as the
    student's steps, in the reference's one user message (figure first, as its PEBench client sends it)."""
    text = reference_prompts.render(
        template.user_template, question=cot.question_text, solution=cot.reference_solution,
        answer=[line for line in cot.reference_answer.splitlines() if line.strip()],
        student_answer=[step.text for step in steps],
    )  # fmt: skip
    image = None
    if images and cot.question is not None:
        figure = cot.question.figures.first()
        if figure is not None:
            record = reference_judging.judge_record(cot.question)
            image = client.stored_image_url(record["img"]) if record.get("img") else None
    if image is None:
        return client.reference_messages(text, None)
    return [{"role": "user", "content": [image, {"type": "text", "text": text.replace(client.IMAGE_MARK, "")}]}]


@job_handler(JOB_KIND, queue=Job.Queue.IO, params=GivenStepsParams, result=GivenStepsResult)
def run_given_steps_job(job: Job, progress: Progress) -> dict:
    """Asks the judge for every PEBench chain it has not labelled yet (a rerun resumes), at most
    TRIES times each until the reply reads, and stores its labels; returns the counts and the metric."""
    judge = ModelEndpoint.objects.get(pk=job.params["judge_id"])
    template = PromptTemplate.objects.get(pk=job.params["prompt_id"])
    rater = job.params["rater"]
    done_ids = set(
        StepLabel.objects.filter(source=StepLabel.Source.MODEL, rater=rater).values_list("step__cot_id", flat=True)
    )
    work = []
    for cot in pebench_chains().select_related("question").exclude(pk__in=done_ids):
        found = _gold_names(cot)
        if found is not None:
            work.append((cot, found[0], messages_for(cot, found[0], template, images=judge.accepts_images)))
    counts = {"asked": len(work), "read": 0, "not_read": 0, "call_failed": 0}
    params = {k: v for k, v in judge.default_params.items() if k in ALLOWED_PARAMS}

    async def ask_all() -> None:
        caller = calls.Caller(judge)

        async def one(entry):
            cot, steps, messages = entry
            for _ in range(TRIES):
                try:
                    completion = await caller.complete(messages, params)
                except client.ModelCallError:
                    counts["call_failed"] += 1
                    return None
                result = reference_reader.read_given_steps(completion.text, len(steps))
                if result.usable:
                    counts["read"] += 1
                    return steps, result.value["labels"], completion.text
            counts["not_read"] += 1
            return None

        try:
            await calls.fan_out(work, one, concurrency=judge.call_limit, save=_saver(rater),
                                progress=progress, done=0, total=len(work))  # fmt: skip
        finally:
            await caller.close()

    async_to_sync(ask_all)()
    return counts | {"report": report(rater)}


def _saver(rater: str):
    @transaction.atomic
    def save(batch: list[tuple[list[Step], list[str], str]]) -> None:
        """One MODEL label per given step. A label outside the nine is stored with an empty code
        and the judge's text as the explanation: every statistic reads it as no label, which
        counts as wrong for that step, as the reference's comparison of names counts it."""
        rows = []
        for steps, labels, _text in batch:
            StepLabel.objects.filter(step__in=steps, source=StepLabel.Source.MODEL, rater=rater).delete()
            for step, label in zip(steps, labels, strict=False):
                code = CODE_OF.get(label, "")
                rows.append(StepLabel(step=step, source=StepLabel.Source.MODEL, rater=rater, label=code,
                                      explanation="" if code else f"given label: {label}"))  # fmt: skip
        StepLabel.objects.bulk_create(rows)

    return save
