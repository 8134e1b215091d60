"""The difficulty filters (paper section 3.2): which questions every chosen
filter run solved, the preview of what the paper's rule removes and why, and
the confirmation that rejects them as a job."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext, gettext_noop

from annotation import services as bank
from annotation.models import Question
from inference.assist import FILTER_KINDS, Kind, Status, counts
from inference.job_shapes import ConfirmFiltersParams, ConfirmFiltersResult
from inference.models import AssistResult, AssistRun
from k12vista import job_text
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.line_reasons import ReasonError, reason_templates, reason_text, reason_wording
from k12vista.line_reasons import reason as refusal
from k12vista.models import Job


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


class FilterError(ReasonError):
    """A choice of runs the filters cannot use; the message says which run and why. Its reason is a code
    (k12vista.line_reasons): the confirming job stores it, worded in each reader's language."""


class StaleConfirmation(FilterError):
    """The candidates changed between the preview and the confirmation."""


reason_templates({
    "filters_no_runs": gettext_noop("choose at least one small-model run or a text-only run"),
    "filters_run_twice": gettext_noop("a run was chosen twice"),
    "filters_not_small": gettext_noop("%(name)s (run %(id)s) is not a small-model difficulty run"),
    "filters_not_text_only": gettext_noop("%(name)s (run %(id)s) is not a text-only run"),
    "filters_not_scored": gettext_noop("%(name)s (run %(id)s) is not scored: no answer of it could be checked"),
    "filters_stale": gettext_noop("the questions to remove changed since the preview (%(n)s now); look again"),
})  # fmt: skip


@reason_wording("filters_unfinished")
def _unfinished(params: dict[str, Any]) -> str:
    status = params["status"]
    state = str(Job.Status(status).label) if status in Job.Status.values else gettext("not started")
    return gettext("%(name)s (run %(id)s) is not finished: job %(state)s, %(pending)s questions pending") % {
        **params, "state": state,
    }  # fmt: skip


@reason_wording("filters_problems")
def _problems(params: dict[str, Any]) -> str:
    return "; ".join(reason_text(problem) for problem in params["problems"])


def _solved(run: AssistRun):
    return AssistResult.objects.filter(run=run, status=Status.OK, parsed__correct=True).values("question_id")


def check_filter_runs(small_runs: list[AssistRun], text_only_run: AssistRun | None) -> None:
    """Refuses runs of the wrong kind, runs still going (or failed, cancelled)
    and runs with no verdict at all, naming each."""
    runs = [*small_runs, *([text_only_run] if text_only_run else [])]
    if not runs:
        raise FilterError(refusal("filters_no_runs"))
    if len({run.pk for run in runs}) != len(runs):
        raise FilterError(refusal("filters_run_twice"))
    problems = [
        refusal("filters_not_small", name=run.name, id=run.pk)
        for run in small_runs
        if run.kind != Kind.SMALL_MODEL_FILTER
    ]
    if text_only_run and text_only_run.kind != Kind.TEXT_ONLY_FILTER:
        problems.append(refusal("filters_not_text_only", name=text_only_run.name, id=text_only_run.pk))
    for run in runs:
        tally = counts(run)
        job_status = run.job.status if run.job else None
        if job_status != Job.Status.SUCCEEDED or tally["pending"]:
            problems.append(refusal("filters_unfinished", name=run.name, id=run.pk, status=job_status or "",
                                   pending=tally["pending"]))  # fmt: skip
        elif not run.results.filter(status=Status.OK, parsed__has_key="correct").exists():
            problems.append(refusal("filters_not_scored", name=run.name, id=run.pk))
    if problems:
        raise FilterError(refusal("filters_problems", problems=problems))


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
    unchecked: dict[int, int]  # run id -> questions without a verdict (failed, unreadable, no reference answer)

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
    if (run := preview.text_only_run) is not None and question_id in preview.text_only_ids:
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
        raise StaleConfirmation(refusal("filters_stale", n=len(preview.candidates)))
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
        raise StaleConfirmation(refusal("filters_stale", n=len(preview.candidates)))
    params = {"small": [run.pk for run in small_runs], "text_only": text_only_run.pk if text_only_run else None,
              "fingerprint": fingerprint}  # fmt: skip
    return start_job(kind=CONFIRM_JOB_KIND, user=user, params=params,
                     title=job_text.title("reject_difficulty", n=len(preview.to_remove)))  # fmt: skip


@job_handler(CONFIRM_JOB_KIND, queue=Job.Queue.CPU, params=ConfirmFiltersParams, result=ConfirmFiltersResult)
def confirm_filters_job(job: Job, progress: Progress) -> dict:
    """Safe to run again: questions already rejected are left as they are."""
    runs = AssistRun.objects.select_related("endpoint", "job")
    order = job.params["small"]
    small = sorted(runs.filter(pk__in=order), key=lambda run: order.index(run.pk))
    text_only = runs.get(pk=job.params["text_only"]) if job.params.get("text_only") else None
    rejected = confirm_filters(small_runs=small, text_only_run=text_only, fingerprint=job.params["fingerprint"],
                               user=job.started_by, progress=progress)  # fmt: skip
    return {"rejected": rejected}
