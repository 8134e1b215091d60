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

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.translation import gettext

from annotation import checks
from annotation import services as bank
from annotation.models import Flag, Question, StepProposal
from inference import calls, client, parsing, prompts
from inference.default_prompts import BLANK_SEPARATOR, FINAL_ANSWER_PREFIX, STRUCTURE_PROBLEMS
from inference.models import AssistResult, AssistRun, Caption, ModelEndpoint, PromptTemplate
from inference.services import ALLOWED_PARAMS, EndpointError, create_missing_rows, require_api_key
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.models import Job
from k12vista.vocabulary import QuestionType

JOB_KIND = "inference.assist"
Kind = AssistRun.Kind
Status = AssistResult.Status

PROMPT_KIND = {
    Kind.RESTRUCTURE: PromptTemplate.Kind.RESTRUCTURE,
    Kind.CHECK_STRUCTURE: PromptTemplate.Kind.CHECK_STRUCTURE,
    Kind.CAPTION: PromptTemplate.Kind.CAPTION,
    Kind.SMALL_MODEL_FILTER: PromptTemplate.Kind.ANSWER_DIRECT,
    Kind.TEXT_ONLY_FILTER: PromptTemplate.Kind.ANSWER_DIRECT,
}
# Kinds whose answer is JSON, and the parsing kind (and schema) for each.
OUTPUT_KIND = {Kind.RESTRUCTURE: "restructured_solution", Kind.CHECK_STRUCTURE: "structure_check"}
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
        raise EndpointError(f"unknown assist kind {kind!r}")
    if not endpoint.active:
        raise EndpointError(f"endpoint {endpoint} is switched off")
    require_api_key(endpoint)
    if endpoint.kind != ModelEndpoint.Kind.OPENAI:
        raise EndpointError(f"{endpoint.get_kind_display()} endpoints run on their own workers (not built yet)")
    if kind in (Kind.CAPTION, Kind.SMALL_MODEL_FILTER) and not endpoint.accepts_images:
        raise EndpointError(f"{Kind(kind).label} needs an endpoint that accepts images; {endpoint} does not")
    prompts.ensure_default_prompts()
    # Keyed by question type for every kind, so that items look their prompt up
    # the same way (type-free prompts simply repeat).
    chosen = {qtype: prompts.current(PROMPT_KIND[kind], qtype) for qtype in prompts.QUESTION_TYPES}
    questions = Question.objects.matching(filters)
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


def retry_failed(*, run: AssistRun, user: Any) -> Job:
    """Sends items whose call failed back to pending and runs the job again for them only."""
    run.results.filter(status=Status.CALL_FAILED).update(status=Status.PENDING, error="")
    run.job = start_job(
        kind=JOB_KIND, user=user, params={"run_id": run.pk}, title=gettext("%(name)s (retry)") % {"name": run.name}
    )
    run.save(update_fields=["job"])
    return run.job


def counts(run: AssistRun) -> dict[str, int]:
    return run.results.aggregate(
        total=Count("id"),
        ok=Count("id", filter=Q(status=Status.OK)),
        parse_failed=Count("id", filter=Q(status=Status.PARSE_FAILED)),
        call_failed=Count("id", filter=Q(status=Status.CALL_FAILED)),
        pending=Count("id", filter=Q(status=Status.PENDING)),
    )


def solved_by_all(runs: list[AssistRun]):
    """Questions that every given filter run answered correctly: the refine
    stage's candidates for dropping (the paper drops a question only when all
    three small models solve it). People decide; nothing is dropped here."""
    if not runs or any(run.kind not in FILTER_KINDS for run in runs):
        raise ValueError("solved_by_all takes one or more difficulty filter runs")
    questions = Question.objects.all()
    for run in runs:
        solved = AssistResult.objects.filter(run=run, status=Status.OK, parsed__correct=True)
        questions = questions.filter(pk__in=solved.values("question_id"))
    return questions


def create_missing_results(run: AssistRun) -> int:
    """One pending row per question of the run; existing rows are kept."""
    ids = Question.objects.matching(run.filters).values_list("id", flat=True).order_by("id")
    return create_missing_rows(AssistResult, ids=ids, run=run)


# --- the job ------------------------------------------------------------------------


