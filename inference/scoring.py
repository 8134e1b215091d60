"""Scoring runs: a judge model scores the responses of one inference run
(PIPELINE.md stage 9), as a job: on the io queue for a judge behind HTTP, on the
judge's GPU class queue for an offline (vLLM) engine, on the cpu queue for a
transformers judge. A scoring run over more than RUN_PART_SIZE pending judgments is
split into part-jobs by judgment-id range, as inference runs are (run_parts), so
several workers judge one run.

Direct mode: the judge extracts the reference and the model's sub-answers and
marks each 0 or 1; the score is the mean. Step by step: the judge splits the
answer into steps and labels each; the score is correct steps / steps.

Unlike the public reference code, nothing leaves the denominator: a response
the model never gave is NO_RESPONSE, a judge output that still cannot be read
after the retries is PARSE_FAILED (raw output and reason kept), a failed call
is CALL_FAILED. All three have score None, which counts against coverage and
never as 0.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext

from inference import calls, client, default_prompts, engines, gpu_classes, parsing, prompts, run_parts, standings
from inference.job_shapes import SCORE_RESULT, ScoreParams
from inference.models import (
    InferenceRun,
    JudgedStep,
    Judgment,
    ModelEndpoint,
    PromptTemplate,
    Protocol,
    Response,
    ScoringRun,
)
from inference.reference import judging as reference_judging
from inference.reference import messages as reference_messages
from inference.reference import prompts as reference_prompts
from inference.reference import register as reference_register
from inference.services import ALLOWED_PARAMS, EndpointError, create_missing_rows, require_api_key
from k12vista import job_text
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.models import Job
from k12vista.vocabulary import CORRECT

# Extra calls after an output the parser cannot read. A sampling judge often
# gets it right the second time; a greedy one repeats itself, which costs little.
PARSE_RETRIES = 2

METHOD_OF_MODE = {
    InferenceRun.Mode.DIRECT: ScoringRun.Method.JUDGE_DIRECT,
    InferenceRun.Mode.STEP_BY_STEP: ScoringRun.Method.JUDGE_STEPS,
}
PROMPT_KIND = {
    ScoringRun.Method.JUDGE_DIRECT: PromptTemplate.Kind.JUDGE_DIRECT,
    ScoringRun.Method.JUDGE_STEPS: PromptTemplate.Kind.JUDGE_STEPS,
}
OUTPUT_KIND = {
    ScoringRun.Method.JUDGE_DIRECT: "direct_judgment",
    ScoringRun.Method.JUDGE_STEPS: "step_judgment",
}
# What render() gets for a judge prompt: prompts.question_values plus the answer.
JUDGE_VALUES = frozenset(
    {"question", "options", "question_with_options", "subject", "grade", "reference_answer",
     "reference_answer_lines", "reference_solution", "raw_solution", "caption", "question_type", "model_answer"}
)  # fmt: skip
FAILED_STATUSES = (Judgment.Status.PARSE_FAILED, Judgment.Status.CALL_FAILED)


class ScoringError(ValueError):
    """A scoring run that cannot start; the message says why."""


class NoAnswers(ScoringError):
    """The inference run has no answer to score: a scoring run over it would judge nothing (issue 29)."""


def check_can_score(*, inference_run: InferenceRun, judge: ModelEndpoint, method: str, local_ok: bool = False) -> None:
    if method not in ScoringRun.Method.values:
        raise ScoringError(gettext("unknown scoring method %(method)s") % {"method": repr(method)})
    expected = METHOD_OF_MODE[InferenceRun.Mode(inference_run.mode)]
    if method != expected:
        raise ScoringError(
            gettext("%(run)s is a %(mode)s run; score it with the method “%(expected)s”, not “%(method)s”")
            % {
                "run": inference_run,
                "mode": inference_run.get_mode_display(),
                "expected": expected.label,
                "method": ScoringRun.Method(method).label,
            }  # fmt: skip
        )
    if not judge.active:
        raise EndpointError(gettext("endpoint %(name)s is switched off") % {"name": judge})
    require_api_key(judge)
    # Every judge judges in a job of its own (a panel starts one per judge), on its kind's queue.
    # local_ok is kept for callers that refuse a CPU judge; an offline engine must fit a GPU class.
    judges_here = {ModelEndpoint.Kind.OPENAI, ModelEndpoint.Kind.VLLM_OFFLINE}
    judges_here |= {ModelEndpoint.Kind.TRANSFORMERS} if local_ok else set()
    if judge.kind not in judges_here:
        raise EndpointError(
            gettext("%(kind)s endpoints cannot judge here; choose an OpenAI-compatible one")
            % {"kind": judge.get_kind_display()}
        )
    job_queue(judge)  # an offline engine no GPU class of the cluster can hold is refused here (EndpointError)
    # A partial run would score the answers that happened to arrive first.
    answering = inference_run.job is not None and not inference_run.job.is_finished
    if answering or inference_run.responses.filter(status=Response.Status.PENDING).exists():
        raise ScoringError(
            gettext("%(run)s is still answering; score it once every question has an answer or failed")
            % {"run": inference_run}
        )
    if not inference_run.responses.filter(status=Response.Status.OK).exists():
        raise NoAnswers(
            gettext("%(run)s has no answers to score: none of its questions was answered") % {"run": inference_run}
        )


@transaction.atomic
def start_scoring_run(
    *, inference_run: InferenceRun, judge: ModelEndpoint, method: str, user: Any, params: dict | None = None,
    name: str = "", protocol: str = Protocol.STUDIO,
) -> ScoringRun:  # fmt: skip
    """Freezes what will produce the scores (judge prompts, judge, structured
    output, parser) and starts the scoring as a job on the io queue."""
    run = create_scoring_run(inference_run=inference_run, judge=judge, method=method, user=user, params=params,
                             name=name, local_ok=True, protocol=protocol)  # fmt: skip
    _start_job(run, user=user, title=run.name)
    return run


def create_scoring_run(
    *, inference_run: InferenceRun, judge: ModelEndpoint, method: str, user: Any, params: dict | None = None,
    name: str = "", local_ok: bool = False, protocol: str = Protocol.STUDIO,
) -> ScoringRun:  # fmt: skip
    """The scoring run's record, without a job: a judge panel runs several in its own job."""
    if protocol not in Protocol.values:
        raise ScoringError(gettext("unknown protocol %(protocol)s") % {"protocol": repr(protocol)})
    check_can_score(inference_run=inference_run, judge=judge, method=method, local_ok=local_ok)
    trained_on = trained_protocol(judge, method)
    if trained_on is not None and trained_on != protocol:
        raise ScoringError(trained_protocol_error(judge, trained_on))
    if protocol == Protocol.REFERENCE:
        return _create_reference_scoring_run(inference_run=inference_run, judge=judge, method=method, user=user,
                                             params=params, name=name)  # fmt: skip
    kind = PROMPT_KIND[ScoringRun.Method(method)]
    prompts.ensure_default_prompts()
    if method == ScoringRun.Method.JUDGE_STEPS and judge.judge_prompt is not None:
        # A trained judge (a PEM) reads the prompt it learnt on, whatever the question's type.
        chosen = dict.fromkeys(prompts.QUESTION_TYPES, judge.judge_prompt)
    else:
        chosen = {qtype: prompts.current(kind, qtype) for qtype in prompts.QUESTION_TYPES}
    for template in {t.pk: t for t in chosen.values()}.values():
        unknown = default_prompts.placeholders(template) - JUDGE_VALUES
        if unknown:
            names = ", ".join("${" + n + "}" for n in sorted(unknown))
            raise ScoringError(
                gettext("prompt %(prompt)s uses %(names)s, which a judge prompt cannot fill")
                % {"prompt": template, "names": names}
            )
    output_kind = OUTPUT_KIND[ScoringRun.Method(method)]
    schema = parsing.response_format(output_kind)["json_schema"]["schema"]
    run = ScoringRun.objects.create(
        name=name or f"{judge.name} · {inference_run.name}",
        inference_run=inference_run,
        judge=judge,
        method=method,
        params={**judge.default_params, **(params or {})},
        created_by=user,
        provenance={
            "prompts": {q: {"id": p.pk, "version": p.version, "hash": p.content_hash} for q, p in chosen.items()},
            "judge": {"name": judge.name, "base_url": judge.base_url, "model_name": judge.model_name},
            "response_format": {
                "json_schema": judge.supports_json_schema,
                "kind": output_kind,
                "schema_hash": hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest(),
            },
            "parser": {"version": parsing.PARSER_VERSION, "parse_retries": PARSE_RETRIES},
            "images": sends_images(method, judge),
            "inference_run": {"id": inference_run.pk, "mode": inference_run.mode, **inference_run.counts()},
        },
    )
    return run


