"""Step splitting by a model (PIPELINE.md stage 7).

A splitting run sends each chain of some inference runs to a splitting model
with the ``split_steps`` prompt and structured output (``step_split``), reads
the answer with ``parsing.parse_step_split`` and keeps the model's steps only
when they reproduce the chain's text: every step, whitespace aside, is found
in the answer in order, and together they cover at least
``SPLIT_MIN_COVERAGE`` of it (the prompt lets the model drop pleasantries,
nothing more). Otherwise the rule-based split (``chains.split_response``)
stays, and the fallback is recorded with its reason (``SplitResult``). The
chain says which splitter produced its steps (``ChainOfThought.splitter``).

Chains a person has labelled keep their steps (CONFLICT): new steps would
throw their labels away. A model split equal to the steps already there
changes nothing, so labels on them survive a second run.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext

from inference import calls, client, default_prompts, parsing, prompts
from inference.models import InferenceRun, ModelEndpoint, PromptTemplate
from inference.services import ALLOWED_PARAMS, EndpointError, create_missing_rows, require_api_key
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.models import Job
from pem import chains, services
from pem.job_shapes import SplitCounts, SplitParams
from pem.models import ChainOfThought, SplitResult, SplitRun

JOB_KIND = "pem.split"
SPLIT_MIN_COVERAGE = 0.9
Outcome = SplitResult.Outcome
SPACE = re.compile(r"\s+")


class SplitError(ValueError):
    """A splitting run that cannot start; the message says why."""


class NoAnswers(SplitError):
    """Runs with no answer to make a chain of: a split of them would split nothing (issue 29)."""


def model_splitter(endpoint: ModelEndpoint) -> str:
    return f"model:{endpoint.name}"[:200]


@transaction.atomic
def start_split_run(
    *, splitter: ModelEndpoint, inference_runs: list[InferenceRun], user: Any, params: dict | None = None,
    name: str = "", min_coverage: float = SPLIT_MIN_COVERAGE,
) -> SplitRun:  # fmt: skip
    """Freezes the prompt, schema and rule, and starts the splitting job on the io queue."""
    if not inference_runs:
        raise SplitError(gettext("choose the inference runs whose chains are to be split"))
    empty = chains.without_answers(inference_runs)
    if empty:
        raise NoAnswers(
            gettext("%(runs)s: no answers to split (none of the questions was answered); leave such runs out")
            % {"runs": ", ".join(str(run) for run in empty)}
        )
    if not splitter.active:
        raise EndpointError(gettext("endpoint %(name)s is switched off") % {"name": splitter})
    if splitter.kind != ModelEndpoint.Kind.OPENAI:
        raise EndpointError(
            gettext("%(kind)s endpoints cannot split yet; choose an HTTP one") % {"kind": splitter.get_kind_display()}
        )
    require_api_key(splitter)
    if not 0 < min_coverage <= 1:
        raise SplitError(gettext("the coverage a split must reach is a share between 0 and 1"))
    prompts.ensure_default_prompts()
    template = prompts.current(PromptTemplate.Kind.SPLIT_STEPS)
    unknown = default_prompts.placeholders(template) - {"question", "model_answer"}
    if unknown:
        raise SplitError(
            gettext("prompt %(prompt)s uses %(names)s, which a split cannot fill")
            % {"prompt": template, "names": ", ".join(sorted(unknown))}
        )
    schema = parsing.response_format("step_split")["json_schema"]["schema"]
    run = SplitRun.objects.create(
        name=name or f"{splitter.name} · split",
        splitter=splitter,
        params={**splitter.default_params, **(params or {})},
        created_by=user,
        provenance={
            "prompt": {"id": template.pk, "version": template.version, "hash": template.content_hash},
            "splitter": {"name": splitter.name, "base_url": splitter.base_url, "model_name": splitter.model_name},
            "response_format": {
                "json_schema": splitter.supports_json_schema,
                "schema_hash": hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest(),
            },
            "min_coverage": min_coverage,
            "parser": parsing.PARSER_VERSION,
        },
    )
    run.inference_runs.set(inference_runs)
    start_split_job(run, user=user)
    return run


def start_split_job(run: SplitRun, *, user: Any) -> Job:
    run.job = start_job(kind=JOB_KIND, user=user, params={"split_run_id": run.pk}, title=run.name)
    run.save(update_fields=["job"])
    return run.job


def counts(run: SplitRun) -> dict[str, int]:
    """Chains per outcome (one GROUP BY), and the total."""
    rows = dict(run.results.order_by().values_list("outcome").annotate(n=Count("id")))
    return {outcome.value: rows.get(outcome.value, 0) for outcome in Outcome} | {"total": sum(rows.values())}


# --- reading the model's split ------------------------------------------------------------


def answer_text(cot: ChainOfThought) -> str:
    """What is split: the answer after any reasoning, as split_response sees it."""
    return parsing.answer_after_reasoning(cot.response_text)


def check_reproduces(steps: list[str], text: str, *, min_coverage: float) -> str:
    """ "" when the steps reproduce the text, else why not."""
    body = SPACE.sub("", text)
    position, covered = 0, 0
    for number, step in enumerate(steps, 1):
        piece = SPACE.sub("", step)
        found = body.find(piece, position)
        if found < 0:
            return f"step {number} is not in the chain's text (in this order)"
        position, covered = found + len(piece), covered + len(piece)
    share = covered / len(body) if body else 0.0
    if share < min_coverage:
        return f"the steps cover {share:.0%} of the chain's text; at least {min_coverage:.0%} is needed"
    return ""


def read_split(text: str, cot: ChainOfThought, *, min_coverage: float) -> tuple[list[str] | None, str]:
    """(the model's steps, "") or (None, why the rule split is kept)."""
    result = parsing.parse_step_split(text)
    if not result.usable:
        return None, f"the split could not be read: {result.error}"
    steps = [step.strip() for step in result.value["steps"]]
    problem = check_reproduces(steps, answer_text(cot), min_coverage=min_coverage)
    return (None, problem) if problem else (steps, "")


# --- the job ----------------------------------------------------------------------------


@job_handler(JOB_KIND, queue=Job.Queue.IO, params=SplitParams, result=SplitCounts)
def run_split_job(job: Job, progress: Progress) -> dict:
    """Chains for every run (idempotent), then one call per chain not split yet
    by this run. Safe to run again: finished chains are skipped."""
    run = SplitRun.objects.select_related("splitter").get(pk=job.params["split_run_id"])
    runs = list(run.inference_runs.all())
    for inference_run in runs:
        chains.cots_from_run(inference_run=inference_run)
    cot_ids = ChainOfThought.objects.of_runs(runs).order_by("id").values_list("id", flat=True)
    create_missing_rows(SplitResult, ids=cot_ids, key="cot_id", split_run=run)
    total = run.results.count()
    done = run.results.exclude(outcome=Outcome.PENDING).count()
    progress(done, total)
    pending = list(run.results.filter(outcome=Outcome.PENDING).select_related("cot").order_by("id"))
    async_to_sync(_split_all)(run, pending, progress, done, total)
    return counts(run)


def request_params(run: SplitRun) -> dict[str, Any]:
    params = {k: v for k, v in run.params.items() if k in ALLOWED_PARAMS}
    if run.provenance["response_format"]["json_schema"]:
        params["response_format"] = parsing.response_format("step_split")
    return params


def split_messages(run: SplitRun, cot: ChainOfThought) -> list[dict]:
    template = PromptTemplate.objects.get(pk=run.provenance["prompt"]["id"])
    # The chain's own snapshot of the question: the bank's question may have changed since, or be gone.
    system, user = default_prompts.render(template, question=cot.question_text, model_answer=answer_text(cot))
    return client.build_messages(system=system, user=user)


async def _split_all(run: SplitRun, pending: list[SplitResult], progress: Progress, done: int, total: int):
    params = request_params(run)
    build = sync_to_async(split_messages, thread_sensitive=True)
    caller = calls.Caller(run.splitter)

    async def split_one(result: SplitResult) -> tuple[SplitResult, Any]:
        if not answer_text(result.cot):
            return result, None
        try:
            return result, await caller.complete(await build(run, result.cot), params)
        except client.ModelCallError as exc:
            return result, exc

    try:
        await calls.fan_out(pending, split_one, concurrency=run.splitter.call_limit,
                            save=lambda batch: save_splits(run, batch), progress=progress, done=done,
                            total=total)  # fmt: skip
    finally:
        await caller.close()


@transaction.atomic
def save_splits(run: SplitRun, batch: list[tuple[SplitResult, Any]]) -> None:
    for result, outcome in batch:
        save_split(run, result, outcome)


def save_split(run: SplitRun, result: SplitResult, outcome: Any) -> None:
    """Decides one chain's steps and records what happened, in one transaction."""
    cot = ChainOfThought.objects.select_for_update().get(pk=result.cot_id)
    fields: dict[str, Any] = {"finished": timezone.now()}
    if isinstance(outcome, client.Completion):
        fields |= {"raw_output": outcome.text, "attempts": outcome.attempts,
                   "prompt_tokens": outcome.prompt_tokens, "completion_tokens": outcome.completion_tokens}  # fmt: skip
    if outcome is None:
        fields |= {"outcome": Outcome.SKIPPED, "error": "the chain has no answer text"}
    elif services.has_person_work(cot):
        fields |= {"outcome": Outcome.CONFLICT, "error": "people have labelled this chain; its steps were kept"}
    else:
        if isinstance(outcome, client.ModelCallError):
            steps, problem = None, f"the call failed: {outcome}"
            fields["attempts"] = outcome.attempts
        else:
            steps, problem = read_split(outcome.text, cot, min_coverage=run.provenance["min_coverage"])
        if steps is None:
            steps, splitter = chains.split_response(cot.response_text), "rule"
            fields |= {"outcome": Outcome.FALLBACK, "error": problem}
        else:
            splitter = model_splitter(run.splitter)
            fields |= {"outcome": Outcome.MODEL, "error": ""}
        current = list(cot.steps.order_by("position").values_list("text", flat=True))
        if steps != current:
            services.replace_steps(cot, steps)
        cot.splitter, cot.split_run = splitter, run
        # Says which split made the steps: a fallback is the rule's, not the model's.
        rule = splitter == "rule"
        cot.step_source = ChainOfThought.StepSource.RULE if rule else ChainOfThought.StepSource.MODEL
        cot.save(update_fields=["splitter", "split_run", "step_source"])
    SplitResult.objects.filter(pk=result.pk).update(**fields)