@job_handler(JOB_KIND, queue=Job.Queue.IO)
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
    return counts(run)


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

    @transaction.atomic
    def save(batch: list[tuple[AssistResult, Any]]) -> None:
        # One transaction per batch; each write-back keeps its own savepoint (save_output).
        for result, outcome in batch:
            if outcome is None:
                save_skipped(run, result)
            elif isinstance(outcome, client.ModelCallError):
                save_call_failure(result, outcome)
            else:
                save_output(run, result, outcome)

    try:
        await calls.fan_out(pending, process, concurrency=run.endpoint.max_concurrency, save=save,
                            progress=progress, done=done, total=total)  # fmt: skip
    finally:
        await caller.close()


# --- requests -----------------------------------------------------------------------


def skip_reason(run: AssistRun, question: Question) -> str:
    """Why an item needs no call ("" when it does)."""
    if run.kind == Kind.RESTRUCTURE and not question.raw_solution.strip():
        return "the question has no raw solution to restructure"
    if run.kind == Kind.CAPTION and not question.figures.exists():
        return "the question has no figure"
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


def _finish(result: AssistResult, **fields: Any) -> None:
    AssistResult.objects.filter(pk=result.pk).update(finished=timezone.now(), **fields)


def save_skipped(run: AssistRun, result: AssistResult) -> None:
    _finish(result, status=Status.OK, parsed={"skipped": skip_reason(run, result.question)}, error="")


def save_call_failure(result: AssistResult, exc: client.ModelCallError) -> None:
    _finish(result, status=Status.CALL_FAILED, error=str(exc), attempts=exc.attempts)


@transaction.atomic
def save_output(run: AssistRun, result: AssistResult, completion: client.Completion) -> None:
    """Reads the output and writes it back, in one transaction with the row's update."""
    fields: dict[str, Any] = {"raw_output": completion.text, "attempts": completion.attempts}
    question = result.question
    try:
        parsed = read_output(run, question, completion.text)
    except UnreadableOutput as exc:
        _finish(result, status=Status.PARSE_FAILED, parsed=None, error=str(exc), **fields)
        return
    try:
        with transaction.atomic():
            WRITE_BACK[run.kind](run, question, parsed)
    except bank.QuestionDataError as exc:  # the bank refused what the model said
        _finish(result, status=Status.PARSE_FAILED, parsed=parsed, error=str(exc), **fields)
        return
    _finish(result, status=Status.OK, parsed=parsed, error="", **fields)


class UnreadableOutput(ValueError):
    pass


_THINK_END = "</think>"


def _answer_text(text: str) -> str:
    # A reasoning model's drafts come before </think>; the answer after it.
    return text.rsplit(_THINK_END, 1)[-1].strip()


def read_output(run: AssistRun, question: Question, text: str) -> dict:
    """What the model said, as stored in AssistResult.parsed; UnreadableOutput when nothing usable."""
    if run.kind in OUTPUT_KIND:
        result = parsing.parse(OUTPUT_KIND[run.kind], text)
        if not result.usable:
            raise UnreadableOutput(result.error)
        return {**result.value, "parse_status": str(result.status), "parse_notes": result.notes}
    if run.kind == Kind.CAPTION:
        caption = _answer_text(text)
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


WRITE_BACK = {
    Kind.RESTRUCTURE: _write_proposal,
    Kind.CHECK_STRUCTURE: _write_problems,
    Kind.CAPTION: _write_caption,
    Kind.SMALL_MODEL_FILTER: _write_verdict,
    Kind.TEXT_ONLY_FILTER: _write_verdict,
}


# --- the difficulty filters: is a direct answer correct? -----------------------------
#
# A deliberately simple comparison, good enough to *flag* easy questions for a
# person to look at, never to score a model (scoring runs use a judge model):
#
# * multiple choice: the option letter at the start of the final answer
#   ("B", "B．$2$", "(B)", "选B"); an answer naming the option's content instead of
#   its letter counts when it equals exactly one option's text after
#   normalisation.
# * fill-in-blank and free response: the final answer split into parts (at "；",
#   ";" or line breaks, sub-question numbers such as "（1）" removed) must have as
#   many parts as the reference, each equal after normalisation: NFKC (full-width
#   to ASCII), no spaces or $ delimiters, no \left \right \, \dfrac->\frac, no
#   trailing full stop, case folded; numbers compare as numbers (0.5 = 0.50).
#
# Limits: no symbolic or unit equivalence (1/2 vs 0.5, \frac{1}{2} vs 0.5, 50 cm
# vs 0.5 m all count as different), blanks must come in order, and a long
# free-response conclusion almost never matches word for word. Every one of
# these errs towards "not correct", which keeps a question rather than flagging
# it: the safe direction for a filter whose flags lead people to drop items.