def trained_protocol(judge: ModelEndpoint, method: str) -> str | None:
    """The protocol a trained step judge (a PEM, ModelEndpoint.judge_prompt) learnt on: the
    reference's when its prompt belongs to a registered reference set (a K12-PEM-style export),
    else the studio's; None for a judge not trained by the studio, or a direct scoring run."""
    if method != ScoringRun.Method.JUDGE_STEPS or judge.judge_prompt is None:
        return None
    return Protocol.REFERENCE if judge.judge_prompt.prompt_set else Protocol.STUDIO


def trained_protocol_error(judge: ModelEndpoint, trained_on: str) -> str:
    # A PEM asked in a layout it never learnt answers nothing its reader takes; refused, not run.
    return gettext(
        "%(judge)s was trained on the prompt %(prompt)s of the %(protocol)s protocol; score with that protocol, "
        "so that it is asked as it learnt"
    ) % {"judge": judge, "prompt": judge.judge_prompt, "protocol": Protocol(trained_on).label}


def _create_reference_scoring_run(
    *, inference_run: InferenceRun, judge: ModelEndpoint, method: str, user: Any, params: dict | None, name: str
) -> ScoringRun:
    """A scoring run of the reference protocol: the registered reference judge prompts (a judge
    trained on a K12-PEM-style export reads those of the set it learnt on, not the newest), no
    structured output, the figure in both modes, the reference's reader and its 10 tries."""
    kind = PROMPT_KIND[ScoringRun.Method(method)]
    trained = judge.judge_prompt if trained_protocol(judge, method) == Protocol.REFERENCE else None
    prompt_set = trained.prompt_set if trained is not None else ""
    try:
        chosen = {
            qtype: reference_register.reference_prompt(kind, qtype, prompt_set=prompt_set)
            for qtype in prompts.QUESTION_TYPES
        }
    except LookupError as exc:
        raise ScoringError(str(exc)) from None
    for template in chosen.values():
        try:
            unknown = reference_prompts.template_fields(template.user_template) - reference_prompts.JUDGE_FIELDS
        except reference_prompts.CheckoutError as exc:
            raise ScoringError(gettext("prompt %(prompt)s: %(error)s") % {"prompt": template, "error": exc}) from None
        if unknown:
            raise ScoringError(
                gettext("prompt %(prompt)s uses %(names)s, which a judge cannot fill")
                % {"prompt": template, "names": ", ".join(sorted(unknown))}
            )
    return ScoringRun.objects.create(
        name=name or f"{judge.name} · {inference_run.name}",
        inference_run=inference_run,
        judge=judge,
        method=method,
        protocol=Protocol.REFERENCE,
        params={**judge.default_params, **(params or {})},
        created_by=user,
        provenance={
            "protocol": Protocol.REFERENCE.value,
            "prompt_set": next(iter(chosen.values())).prompt_set,
            "prompts": {q: {"id": p.pk, "version": p.version, "hash": p.content_hash} for q, p in chosen.items()},
            "judge": {"name": judge.name, "base_url": judge.base_url, "model_name": judge.model_name},
            "response_format": {"json_schema": False, "kind": OUTPUT_KIND[ScoringRun.Method(method)]},
            "parser": {
                "version": reference_judging.reference_reader.READER_VERSION,
                "tries": reference_judging.JUDGE_TRIES,
            },  # fmt: skip
            "images": judge.accepts_images,
            "inference_run": {"id": inference_run.pk, "mode": inference_run.mode, **inference_run.counts()},
        },
    )


