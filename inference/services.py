"""Endpoints and inference runs. Views, API, jobs and commands call these."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext

from annotation.models import Question
from inference import calls, client, gpu_classes, prompts, run_parts, sampling
from inference.job_shapes import RunCounts, RunParams
from inference.models import (
    Caption,
    InferenceRun,
    ModelEndpoint,
    PromptTemplate,
    Protocol,
    PublishedResult,
    Response,
)
from inference.reference import messages as reference_messages
from inference.reference.register import reference_prompt
from k12vista import job_text
from k12vista.jobs import Progress, job_handler, start_job, still_running
from k12vista.models import Job

EndpointError = client.EndpointError
check_endpoint_url = client.check_endpoint_url


# More servers than this behind one endpoint is a typo, not a cluster.
MAX_REPLICAS = 64


class ReplicaError(EndpointError):
    """A replica URL that cannot be used: shown on the replicas' field, not the base URL's."""


def check_replica_urls(urls: Any, *, endpoint: ModelEndpoint) -> list[str]:
    """The replica URLs normalised, each passing the checks the base URL passes (the allowlist,
    the key's destinations); ReplicaError for anything else, a repeat of another server included."""
    if urls in (None, ""):
        return []
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise ReplicaError(gettext("the replica URLs are a list of URLs"))
    if len(urls) > MAX_REPLICAS:
        raise ReplicaError(gettext("at most %(count)s replica URLs") % {"count": MAX_REPLICAS})
    checked: list[str] = []
    for url in (url.strip() for url in urls):
        if not url:
            continue
        try:
            url = check_endpoint_url(url)
            client.check_key_destination(endpoint.api_key_env, url)
        except EndpointError as exc:
            raise ReplicaError(str(exc)) from None
        if url == endpoint.base_url or url in checked:
            raise ReplicaError(gettext("%(url)s is named twice among the endpoint's servers") % {"url": url})
        checked.append(url)
    return checked


def fields_its_kind_never_uses(kind: str, values: dict[str, Any]) -> dict[str, str]:
    """The HTTP-only fields given to an engine endpoint, each with why: refused by the form and the
    API alike, never saved and ignored (issue 29)."""
    if kind == ModelEndpoint.Kind.OPENAI:
        return {}
    refused = {}
    if values.get("base_url"):
        refused["base_url"] = gettext("only an OpenAI-compatible endpoint has a base URL")
    if values.get("replica_urls"):
        refused["replica_urls"] = gettext("only an OpenAI-compatible endpoint has replica servers")
    return refused


@transaction.atomic
def save_endpoint(*, endpoint: ModelEndpoint, user: Any) -> ModelEndpoint:
    if endpoint.kind == ModelEndpoint.Kind.OPENAI:
        endpoint.base_url = check_endpoint_url(endpoint.base_url)
        client.check_key_destination(endpoint.api_key_env, endpoint.base_url)
        endpoint.replica_urls = check_replica_urls(endpoint.replica_urls, endpoint=endpoint)
    else:
        endpoint.replica_urls = []  # the offline engines have no servers
    if endpoint.max_concurrency < 1:
        raise EndpointError(gettext("max_concurrency must be at least 1"))
    if endpoint.pk is None:
        endpoint.created_by = user
    endpoint.save()
    return endpoint


def deactivate_endpoint(*, endpoint: ModelEndpoint) -> ModelEndpoint:
    """Switches an endpoint off: no new run or scoring chooses it; its runs and scores stay."""
    endpoint.active = False
    endpoint.save(update_fields=["active"])
    return endpoint


@transaction.atomic
def save_published_results(*, rows, user: Any) -> int:
    """Upserts published numbers on their natural key (model, mode, group, source)."""
    for row in rows:
        PublishedResult.objects.update_or_create(
            model=row.model, mode=row.mode, group=row.group, source=row.source,
            defaults={"score": row.score, "imported_by": user},
        )  # fmt: skip
    return len(rows)


# --- runs -------------------------------------------------------------------------

ANSWER_KIND: dict[str, PromptTemplate.Kind] = {  # keyed by text: a run's mode is stored as text
    InferenceRun.Mode.DIRECT: PromptTemplate.Kind.ANSWER_DIRECT,
    InferenceRun.Mode.STEP_BY_STEP: PromptTemplate.Kind.ANSWER_STEPS,
}


def questions_of(run: InferenceRun):
    return Question.objects.matching(run.filters)


class NoQuestions(EndpointError):
    """Filters that match no question: a run over them would answer nothing (issue 29)."""


def require_questions(filters: dict):
    """The questions matching ``filters``; NoQuestions, naming the filters, when there are none:
    a run, a campaign or an assist run over no question would "succeed" having asked nothing."""
    questions = Question.objects.matching(filters)
    if questions.exists():
        return questions
    named = ", ".join(f"{name}={value}" for name, value in sorted(filters.items()) if value not in (None, ""))
    if not named:
        raise NoQuestions(gettext("the question bank has no questions: there is nothing to ask"))
    raise NoQuestions(
        gettext("no question matches the filters %(filters)s: there is nothing to ask") % {"filters": named}
    )


@transaction.atomic
def start_inference_run(
    *, endpoint: ModelEndpoint, mode: str, filters: dict, user: Any, input_form: str = InferenceRun.InputForm.IMAGES,
    params: dict | None = None, seed: int | None = None, name: str = "", protocol: str = Protocol.STUDIO,
    prompt_set: str = "",
) -> InferenceRun:  # fmt: skip
    """Freezes what will produce the numbers (prompts, endpoint, question set)
    and starts the run as a job on the io queue."""
    run = create_inference_run(endpoint=endpoint, mode=mode, filters=filters, user=user, input_form=input_form,
                               params=params, seed=seed, name=name, protocol=protocol,
                               prompt_set=prompt_set)  # fmt: skip
    start_run_job(run, user=user)
    return run


def start_run_job(run: InferenceRun, *, user: Any, part_of: Job | None = None) -> Job:
    run.job = start_job(kind=job_kind(run.endpoint), user=user, params={"run_id": run.pk}, title=run.name,
                        part_of=part_of, queue=job_queue(run.endpoint))  # fmt: skip
    run.save(update_fields=["job"])
    return run.job


def create_inference_run(
    *, endpoint: ModelEndpoint, mode: str, filters: dict, user: Any, input_form: str = InferenceRun.InputForm.IMAGES,
    params: dict | None = None, seed: int | None = None, name: str = "", protocol: str = Protocol.STUDIO,
    prompt_set: str = "",
) -> InferenceRun:  # fmt: skip
    """The run's frozen record, without a job: a campaign answers its HTTP runs in its own job.

    The reference protocol asks with a registered reference prompt set (``prompt_set``, by default
    the newest registered) and sends only the sampling parameters the run sets: the rest is left to
    the server, as the reference code leaves it, the endpoint's defaults included."""
    if not endpoint.active:
        raise EndpointError(gettext("endpoint %(name)s is switched off") % {"name": endpoint})
    require_api_key(endpoint)
    job_queue(endpoint)  # an offline engine no GPU class of the cluster can hold is refused here
    questions = require_questions(filters)
    if protocol == Protocol.REFERENCE:
        chosen = reference_answer_prompts(endpoint, mode=mode, input_form=input_form, prompt_set=prompt_set)
        sent = dict(params or {})
    else:
        prompts.ensure_default_prompts()
        chosen = {qtype: prompts.current(ANSWER_KIND[mode], qtype) for qtype in prompts.QUESTION_TYPES}
        sent = {**endpoint.default_params, **(params or {})}
    run = InferenceRun.objects.create(
        name=name or f"{endpoint.name} · {mode}",
        endpoint=endpoint,
        mode=mode,
        input_form=input_form,
        protocol=protocol,
        filters=filters,
        params=sent,
        seed=seed,
        created_by=user,
        provenance={
            "protocol": protocol,
            "prompt_set": next(iter(chosen.values())).prompt_set,
            "prompts": {q: {"id": p.pk, "version": p.version, "hash": p.content_hash} for q, p in chosen.items()},
            "endpoint": {"base_url": endpoint.base_url, "model_name": endpoint.model_name},
            "questions": {
                "count": questions.count(),
                "last_change": str(questions.aggregate(last=Max("updated"))["last"]),
                "content_hash": question_set_hash(questions),
            },
            "params": sent,
            "seed": seed,
            "studio_version": studio_version(),
        },
    )  # fmt: skip
    return run


def reference_answer_prompts(
    endpoint: ModelEndpoint, *, mode: str, input_form: str, prompt_set: str
) -> dict[str, PromptTemplate]:
    """The registered reference answer prompt of each question type; refuses what the reference
    cannot do (it always sends the image: no captions, no text-only model)."""
    if input_form != InferenceRun.InputForm.IMAGES or not endpoint.accepts_images:
        raise EndpointError(
            gettext("the reference protocol sends the figure itself: it needs a model that reads images")
        )
    try:
        return {q: reference_prompt(ANSWER_KIND[mode], q, prompt_set=prompt_set) for q in prompts.QUESTION_TYPES}
    except LookupError:
        raise EndpointError(
            gettext("no reference prompts are registered%(set)s: register them from a checkout of the reference first")
            % {"set": f" ({prompt_set})" if prompt_set else ""}
        ) from None


def require_api_key(endpoint: ModelEndpoint) -> None:
    """Refuses to start when the endpoint's URL is no longer allowed, or it names a key
    variable that is not declared (never read), not bound to this URL, or not set on this server."""
    if endpoint.kind == ModelEndpoint.Kind.OPENAI:
        client.check_endpoint_url(endpoint.base_url)
    client.check_key_variable(endpoint.api_key_env)
    if endpoint.kind == ModelEndpoint.Kind.OPENAI:
        client.check_key_destination(endpoint.api_key_env, endpoint.base_url)
    if endpoint.api_key_env and not os.environ.get(endpoint.api_key_env):
        raise EndpointError(
            gettext(
                "the API key variable %(name)s is not set on this server; set it (on the web server and the "
                "workers) or clear the field for a server that needs no key"
            )
            % {"name": endpoint.api_key_env}
        )


def question_set_hash(questions) -> str:
    """One hash over the ids and content hashes of the questions, in id order:
    equal when two runs asked exactly the same questions in the same versions."""
    digest = hashlib.sha256()
    for question_id, content in questions.order_by("id").values_list("id", "content_hash").iterator(chunk_size=5000):
        digest.update(f"{question_id}:{content}\n".encode())
    return digest.hexdigest()


@functools.cache
def studio_version() -> str:
    """The git commit the studio runs from (STUDIO_VERSION overrides, for installs without .git)."""
    if os.environ.get("STUDIO_VERSION"):
        return os.environ["STUDIO_VERSION"]
    try:
        found = subprocess.run(["git", "rev-parse", "HEAD"], cwd=settings.BASE_DIR, capture_output=True, text=True,
                               timeout=5, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip()


RECORD_KEYS = ("prompts", "endpoint", "params", "seed", "questions", "studio_version")


def record_differences(a: InferenceRun, b: InferenceRun) -> list[str]:
    """What differs between two runs' records; empty when their numbers are comparable."""
    differences = []
    for key in RECORD_KEYS:
        left, right = a.provenance.get(key), b.provenance.get(key)
        if key == "questions":
            left, right = (left or {}).get("content_hash"), (right or {}).get("content_hash")
        if left != right:
            differences.append(key)
    if a.mode != b.mode:
        differences.append("mode")
    if a.input_form != b.input_form:
        differences.append("input_form")
    if a.protocol != b.protocol:
        differences.append("protocol")
    return differences


def job_kind(endpoint: ModelEndpoint) -> str:
    """HTTP endpoints run on the io queue; the offline engine on a GPU worker; transformers on a CPU worker."""
    return {
        ModelEndpoint.Kind.VLLM_OFFLINE.value: "inference.run_offline",
        ModelEndpoint.Kind.TRANSFORMERS.value: "inference.run_local",
    }.get(endpoint.kind, "inference.run")


def job_queue(endpoint: ModelEndpoint) -> str | None:
    """The queue of the endpoint's run jobs when it is not the kind's: an offline engine's GPU class
    (EndpointError when none fits)."""
    if endpoint.kind == ModelEndpoint.Kind.VLLM_OFFLINE:
        return gpu_classes.queue_for(endpoint)
    return None


class RetryRefused(Exception):
    """A retry asked while the run is still being answered, refused before anything changed."""


def still_answering(run: InferenceRun) -> bool:
    """Whether the run's job (as stored now) or one of its parts is queued or running."""
    return still_running(InferenceRun.objects.filter(pk=run.pk).values_list("job_id", flat=True).first())


def refuse_retry_while_answering(run: InferenceRun) -> None:
    """RetryRefused while the run is being answered: a second set of parts over the same rows
    would ask a pending question twice."""
    if still_answering(run):
        raise RetryRefused(
            gettext("%(run)s is still being answered (its job or one of its parts is queued or running): "
                    "retry its failed answers once it has ended") % {"run": run}
        )  # fmt: skip


@transaction.atomic
def retry_failed(*, run: InferenceRun, user: Any, part_of: Job | None = None) -> Job:
    """Sends failed answers back to pending and runs the job again for them only. Refused, with
    nothing changed, while the run is still being answered (RetryRefused) and when the run's offline
    engine fits none of the cluster's GPU classes now (EndpointError)."""
    # The run's row is locked first, so two retries sent at once are one retry and one refusal.
    list(InferenceRun.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True))
    refuse_retry_while_answering(run)
    queue = job_queue(run.endpoint)
    run.responses.filter(status=Response.Status.FAILED).update(status=Response.Status.PENDING, error="")
    run.job = start_job(
        kind=job_kind(run.endpoint),
        user=user,
        params={"run_id": run.pk},
        title=job_text.title("retry", name=run.name),
        part_of=part_of,
        queue=queue,
    )
    run.save(update_fields=["job"])
    return run.job


def create_missing_rows(model, *, ids, key: str = "question_id", **fields) -> int:
    """One pending row per id (question or response); rows already there are kept,
    their unique constraint skipping them, so a restarted job resumes where it stopped."""
    batch, created = [], 0
    for value in ids.iterator(chunk_size=5000):
        batch.append(model(**fields, **{key: value}))
        if len(batch) == 5000:
            created += len(model.objects.bulk_create(batch, ignore_conflicts=True))
            batch = []
    if batch:
        created += len(model.objects.bulk_create(batch, ignore_conflicts=True))
    return created


def create_missing_responses(run: InferenceRun) -> int:
    return create_missing_rows(Response, ids=questions_of(run).values_list("id", flat=True).order_by("id"), run=run)


def request_for(run: InferenceRun, response: Response) -> tuple[PromptTemplate, list[dict]]:
    """The prompt and messages for one question: with its figures as images, or,
    for text-only models, with the newest caption of each figure in the text."""
    question = response.question
    template = prompt_of(run, question.qtype)
    if run.protocol == Protocol.REFERENCE:
        return template, reference_messages.answer_messages(template, question)
    image_urls, caption = [], ""
    if run.input_form == InferenceRun.InputForm.CAPTIONS:
        found = Caption.objects.filter(question=question).order_by("-created").first()
        if found is None and question.figures.exists():
            raise MissingCaption(f"question {question.hash_id} has a figure but no caption yet: run a caption job")
        caption = found.text if found else ""
    elif run.endpoint.accepts_images:
        for figure in question.figures.all():
            with figure.image.open("rb") as stored:
                image_urls.append(client.image_data_url(stored.read(), max_side=run.endpoint.max_image_side))
    system, user = prompts.render(template, question=question, caption=caption)
    return template, client.build_messages(system=system, user=user, image_urls=image_urls)


def prompt_of(run: InferenceRun, qtype: str) -> PromptTemplate:
    """The run's frozen prompt for a question type, read once per run object."""
    cache = run.__dict__.setdefault("_prompt_cache", {})
    if qtype not in cache:
        cache[qtype] = PromptTemplate.objects.get(pk=run.provenance["prompts"][qtype]["id"])
    return cache[qtype]


class MissingCaption(Exception):
    """A text-only run reached a question whose figure has not been captioned."""


def answer_fields(completion: client.Completion | None, *, error: str = "", attempts: int = 0) -> dict[str, Any]:
    """The columns one answer sets: an empty answer fails, a cut one is kept and flagged."""
    fields: dict[str, Any] = {"finished": timezone.now()}
    if completion is not None and not completion.text.strip():
        error, attempts = "the model returned an empty answer", completion.attempts
        completion = None
    if completion is not None:
        fields |= {
            "status": Response.Status.OK, "raw_output": completion.text, "latency_ms": completion.latency_ms,
            "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "finish_reason": completion.finish_reason, "attempts": completion.attempts,
            # Kept, and said: a judge then sees where the answer was cut off.
            "error": "truncated: the answer reached max_tokens" if completion.finish_reason == "length" else "",
        }  # fmt: skip
    else:
        fields |= {"status": Response.Status.FAILED, "error": error, "attempts": attempts}
    return fields


def save_answer(response: Response, *, completion: client.Completion | None, error: str = "", attempts: int = 0):
    Response.objects.filter(pk=response.pk).update(**answer_fields(completion, error=error, attempts=attempts))


@transaction.atomic
def save_answers(answers: list[tuple[int, dict[str, Any]]]) -> None:
    """Several answers in one transaction: one commit instead of one each, and one
    statement per set of columns instead of a queryset per answer."""
    calls.update_rows(Response, answers)


@job_handler("inference.run", queue=Job.Queue.IO, params=RunParams, result=RunCounts)
def run_inference_job(job: Job, progress: Progress) -> dict:
    """Answers every pending question of the run (or of its part, run_parts) with at most the
    endpoint's max_concurrency requests in flight. Safe to run again: answered rows are skipped."""
    run = InferenceRun.objects.select_related("endpoint").get(pk=job.params["run_id"])
    span = run_parts.span_of(job)
    if span is None and in_parts(run, job):
        return run_parts.finish_whole(run, job, progress)  # parks until its parts have ended
    progress = run_parts.progress_of(job, progress)
    pending, done_before, total = prepare_answering(run, span, rows_made=True)
    progress(done_before, total)
    # async_to_sync, not asyncio.run: the database calls inside then run in this
    # thread, on this job's connection.
    async_to_sync(answer_pending)(run, pending, progress, done_before, total)
    return run_parts.counts(run, span)


def in_parts(run: InferenceRun, job: Job) -> bool:
    """For a run's whole job: creates the run's rows (a part's were made by its whole job) and,
    for a run too large for one worker, starts its part-jobs (once). True when the job has parts
    to wait for. A whole job woken by its parts' ends creates no rows: the parts cover those it made."""
    if run_parts.has_parts(job):
        return True
    create_missing_responses(run)
    return run_parts.start_parts(run, job)


def prepare_answering(
    run: InferenceRun, span: run_parts.Span | None = None, *, rows_made: bool = False
) -> tuple[list[Response], int, int]:
    """Rows for every question (idempotent; skipped when the job made them: in_parts);
    (pending answers, answers done, total), of the run or of its part ``span``."""
    if not rows_made:
        create_missing_responses(run)
    responses = run_parts.rows_of(run, span)
    total = responses.count()
    done_before = responses.exclude(status=Response.Status.PENDING).count()
    rows = responses.filter(status=Response.Status.PENDING).select_related("question").order_by("id")
    if run.input_form == InferenceRun.InputForm.CAPTIONS or run.endpoint.accepts_images:
        # So building a request needs no query; a text-only run without captions never looks
        # at the figures (their prefetch was up to a tenth of a millisecond per answer).
        rows = rows.prefetch_related("question__figures")
    pending = list(rows)
    for qtype in run.provenance["prompts"]:
        prompt_of(run, qtype)  # loaded here, so building requests inside the loop needs no query
    return pending, done_before, total


async def answer_pending(
    run: InferenceRun,
    pending: list[Response],
    progress: Progress,
    done: int,
    total: int,
    *,
    save: Callable[[list[tuple[int, dict[str, Any]]]], None] | None = None,
):
    """Asks every pending question; ``save`` (save_answers unless given) stores the answers in
    batches (a campaign passes one calls.SharedSave for all its runs)."""
    params = {k: v for k, v in run.params.items() if k in ALLOWED_PARAMS}
    if run.seed is not None:
        params["seed"] = run.seed
    caller = calls.Caller(run.endpoint)

    async def answer(response: Response) -> tuple[int, dict[str, Any]]:
        try:
            # Captions are looked up in the database; everything else a request
            # needs was loaded with the run, so it is built here without a thread hop.
            if run.input_form == InferenceRun.InputForm.CAPTIONS:
                _template, messages = await sync_to_async(request_for, thread_sensitive=True)(run, response)
            else:
                _template, messages = request_for(run, response)
        except MissingCaption as exc:
            return response.pk, answer_fields(None, error=str(exc))
        try:
            return response.pk, answer_fields(await caller.complete(messages, params))
        except client.ModelCallError as exc:
            return response.pk, answer_fields(None, error=str(exc), attempts=exc.attempts)

    try:
        await calls.fan_out(pending, answer, concurrency=run.endpoint.call_limit, save=save or save_answers,
                            progress=progress, done=done, total=total)  # fmt: skip
    finally:
        await caller.close()


# Sampling parameters we pass on; anything else in params is ignored rather than
# sent to a server that may reject the whole request for it (an endpoint's default_params refuse it).
ALLOWED_PARAMS = sampling.SAMPLING_KEYS