_FINAL = re.compile(re.escape(FINAL_ANSWER_PREFIX.rstrip("：")) + r"\s*[:：]?")
_LETTER = re.compile(r"^[\s$(（\[【]*(?:答案[是为]?\s*[:：]?\s*)?(?:选\s*)?([A-D])(?![A-Za-z])")
_PART_SPLIT = re.compile(rf"[{BLANK_SEPARATOR};\n]+")
# Sub-question and blank numbers before a part: （1） (1) 1. 1、 第1空：, but not the 6 of "6.0".
_SUB_NUMBER = re.compile(
    r"^\s*(?:[(（]\s*\d+\s*[)）]|\d+\s*(?:[.．](?!\d)|[、:：)）])|第\s*\d+\s*(?:空|问|小问)\s*[:：]?)\s*"
)
_LATEX_NOISE = re.compile(r"\\left|\\right|\\[,;! ]|\\displaystyle")


def final_answer(text: str) -> str:
    """The text after the last "最终答案：", or the whole answer when there is none."""
    answer = _answer_text(text)
    found = list(_FINAL.finditer(answer))
    return answer[found[-1].end() :].strip() if found else answer


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", str(text)).strip()
    text = _LATEX_NOISE.sub("", text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = re.sub(r"[\s$]+", "", text).rstrip("。.")
    return text.casefold()


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _choice(question: Question, answer: str) -> str | None:
    if match := _LETTER.match(unicodedata.normalize("NFKC", answer)):
        return match.group(1).upper()
    by_text = [o.get("label", "") for o in question.options if _same(normalise(o.get("text", "")), normalise(answer))]
    return by_text[0].upper() if len(by_text) == 1 else None


def judge_answer(question: Question, text: str) -> dict:
    """The verdict of a direct answer against the reference answers (see above)."""
    answer = final_answer(text)
    if not answer:
        raise UnreadableOutput("empty answer")
    reference = [str(a) for a in question.answers]
    if question.qtype == QuestionType.MULTIPLE_CHOICE:
        letter = _choice(question, answer)
        if letter is None:
            raise UnreadableOutput(f"no option letter in the final answer {answer[:200]!r}")
        given = [letter]
        correct = len(reference) == 1 and letter == normalise(reference[0]).upper()
        method = "choice"
    else:
        given = [_SUB_NUMBER.sub("", part).strip() for part in _PART_SPLIT.split(answer)]
        given = [part for part in given if part]
        correct = len(given) == len(reference) > 0 and all(
            _same(normalise(g), normalise(r)) for g, r in zip(given, reference, strict=True)
        )
        method = "short_answer"
    return {"final_answer": answer, "model_answers": given, "reference": reference, "correct": correct,
            "method": method}  # fmt: skip


# --- confirming the difficulty filters (paper section 3.2) ------------------------------
#
# The filter runs above only flag. Here a researcher picks the small-model runs
# and (or) a text-only run, sees which questions the paper's rule would remove
# and why, and confirms: each one is then rejected through the question bank's
# own service, with the evidence as the reason. Questions already rejected are
# left as they are, so confirming twice changes nothing; released questions are
# never removed (a release is frozen; a person retires them deliberately).

SMALL_RULE = "small_models"
TEXT_ONLY_RULE = "text_only"


class FilterError(ValueError):
    """A choice of runs the filters cannot use; the message says which run and why."""


class StaleConfirmation(FilterError):
    """The candidates changed between the preview and the confirmation."""


def _solved(run: AssistRun):
    return AssistResult.objects.filter(run=run, status=Status.OK, parsed__correct=True).values("question_id")


def check_filter_runs(small_runs: list[AssistRun], text_only_run: AssistRun | None) -> None:
    """Refuses runs of the wrong kind, runs still going (or failed, cancelled)
    and runs with no verdict at all, naming each."""
    runs = [*small_runs, *([text_only_run] if text_only_run else [])]
    if not runs:
        raise FilterError("choose at least one small-model run or a text-only run")
    if len({run.pk for run in runs}) != len(runs):
        raise FilterError("a run was chosen twice")
    problems = [
        f"{run.name} (run {run.pk}) is not a small-model difficulty run"
        for run in small_runs
        if run.kind != Kind.SMALL_MODEL_FILTER
    ]
    if text_only_run and text_only_run.kind != Kind.TEXT_ONLY_FILTER:
        problems.append(f"{text_only_run.name} (run {text_only_run.pk}) is not a text-only run")
    for run in runs:
        tally = counts(run)
        job_status = run.job.status if run.job else None
        if job_status != Job.Status.SUCCEEDED or tally["pending"]:
            state = Job.Status(job_status).label if job_status else "not started"
            problems.append(
                f"{run.name} (run {run.pk}) is not finished: job {state}, {tally['pending']} questions pending"
            )
        elif not run.results.filter(status=Status.OK, parsed__has_key="correct").exists():
            problems.append(f"{run.name} (run {run.pk}) is not scored: no answer of it could be checked")
    if problems:
        raise FilterError("; ".join(problems))


@dataclass(frozen=True)
class FilterPreview:
    """What confirming would do. ``candidates`` are every question a rule
    catches (ids, sorted); ``to_remove`` the ones confirming would reject."""

    small_runs: tuple[AssistRun, ...]
    text_only_run: AssistRun | None
    candidates: tuple[int, ...]
    small_ids: frozenset[int]
    text_only_ids: frozenset[int]
    to_remove: tuple[int, ...]
    already_rejected: int
    released: int
    unchecked: dict[int, int]  # run id -> questions without a verdict (failed calls, unreadable answers)

    @property
    def fingerprint(self) -> str:
        """Names the runs and the candidates: a confirmation carries it, so that
        it rejects exactly what the researcher saw counted."""
        text = json.dumps([sorted(r.pk for r in self.small_runs),
                           self.text_only_run.pk if self.text_only_run else None, self.candidates])  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()

    def rules_for(self, question_id: int) -> list[str]:
        return [rule for rule, ids in ((SMALL_RULE, self.small_ids), (TEXT_ONLY_RULE, self.text_only_ids))
                if question_id in ids]  # fmt: skip


def preview_filters(small_runs: list[AssistRun], text_only_run: AssistRun | None) -> FilterPreview:
    """The questions every small model solved, and those the text-only run
    solved, for a person to look at before anything is removed."""
    check_filter_runs(small_runs, text_only_run)
    small_ids = set(solved_by_all(small_runs).values_list("id", flat=True)) if small_runs else set()
    text_ids = set(_solved(text_only_run).values_list("question_id", flat=True)) if text_only_run else set()
    candidates = tuple(sorted(small_ids | text_ids))
    statuses = dict(Question.objects.filter(pk__in=candidates).values_list("id", "status"))
    kept = (Question.Status.REJECTED, Question.Status.RELEASED)
    to_remove = tuple(pk for pk in candidates if statuses[pk] not in kept)
    unchecked = {}
    for run in [*small_runs, *([text_only_run] if text_only_run else [])]:
        missing = run.results.exclude(status=Status.OK, parsed__has_key="correct").count()
        if missing:
            unchecked[run.pk] = missing
    return FilterPreview(
        small_runs=tuple(small_runs), text_only_run=text_only_run, candidates=candidates,
        small_ids=frozenset(small_ids), text_only_ids=frozenset(text_ids), to_remove=to_remove,
        already_rejected=sum(statuses[pk] == Question.Status.REJECTED for pk in candidates),
        released=sum(statuses[pk] == Question.Status.RELEASED for pk in candidates), unchecked=unchecked,
    )  # fmt: skip


def filter_evidence(preview: FilterPreview, *, limit: int = 200) -> list[dict[str, Any]]:
    """The first ``limit`` candidates with each chosen run's verdict and answer."""
    shown = preview.candidates[:limit]
    runs = [*preview.small_runs, *([preview.text_only_run] if preview.text_only_run else [])]
    results = AssistResult.objects.filter(run__in=runs, question_id__in=shown).only(
        "run_id", "question_id", "status", "parsed"
    )
    by_key = {(r.run_id, r.question_id): r for r in results}
    rows = []
    for question in Question.objects.filter(pk__in=shown).order_by("id"):
        verdicts = []
        for run in runs:
            result = by_key.get((run.pk, question.pk))
            parsed = result.parsed if result and isinstance(result.parsed, dict) else {}
            verdicts.append({"run": run, "correct": parsed.get("correct"), "answer": parsed.get("final_answer", ""),
                             "status": result.status if result else None})  # fmt: skip
        rows.append({"question": question, "rules": preview.rules_for(question.pk), "verdicts": verdicts,
                     "removed": question.status == Question.Status.REJECTED,
                     "released": question.status == Question.Status.RELEASED})  # fmt: skip
    return rows


def rejection_reason(preview: FilterPreview, question_id: int) -> str:
    parts = []
    if question_id in preview.small_ids:
        names = ", ".join(f"{r.endpoint.model_name} (run {r.pk})" for r in preview.small_runs)
        parts.append(f"difficulty filter: every small model answered correctly: {names}")
    if question_id in preview.text_only_ids:
        run = preview.text_only_run
        parts.append(f"image-dependence filter: {run.endpoint.model_name} (run {run.pk}) answered correctly "
                     "without the image")  # fmt: skip
    return "; ".join(parts)


CONFIRM_JOB_KIND = "inference.confirm_filters"


def confirm_filters(
    *,
    small_runs: list[AssistRun],
    text_only_run: AssistRun | None,
    fingerprint: str,
    user: Any,
    progress: Progress | None = None,
) -> int:
    """Rejects what :func:`preview_filters` showed, through the question bank's
    set-based service (one UPDATE and one bulk insert of history rows per
    batch and rule); returns how many questions were rejected now (0 the
    second time). Questions rejected or released meanwhile are left alone."""
    preview = preview_filters(small_runs, text_only_run)
    if preview.fingerprint != fingerprint:
        raise StaleConfirmation(
            f"the questions to remove changed since the preview ({len(preview.candidates)} now); look again"
        )
    by_reason: dict[str, list[int]] = {}
    for pk in preview.to_remove:
        by_reason.setdefault(rejection_reason(preview, pk), []).append(pk)
    total, done, rejected = len(preview.to_remove), 0, 0
    for reason, ids in by_reason.items():
        offset = done

        def report(n: int, _total: int | None = None, offset: int = offset) -> None:
            if progress is not None:
                progress(offset + n, total)

        rejected += bank.reject_many(ids, reason=reason, user=user, progress=report,
                                     keep=(Question.Status.REJECTED, Question.Status.RELEASED))  # fmt: skip
        done += len(ids)
    if progress is not None:
        progress(total, total)
    return rejected


def start_confirm_filters(
    *, small_runs: list[AssistRun], text_only_run: AssistRun | None, fingerprint: str, user: Any
) -> Job:
    """Checks the confirmation against the preview now (a stale one is refused
    at once) and leaves the rejecting to a job."""
    preview = preview_filters(small_runs, text_only_run)
    if preview.fingerprint != fingerprint:
        raise StaleConfirmation(
            f"the questions to remove changed since the preview ({len(preview.candidates)} now); look again"
        )
    params = {"small": [run.pk for run in small_runs], "text_only": text_only_run.pk if text_only_run else None,
              "fingerprint": fingerprint}  # fmt: skip
    return start_job(kind=CONFIRM_JOB_KIND, user=user, params=params,
                     title=gettext("Reject %(n)d questions (difficulty filters)")
                     % {"n": len(preview.to_remove)})  # fmt: skip


@job_handler(CONFIRM_JOB_KIND, queue=Job.Queue.CPU)
def confirm_filters_job(job: Job, progress: Progress) -> dict:
    """Safe to run again: questions already rejected are left as they are."""
    runs = AssistRun.objects.select_related("endpoint", "job")
    order = job.params["small"]
    small = sorted(runs.filter(pk__in=order), key=lambda run: order.index(run.pk))
    text_only = runs.get(pk=job.params["text_only"]) if job.params.get("text_only") else None
    rejected = confirm_filters(small_runs=small, text_only_run=text_only, fingerprint=job.params["fingerprint"],
                               user=job.started_by, progress=progress)  # fmt: skip
    return {"rejected": rejected}