@transaction.atomic
def rescore_failed(*, scoring_run: ScoringRun, user: Any) -> Job:
    """Sends judgments whose call failed or whose output was not understood back
    to pending, and runs the job again for them only. Answers that arrived since
    (the inference run's failed items were retried) are judged too."""
    if scoring_run.job is not None and not scoring_run.job.is_finished:
        raise ScoringError(gettext("%(run)s is still running") % {"run": scoring_run})
    try:
        job_queue(scoring_run.judge)  # an offline judge no GPU class holds any more: refused, nothing changed
    except EndpointError as exc:
        raise ScoringError(str(exc)) from None
    judgments = scoring_run.judgments.filter(
        Q(status__in=FAILED_STATUSES) | Q(status=Judgment.Status.NO_RESPONSE, response__status=Response.Status.OK)
    )
    judgments.update(status=Judgment.Status.PENDING, error="", score=None)
    return _start_job(scoring_run, user=user, title=job_text.title("rescore", name=scoring_run.name))


JOB_KINDS: dict[str, str] = {
    ModelEndpoint.Kind.TRANSFORMERS: "inference.score_local",
    ModelEndpoint.Kind.VLLM_OFFLINE: "inference.score_offline",
}


def job_queue(judge: ModelEndpoint) -> str | None:
    """The queue of the judge's scoring jobs when it is not the kind's: an offline engine's GPU
    class (EndpointError when none fits)."""
    return gpu_classes.queue_for(judge) if judge.kind == ModelEndpoint.Kind.VLLM_OFFLINE else None


