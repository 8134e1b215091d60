"""Model help for the question bank (PIPELINE.md stages 2-4), run as jobs.

An assist run asks one endpoint about every question matching a filter and
writes what it finds back into the question bank through the bank's own public
services only (architecture.md, "two seams"):

* restructure_solution -> ``annotation.services.add_step_proposal``
* check_structure      -> ``annotation.checks.add_model_flag``, one per problem
* caption_image        -> a ``Caption`` row (ours), for text-only models
* small_model_filter / text_only_filter (the refine stage) -> a model flag on
  questions the model answered correctly; people decide what to drop. Nothing
  here ever deletes, rejects or edits a question.

Every question gets one ``AssistResult`` row (unique per run and question), so
a job restarted after a crash skips what is done and asks the model again only
for pending rows. Write-backs happen in the same transaction as the row's
update, and check for an earlier write with the run's ``run_ref`` as well, so
a repeated item never writes twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from annotation import checks
from annotation import services as bank
from annotation.models import Flag, Question, StepProposal
from inference import calls, client, parsing, prompts
from inference.answers import UnreadableOutput, judge_answer
from inference.default_prompts import STRUCTURE_PROBLEMS
from inference.job_shapes import AssistCountsOutput, AssistParams
from inference.models import AssistResult, AssistRun, Caption, ModelEndpoint, PromptTemplate
from inference.services import (
    ALLOWED_PARAMS,
    EndpointError,
    RetryRefused,
    create_missing_rows,
    require_api_key,
    require_questions,
)
from k12vista import job_text
from k12vista.jobs import Progress, job_handler, start_job, still_running
from k12vista.models import Job

JOB_KIND = "inference.assist"
Kind = AssistRun.Kind
Status = AssistResult.Status

# The tables below are keyed by text: a run's stored ``kind`` is a plain str.
PROMPT_KIND: dict[str, PromptTemplate.Kind] = {
    Kind.RESTRUCTURE: PromptTemplate.Kind.RESTRUCTURE,
    Kind.CHECK_STRUCTURE: PromptTemplate.Kind.CHECK_STRUCTURE,
    Kind.CAPTION: PromptTemplate.Kind.CAPTION,
    Kind.SMALL_MODEL_FILTER: PromptTemplate.Kind.ANSWER_DIRECT,
    Kind.TEXT_ONLY_FILTER: PromptTemplate.Kind.ANSWER_DIRECT,
}
# Kinds whose answer is JSON, and the parsing kind (and schema) for each.
OUTPUT_KIND: dict[str, str] = {Kind.RESTRUCTURE: "restructured_solution", Kind.CHECK_STRUCTURE: "structure_check"}
# Kinds that send the question's figures with the prompt.
WITH_IMAGES = {Kind.CAPTION, Kind.SMALL_MODEL_FILTER}
FILTER_KINDS = {Kind.SMALL_MODEL_FILTER, Kind.TEXT_ONLY_FILTER}


def run_ref(run: AssistRun) -> str:
    """What the question bank stores on flags and proposals to name this run."""
    return f"{JOB_KIND}:{run.pk}"


# --- starting -----------------------------------------------------------------------


@transaction.atomic
def start_assist_run(
    *, kind: str, endpoint: ModelEndpoint, filters: dict, user: Any, params: dict | None = None, name: str = ""
) -> AssistRun:
    """Freezes what will produce the results (prompt ids and hashes, endpoint,
    question set) and starts the run as a job on the io queue."""
    if kind not in Kind.values:
        raise EndpointError(gettext("unknown assist kind %(kind)s") % {"kind": repr(kind)})
    if not endpoint.active:
        raise EndpointError(gettext("endpoint %(name)s is switched off") % {"name": endpoint})
    require_api_key(endpoint)
    if endpoint.kind != ModelEndpoint.Kind.OPENAI:
        raise EndpointError(
            gettext("%(kind)s endpoints run on their own workers (not built yet)")
            % {"kind": endpoint.get_kind_display()}
        )
    if kind in (Kind.CAPTION, Kind.SMALL_MODEL_FILTER) and not endpoint.accepts_images:
        raise EndpointError(
            gettext("%(kind)s needs an endpoint that accepts images; %(name)s does not")
            % {"kind": Kind(kind).label, "name": endpoint}
        )
    prompts.ensure_default_prompts()
    # Keyed by question type for every kind, so that items look their prompt up
    # the same way (type-free prompts simply repeat).
    chosen = {qtype: prompts.current(PROMPT_KIND[kind], qtype) for qtype in prompts.QUESTION_TYPES}
    questions = require_questions(filters)  # NoQuestions: a run over no question would ask nothing
    output_kind = OUTPUT_KIND.get(kind)
    run = AssistRun.objects.create(
        name=name or f"{endpoint.name} · {Kind(kind).label}",
        kind=kind,
        endpoint=endpoint,
        filters=filters,
        params={**endpoint.default_params, **(params or {})},
        created_by=user,
        provenance={
            "prompts": {q: {"id": p.pk, "version": p.version, "hash": p.content_hash} for q, p in chosen.items()},
            "endpoint": {"name": endpoint.name, "base_url": endpoint.base_url, "model_name": endpoint.model_name},
            "schema": output_kind if output_kind and endpoint.supports_json_schema else None,
            "images": kind in WITH_IMAGES and endpoint.accepts_images,
            "questions": {
                "count": questions.count(),
                "last_change": str(questions.aggregate(last=Max("updated"))["last"]),
            },
        },
    )
    run.job = start_job(kind=JOB_KIND, user=user, params={"run_id": run.pk}, title=run.name)
    run.save(update_fields=["job"])
    return run


@transaction.atomic
def retry_failed(*, run: AssistRun, user: Any) -> Job:
    """Sends items whose call failed back to pending and runs the job again for them only. Refused, with
    nothing changed, while the run's job is queued or running (RetryRefused): a second job over the same
    pending items would ask each of them twice."""
    # The run's row is locked first, so two retries sent at once are one retry and one refusal.
    job_id = AssistRun.objects.select_for_update().filter(pk=run.pk).values_list("job_id", flat=True).first()
    if still_running(job_id):
        raise RetryRefused(
            gettext("%(run)s is still running: retry its failed items once it has ended") % {"run": run.name}
        )
    run.results.filter(status=Status.CALL_FAILED).update(status=Status.PENDING, error="")
    run.job = start_job(
        kind=JOB_KIND, user=user, params={"run_id": run.pk}, title=job_text.title("retry", name=run.name)
    )
    run.save(update_fields=["job"])
    return run.job


def counts(run: AssistRun, *, worded: bool = True) -> dict[str, Any]:
    """What happened to the run's questions: ``ok`` those the model's output was used for, ``skipped``
    those that needed no call (with ``skipped_why``: reason -> count), never counted as done (issue 29)."""
    skipped = Q(status=Status.OK, parsed__has_key="skipped")
    tally: dict[str, Any] = run.results.aggregate(
        total=Count("id"),
        ok=Count("id", filter=Q(status=Status.OK) & ~skipped),
        skipped=Count("id", filter=skipped),
        parse_failed=Count("id", filter=Q(status=Status.PARSE_FAILED)),
        call_failed=Count("id", filter=Q(status=Status.CALL_FAILED)),
        pending=Count("id", filter=Q(status=Status.PENDING)),
    )
    why: dict[str, int] = {}
    if tally["skipped"]:
        for parsed in run.results.filter(skipped).values_list("parsed", flat=True):
            assert parsed is not None  # has_key matched: an object
            reason = str(parsed.get("skipped", ""))  # stored as a code (its msgid), worded for a reader
            reason = gettext(reason) if worded else reason
            why[reason] = why.get(reason, 0) + 1
    tally["skipped_why"] = why
    return tally


def create_missing_results(run: AssistRun) -> int:
    """One pending row per question of the run; existing rows are kept."""
    ids = Question.objects.matching(run.filters).values_list("id", flat=True).order_by("id")
    return create_missing_rows(AssistResult, ids=ids, run=run)


# --- the job ------------------------------------------------------------------------


@job_handler(JOB_KIND, queue=Job.Queue.IO, params=AssistParams, result=AssistCountsOutput)
def run_assist_job(job: Job, progress: Progress) -> dict:
    """Asks the model about every pending question with at most the endpoint's
    max_concurrency requests in flight. Safe to run again: finished rows are skipped."""
    run = AssistRun.objects.select_related("endpoint").get(pk=job.params["run_id"])
    create_missing_results(run)
    total = run.results.count()
    done_before = run.results.exclude(status=Status.PENDING).count()
    progress(done_before, total)
    pending = list(run.results.filter(status=Status.PENDING).select_related("question").order_by("id"))
    # async_to_sync, not asyncio.run: the database calls inside then run in this
    # thread, on this job's connection.
    async_to_sync(_process_all)(run, pending, progress, done_before, total)
    return counts(run, worded=False)


async def _process_all(run: AssistRun, pending: list[AssistResult], progress: Progress, done: int, total: int):
    params = {k: v for k, v in run.params.items() if k in ALLOWED_PARAMS}
    if run.provenance.get("schema"):
        params["response_format"] = parsing.response_format(run.provenance["schema"])
    caller = calls.Caller(run.endpoint)

    async def process(result: AssistResult) -> tuple[AssistResult, Any]:
        messages = await sync_to_async(request_for, thread_sensitive=True)(run, result.question)
        if messages is None:
            return result, None
        try:
            return result, await caller.complete(messages, params)
        except client.ModelCallError as exc:
            return result, exc

    def save(batch: list[tuple[AssistResult, Any]]) -> None:
        save_results(run, batch)

    try:
        await calls.fan_out(pending, process, concurrency=run.endpoint.call_limit, save=save,
                            progress=progress, done=done, total=total)  # fmt: skip
    finally:
        await caller.close()


# --- requests -----------------------------------------------------------------------


def skip_reason(run: AssistRun, question: Question) -> str:
    """Why an item needs no call ("" when it does): a code (the msgid), stored in the result and worded
    when counts() is read."""
    if run.kind == Kind.RESTRUCTURE and not question.raw_solution.strip():
        return gettext_noop("the question has no raw solution to restructure")
    if run.kind == Kind.CAPTION and not question.figures.exists():
        return gettext_noop("the question has no figure")
    # Without a reference answer nothing can be checked: such a question is unchecked (the filter lists it
    # so), never "checked and unsolved", which would keep it out of the filter silently (issue 29).
    if run.kind in (Kind.SMALL_MODEL_FILTER, Kind.TEXT_ONLY_FILTER) and not any(
        str(a).strip() for a in question.answers or []
    ):
        return gettext_noop("the question has no reference answer to check against")
    return ""


def request_for(run: AssistRun, question: Question) -> list[dict] | None:
    """The messages for one question, or None when the item needs no call."""
    if skip_reason(run, question):
        return None
    template = PromptTemplate.objects.get(pk=run.provenance["prompts"][question.qtype]["id"])
    system, user = prompts.render(template, question=question)
    image_urls = []
    if run.provenance.get("images"):
        for figure in question.figures.all():
            with figure.image.open("rb") as stored:
                image_urls.append(client.image_data_url(stored.read(), max_side=run.endpoint.max_image_side))
    return client.build_messages(system=system, user=user, image_urls=image_urls)


# --- saving -------------------------------------------------------------------------


@transaction.atomic
def save_results(run: AssistRun, batch: list[tuple[AssistResult, Any]]) -> None:
    """Saves a batch of outcomes (None: skipped, ModelCallError, or the model's Completion): the
    write-backs one by one through the bank's services, the rows in one statement per set of
    columns (calls.update_rows, as inference runs save their answers), all in one transaction."""
    now = timezone.now()
    calls.update_rows(AssistResult, [(result.pk, {"finished": now, **result_fields(run, result, outcome)})
                                     for result, outcome in batch])  # fmt: skip


def result_fields(run: AssistRun, result: AssistResult, outcome: Any) -> dict[str, Any]:
    """The row's new fields for one outcome, after writing a completion's output back into the bank."""
    if outcome is None:
        return {"status": Status.OK, "parsed": {"skipped": skip_reason(run, result.question)}, "error": ""}
    if isinstance(outcome, client.ModelCallError):
        return {"status": Status.CALL_FAILED, "error": str(outcome), "attempts": outcome.attempts}
    said = {"raw_output": outcome.text, "attempts": outcome.attempts}
    question = result.question
    try:
        parsed = read_output(run, question, outcome.text)
    except UnreadableOutput as exc:
        return {"status": Status.PARSE_FAILED, "parsed": None, "error": str(exc), **said}
    try:
        # A savepoint of its own: a write-back the bank refuses undoes only itself.
        with transaction.atomic():
            WRITE_BACK[run.kind](run, question, parsed)
    except bank.QuestionDataError as exc:  # the bank refused what the model said
        return {"status": Status.PARSE_FAILED, "parsed": parsed, "error": str(exc), **said}
    return {"status": Status.OK, "parsed": parsed, "error": "", **said}


def read_output(run: AssistRun, question: Question, text: str) -> dict:
    """What the model said, as stored in AssistResult.parsed; UnreadableOutput when nothing usable."""
    if run.kind in OUTPUT_KIND:
        result = parsing.parse(OUTPUT_KIND[run.kind], text)
        if not result.usable:
            raise UnreadableOutput(result.error)
        return {**result.value, "parse_status": str(result.status), "parse_notes": result.notes}
    if run.kind == Kind.CAPTION:
        caption = parsing.answer_after_reasoning(text)
        if not caption:
            raise UnreadableOutput("empty caption")
        return {"caption": caption}
    return judge_answer(question, text)


def _write_proposal(run: AssistRun, question: Question, parsed: dict) -> None:
    if StepProposal.objects.filter(question=question, run_ref=run_ref(run)).exists():
        return
    bank.add_step_proposal(question=question, steps=parsed["steps"], run_ref=run_ref(run),
                           model_name=run.endpoint.model_name)  # fmt: skip


def _model_flags(run: AssistRun, question: Question) -> set[tuple[str, str]]:
    rows = Flag.objects.filter(question=question, origin=Flag.Origin.MODEL, run_ref=run_ref(run))
    return {(flag.message, flag.detail.get("code", "")) for flag in rows}


def _write_problems(run: AssistRun, question: Question, parsed: dict) -> None:
    # Problems are flagged even when the model also said ok (the parser notes the
    # contradiction): a person looking at a false alarm costs less than a miss.
    existing = _model_flags(run, question)
    for problem in parsed["problems"]:
        code = problem["code"].strip()
        detail = {"code": code if code in STRUCTURE_PROBLEMS else "other"}
        if detail["code"] != code:
            detail["model_code"] = code  # a code the prompt did not offer, kept for the reviewer
        message = problem["message"].strip() or STRUCTURE_PROBLEMS[detail["code"]]
        if (message, detail["code"]) in existing:
            continue
        checks.add_model_flag(question=question, message=message, run_ref=run_ref(run), detail=detail)
        existing.add((message, detail["code"]))


def _write_caption(run: AssistRun, question: Question, parsed: dict) -> None:
    Caption.objects.update_or_create(question=question, run=run, defaults={"text": parsed["caption"]})


def _write_verdict(run: AssistRun, question: Question, parsed: dict) -> None:
    if not parsed["correct"] or _model_flags(run, question):
        return
    message = f"answered correctly by {run.endpoint.model_name} ({run.kind})"
    detail = {"code": run.kind, "model_answers": parsed["model_answers"], "reference_answers": parsed["reference"]}
    checks.add_model_flag(question=question, message=message, run_ref=run_ref(run), detail=detail)


WRITE_BACK: dict[str, Callable[[AssistRun, Question, dict], None]] = {
    Kind.RESTRUCTURE: _write_proposal,
    Kind.CHECK_STRUCTURE: _write_problems,
    Kind.CAPTION: _write_caption,
    Kind.SMALL_MODEL_FILTER: _write_verdict,
    Kind.TEXT_ONLY_FILTER: _write_verdict,
}