def _start_job(run: ScoringRun, *, user: Any, title: str | dict, part_of: Job | None = None) -> Job:
    return start_judging(run, user=user, title=title, part_of=part_of)


def start_judging(run: ScoringRun, *, user: Any, title: str | dict, part_of: Job | None = None) -> Job:
    """Starts the scoring run's job on its judge's queue; ``part_of`` a panel's job, whose end it wakes."""
    kind = JOB_KINDS.get(run.judge.kind, "inference.score")
    run.job = start_job(kind=kind, user=user, params={"scoring_run_id": run.pk}, title=title, part_of=part_of,
                        queue=job_queue(run.judge))  # fmt: skip
    run.save(update_fields=["job"])
    return run.job


def coverage(scoring_run: ScoringRun) -> dict[str, Any]:
    """Judgments per status, and how many of the inference run's responses have
    a score. Responses not judged yet count as pending."""
    counts = scoring_run.judgments.aggregate(
        judged=Count("id"), **{status.value: Count("id", filter=Q(status=status)) for status in Judgment.Status}
    )
    total = max(scoring_run.inference_run.responses.count(), counts["judged"])
    counts[Judgment.Status.PENDING.value] += total - counts.pop("judged")
    scored = counts[Judgment.Status.OK.value]
    return {**counts, "scored": scored, "total": total, "coverage": scored / total if total else None}


# --- the job --------------------------------------------------------------------------


def create_missing_judgments(run: ScoringRun) -> int:
    """One pending judgment per response; existing rows are kept, so a restarted
    job resumes where it stopped."""
    ids = Response.objects.filter(run=run.inference_run_id).values_list("id", flat=True).order_by("id")
    return create_missing_rows(Judgment, ids=ids, key="response_id", scoring_run=run)


def mark_missing_answers(run: ScoringRun) -> int:
    """Pending judgments of responses with nothing to judge become NO_RESPONSE:
    no call is made, and the item counts against coverage, not as a 0."""
    rows = run.judgments.filter(status=Judgment.Status.PENDING).values_list(
        "id", "response__status", "response__raw_output"
    )
    missing = [pk for pk, status, output in rows.iterator() if status != Response.Status.OK or not output.strip()]
    for start in range(0, len(missing), 500):
        Judgment.objects.filter(pk__in=missing[start : start + 500], status=Judgment.Status.PENDING).update(
            status=Judgment.Status.NO_RESPONSE, score=None, finished=timezone.now()
        )
    return len(missing)


@job_handler("inference.score", queue=Job.Queue.IO, params=ScoreParams, result=SCORE_RESULT)
def run_scoring_job(job: Job, progress: Progress) -> dict:
    """Judges every pending judgment (of the run, or of its part: run_parts) with at most the
    judge's max_concurrency requests in flight. Safe to run again: finished judgments are skipped."""
    run = ScoringRun.objects.select_related("judge", "inference_run").get(pk=job.params["scoring_run_id"])
    span = run_parts.span_of(job)
    if span is None and in_parts(run, job):
        return finish_whole(run, job, progress)  # parks until its parts have ended
    progress = run_parts.nested_progress(job, progress)
    pending, done_before, total = prepare_judging(run, span, rows_made=True)
    progress(done_before, total)
    async_to_sync(judge_pending)(run, pending, progress, done_before, total)
    return finish_judging(run, job, span)


def in_parts(run: ScoringRun, job: Job) -> bool:
    """For a scoring run's whole job: creates its judgments (NO_RESPONSE where there is nothing to
    judge) and, for a run too large for one worker, starts its part-jobs by judgment-id range, once,
    all or none. True when the job has parts to wait for."""
    with transaction.atomic():
        if run_parts.has_parts(job):
            return True
        create_missing_judgments(run)
        mark_missing_answers(run)
        counted = run_parts.row_spans(run.judgments.all(), settings.RUN_PART_SIZE)
        run_parts.start_part_jobs(job, counted, params={"scoring_run_id": run.pk}, name=run.name)
    return bool(counted)


def finish_whole(run: ScoringRun, job: Job, progress: Progress) -> dict:
    """The whole job's end once its parts have ended (failed or cancelled with them)."""
    run_parts.wait_for_parts(job, progress)
    result = coverage(run)
    progress(result["total"] - result[Judgment.Status.PENDING.value], result["total"])
    standings.take_snapshot(run, job=job)
    return result


def finish_judging(run: ScoringRun, job: Job, span: run_parts.Span | None) -> dict:
    """A job's result once it judged its rows: a part's own counts; for a whole job the run's
    coverage, with the leaderboard's slices stored (it reads these, never the rows)."""
    if span is not None:
        statuses = run_parts.rows_of_judgments(run, span).values_list("status").annotate(n=Count("id"))
        return {"judgments": dict(statuses.order_by())}
    standings.take_snapshot(run, job=job)
    return coverage(run)


LOCAL_BATCH = 16  # judgments per batch on a CPU judge: minutes at most, so progress stays live


@job_handler("inference.score_local", queue=Job.Queue.CPU, params=ScoreParams, result=SCORE_RESULT)
def run_local_scoring_job(job: Job, progress: Progress) -> dict:
    """The same scoring with a transformers judge on this worker's CPU (a trained
    PEM), a batch at a time: each batch is saved before the next. Outputs that
    cannot be read are asked again, at most PARSE_RETRIES times, in the next
    round of the batch."""
    return _score_in_batches(job, progress, engines.local_chat_batch, LOCAL_BATCH)


OFFLINE_BATCH = 256  # conversations per engine call, as an offline inference run's (services.OFFLINE_BATCH)


@job_handler("inference.score_offline", queue=Job.Queue.GPU, params=ScoreParams, result=SCORE_RESULT)
def run_offline_scoring_job(job: Job, progress: Progress) -> dict:
    """The same scoring with vLLM's offline engine on this GPU worker (its class's queue), in
    batches; a large scoring run is split into parts, each judged by a worker of the class."""
    return _score_in_batches(job, progress, engines.chat_batch, OFFLINE_BATCH)


def _score_in_batches(job: Job, progress: Progress, chat_batch: Callable[..., list], batch_size: int) -> dict:
    run = ScoringRun.objects.select_related("judge", "inference_run").get(pk=job.params["scoring_run_id"])
    span = run_parts.span_of(job)
    if span is None and in_parts(run, job):
        return finish_whole(run, job, progress)  # parks until its parts have ended
    progress = run_parts.nested_progress(job, progress)
    pending, done, total = prepare_judging(run, span, rows_made=True)
    progress(done, total)
    # Structured output is an HTTP server's feature; the local engine generates freely.
    params = {k: v for k, v in run.params.items() if k in ALLOWED_PARAMS}
    # The reference judge sets no length or sampling: the model's own (not local_engine's 512 tokens).
    options = {"engine_defaults": True} if run.protocol == Protocol.REFERENCE else {}
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        verdicts = {judgment.pk: Verdict() for judgment in batch}
        asking = list(batch)
        for _ in range(tries(run)):
            if not asking:
                break
            conversations = [judge_messages(run, judgment) for judgment in asking]
            try:
                completions = chat_batch(run.judge, conversations, params, **options)
            except engines.EngineUnavailable as exc:
                for judgment in asking:
                    verdicts[judgment.pk].call_error, verdicts[judgment.pk].call_attempts = str(exc), 1
                break
            still = []
            for judgment, completion in zip(asking, completions, strict=True):
                verdict = verdicts[judgment.pk]
                verdict.completions.append(completion)
                result = read_reply(run.protocol, run.method, completion.text)
                if result.usable:
                    verdict.result = result
                else:
                    verdict.parse_errors.append(result.error)
                    still.append(judgment)
            asking = still
        save_judgments([(j, *judgment_fields(run.method, verdicts[j.pk])) for j in batch])
        done += len(batch)
        progress(done, total)
    return finish_judging(run, job, span)


def prepare_judging(
    run: ScoringRun, span: run_parts.Span | None = None, *, rows_made: bool = False
) -> tuple[list[Judgment], int, int]:
    """Rows for every response, NO_RESPONSE where there is nothing to judge (skipped when the
    whole job made them: in_parts); (pending judgments, judgments done, total) of the run or of
    its part ``span``."""
    if not rows_made:
        create_missing_judgments(run)
        mark_missing_answers(run)
    judgments = run_parts.rows_of_judgments(run, span)
    total = judgments.count()
    done_before = judgments.exclude(status=Judgment.Status.PENDING).count()
    pending = list(judgments.filter(status=Judgment.Status.PENDING).select_related("response__question").order_by("id"))
    return pending, done_before, total


def tries(run: ScoringRun) -> int:
    """Calls at most for one judgment until its reply parses: the reference's 10, else 1 + PARSE_RETRIES."""
    return reference_judging.JUDGE_TRIES if run.protocol == Protocol.REFERENCE else 1 + PARSE_RETRIES


def sends_images(method: str, judge: ModelEndpoint) -> bool:
    # Labelling steps needs the figure (ICE is a misread figure); comparing
    # final answers does not.
    return method == ScoringRun.Method.JUDGE_STEPS and judge.accepts_images


def judge_messages(run: ScoringRun, judgment: Judgment) -> list[dict]:
    response = judgment.response
    question = response.question
    template = PromptTemplate.objects.get(pk=run.provenance["prompts"][question.qtype]["id"])
    if run.protocol == Protocol.REFERENCE:
        record = reference_judging.judge_record(question)
        figures = reference_messages.figure_parts(question) if run.provenance.get("images") else []
        return reference_judging.messages(template, record, response.raw_output, figures)
    system, user = prompts.render(template, question=question, model_answer=response.raw_output)
    image_urls = []
    if run.provenance.get("images"):
        for figure in question.figures.all():
            with figure.image.open("rb") as stored:
                image_urls.append(client.image_data_url(stored.read(), max_side=run.judge.max_image_side))
    return client.build_messages(system=system, user=user, image_urls=image_urls)


def request_params(run: ScoringRun) -> dict[str, Any]:
    params = {k: v for k, v in run.params.items() if k in ALLOWED_PARAMS}
    if run.provenance["response_format"]["json_schema"]:
        params["response_format"] = parsing.response_format(run.provenance["response_format"]["kind"])
    return params


def parse_steps(text: str | None) -> parsing.ParseResult:
    result = parsing.parse_step_judgment(text)
    if result.usable and not result.value["steps"]:
        # Correct steps / steps has no value without steps; never a 0.
        return parsing.ParseResult(parsing.ParseStatus.FAILED, error="the judgment lists no steps")
    return result


PARSERS: dict[str, Callable[[str | None], parsing.ParseResult]] = {
    ScoringRun.Method.JUDGE_DIRECT: parsing.parse_direct_judgment,
    ScoringRun.Method.JUDGE_STEPS: parse_steps,
}


def read_reply(protocol: str, method: str, text: str | None, record: dict | None = None) -> parsing.ParseResult:
    """A judge's reply read by the protocol's reader: the scoring jobs and score_replies call this.
    ``record`` (the question in the reference record format) matters to the reference's direct
    reader only, which fails a record without ground truth as the reference does."""
    if protocol == Protocol.REFERENCE:
        return reference_judging.read_reply(method, text, record)
    return PARSERS[method](text)


def score_reply(protocol: str, method: str, text: str | None, record: dict | None = None):
    """What a judgment would hold for this one reply (status, score, steps): the job's own
    reading and scoring, without a call or a row."""
    verdict = Verdict(completions=[client.Completion(text or "", 0, None, None, "", 1)])
    result = read_reply(protocol, method, text, record)
    if result.usable:
        verdict.result = result
    else:
        verdict.parse_errors.append(result.error)
    return judgment_fields(method, verdict)


@dataclass
class Verdict:
    """Everything the judge said about one response, over all its calls."""

    completions: list[client.Completion] = field(default_factory=list)
    parse_errors: list[str] = field(default_factory=list)
    result: parsing.ParseResult | None = None
    call_error: str = ""
    call_attempts: int = 0

    @property
    def attempts(self) -> int:
        return sum(c.attempts for c in self.completions) + self.call_attempts


async def ask_judge(caller: calls.Caller, *, run: ScoringRun, messages: list[dict], params: dict) -> Verdict:
    """Calls the judge until its output parses, at most ``tries(run)`` times."""
    verdict = Verdict()
    for _ in range(tries(run)):
        try:
            completion = await caller.complete(messages, params)
        except client.ModelCallError as exc:
            verdict.call_error, verdict.call_attempts = str(exc), exc.attempts
            return verdict
        verdict.completions.append(completion)
        result = read_reply(run.protocol, run.method, completion.text)
        if result.usable:
            verdict.result = result
            return verdict
        verdict.parse_errors.append(result.error)
    return verdict


def judgment_fields(method: str, verdict: Verdict) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The judgment's new fields and its steps, from what the judge said."""
    last = verdict.completions[-1] if verdict.completions else None
    fields: dict[str, Any] = {
        "finished": timezone.now(),
        "attempts": verdict.attempts,
        "raw_output": last.text if last else "",
        # Usage over every call made for this judgment: what it cost.
        "latency_ms": sum(c.latency_ms for c in verdict.completions) if last else None,
        "prompt_tokens": _total(c.prompt_tokens for c in verdict.completions),
        "completion_tokens": _total(c.completion_tokens for c in verdict.completions),
        "finish_reason": last.finish_reason if last else "",
        "score": None,
        "parsed": None,
        "reference_answers": [],
        "model_answers": [],
        "item_scores": [],
        "error": "",
    }
    earlier = [f"call {n} not understood: {error}" for n, error in enumerate(verdict.parse_errors, 1)]
    if verdict.call_error:
        fields |= {"status": Judgment.Status.CALL_FAILED, "error": verdict.call_error, "parse_notes": earlier}
        fields["parse_status"] = parsing.ParseStatus.FAILED if earlier else ""
        return fields, []
    result = verdict.result
    if result is None:
        fields |= {
            "status": Judgment.Status.PARSE_FAILED, "parse_status": parsing.ParseStatus.FAILED,
            "error": verdict.parse_errors[-1], "parse_notes": earlier,
        }  # fmt: skip
        return fields, []
    fields |= {
        "status": Judgment.Status.OK, "parsed": result.value, "parse_status": result.status,
        "parse_notes": earlier + list(result.notes),
    }  # fmt: skip
    # The reference's readers give their own score (its reading can stop before the last step).
    given = result.value.get("score")
    if method == ScoringRun.Method.JUDGE_DIRECT:
        scores = result.value["scores"]
        fields |= {
            "reference_answers": result.value["reference_answers"], "model_answers": result.value["model_answers"],
            "item_scores": scores, "score": fmean(scores) if given is None else given,
        }  # fmt: skip
        return fields, []
    steps = result.value["steps"]
    fields["score"] = sum(step["label"] == CORRECT for step in steps) / len(steps) if given is None else given
    return fields, steps


def _total(values) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@transaction.atomic
def save_judgments(batch: list[tuple[Judgment, dict[str, Any], list[dict[str, str]]]]) -> None:
    """Saves judgments with their steps: one transaction and a few statements for the whole
    batch, through calls.update_rows as inference runs save their answers. Only judgments still
    pending are written, locked first, so one finished meanwhile (another job on the same run)
    is left as it is; their steps are replaced in the same transaction, never duplicated."""
    if not batch:
        return
    pending = Judgment.objects.select_for_update().filter(pk__in=[j.pk for j, _f, _s in batch],
                                                          status=Judgment.Status.PENDING)  # fmt: skip
    # Locked in id order: two jobs on one run then never wait on each other in a circle.
    claimed = set(pending.order_by("pk").values_list("pk", flat=True))
    mine = [(judgment, fields, steps) for judgment, fields, steps in batch if judgment.pk in claimed]
    calls.update_rows(Judgment, [(judgment.pk, fields) for judgment, fields, _steps in mine])
    if claimed:
        JudgedStep.objects.filter(judgment_id__in=claimed).delete()
    JudgedStep.objects.bulk_create([
        JudgedStep(judgment_id=judgment.pk, position=n, text=s["step"], label=s["label"], reason=s["reason"])
        for judgment, _fields, steps in mine
        for n, s in enumerate(steps, 1)
    ])  # fmt: skip


async def judge_pending(run: ScoringRun, pending: list[Judgment], progress: Progress, done: int, total: int):
    params = request_params(run)
    build = sync_to_async(judge_messages, thread_sensitive=True)
    caller = calls.Caller(run.judge)

    async def judge_one(judgment: Judgment) -> tuple[Judgment, dict[str, Any], list[dict[str, str]]]:
        messages = await build(run, judgment)
        verdict = await ask_judge(caller, run=run, messages=messages, params=params)
        fields, steps = judgment_fields(run.method, verdict)
        return judgment, fields, steps

    try:
        await calls.fan_out(pending, judge_one, concurrency=run.judge.call_limit, save=save_judgments,
                            progress=progress, done=done, total=total)  # fmt: skip
    finally:
        await caller.close()
