"""Campaigns: many models answering one question set (PIPELINE.md stage 7).

A researcher picks a question set (a run's filters), the endpoints (the paper
used about forty models), the mode and the sampling, and starts one campaign:
one inference run per endpoint, all with the same frozen question set, mode,
sampling and seed. Starting it is **one job** (``inference.campaign``, on the
io queue) with progress over all its runs: it answers every HTTP run in one
event loop, each with its own caller, and starts the engine runs (vLLM
offline, transformers) as jobs on their GPU or CPU queues, since those need
that worker, as parts of itself. It ends when its last run ends: with its HTTP
runs answered it parks (no worker waits), and each engine run's job wakes it
as it ends (k12vista.jobs.Progress.wait_for_parts). Run again after a crash it
resumes (answered questions are skipped; an engine run with a job keeps it);
cancelling it stops its HTTP runs and cancels the engine runs' jobs, and an
engine run that fails fails it. The campaign shows the runs together:
progress, failures and tokens spent, per model and in total. The
per-endpoint limit holds across the runs (inference.calls), shared fairly
between runs on one endpoint.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils.translation import gettext

from inference import calls, services
from inference.job_shapes import CampaignParams, CampaignResult
from inference.models import Campaign, InferenceRun, ModelEndpoint, Protocol, Response
from k12vista import job_text
from k12vista.job_text import JobFailure, failure_wording
from k12vista.jobs import JobCancelled, JobLost, Progress, job_handler, start_job
from k12vista.models import PARKED, Job

JOB_KIND = "inference.campaign"


class CampaignError(ValueError):
    """A campaign that cannot start; the message says why."""


@transaction.atomic
def start_campaign(
    *, name: str, endpoints: list[ModelEndpoint], mode: str, filters: dict, user: Any,
    input_form: str = InferenceRun.InputForm.IMAGES, params: dict | None = None, seed: int | None = None,
    protocol: str = Protocol.STUDIO, prompt_set: str = "",
) -> Campaign:  # fmt: skip
    """Records the campaign and starts one run per endpoint, all or none: an
    endpoint that cannot run (switched off, key missing) refuses the campaign
    before any job is queued (jobs are queued when the transaction commits)."""
    name = name.strip()[:200]
    if not name:
        raise CampaignError(gettext("a campaign needs a name"))
    if not endpoints:
        raise CampaignError(gettext("choose at least one endpoint"))
    if len({endpoint.pk for endpoint in endpoints}) != len(endpoints):
        raise CampaignError(gettext("each endpoint can run once in a campaign"))
    if mode not in InferenceRun.Mode.values:
        raise CampaignError(gettext("unknown mode %(mode)r") % {"mode": mode})
    if protocol not in Protocol.values:
        raise CampaignError(gettext("unknown protocol %(protocol)r") % {"protocol": protocol})
    campaign = Campaign.objects.create(name=name, filters=filters, mode=mode, input_form=input_form,
                                       params=params or {}, seed=seed, created_by=user, protocol=protocol)  # fmt: skip
    campaign.job = start_job(
        kind=JOB_KIND, user=user, params={"campaign_id": campaign.pk}, title=job_text.title("campaign", name=name)
    )
    campaign.save(update_fields=["job"])
    for endpoint in endpoints:  # each checks its endpoint, then the questions (NoQuestions: none match)
        run = services.create_inference_run(endpoint=endpoint, mode=mode, filters=filters, user=user,
                                            input_form=input_form, params=params, seed=seed,
                                            name=f"{name} · {endpoint.name}", protocol=protocol,
                                            prompt_set=prompt_set)  # fmt: skip
        run.campaign = campaign
        # An HTTP run is answered by the campaign's job, so its page follows that job.
        run.job = campaign.job if answered_in_campaign_job(endpoint) else None
        run.save(update_fields=["campaign", "job"])
    if protocol == Protocol.REFERENCE:  # the set the runs froze (the newest, when none was named)
        campaign.prompt_set = run.provenance.get("prompt_set", prompt_set)
        campaign.save(update_fields=["prompt_set"])
    return campaign


def answered_in_campaign_job(endpoint: ModelEndpoint) -> bool:
    return endpoint.kind == ModelEndpoint.Kind.OPENAI


# Seconds between two reads of the engine runs' progress while the HTTP runs are answered.
ENGINE_PROGRESS_SECONDS = 2.0
RUNS_FAILED = "inference.campaign_runs_failed"


@job_handler(JOB_KIND, queue=Job.Queue.IO, params=CampaignParams, result=CampaignResult)
def run_campaign_job(job: Job, progress: Progress) -> dict:
    """Starts the engine runs' jobs (once, as parts of this job), answers every
    HTTP run at once, then waits for the engine runs without holding a worker:
    the job parks, and the end of each engine run's job wakes it, so the
    campaign ends when its last run ends, whatever the order. Its progress
    covers every run. Safe to run again (a takeover, a wake-up): answered
    questions are skipped and an engine run with a job keeps it."""
    campaign = Campaign.objects.get(pk=job.params["campaign_id"])
    runs = list(campaign.runs.select_related("endpoint", "job").order_by("id"))
    mine = [run for run in runs if answered_in_campaign_job(run.endpoint)]
    engine = [run for run in runs if run not in mine]
    for run in engine:
        if run.job_id is None:
            services.start_run_job(run, user=campaign.created_by, part_of=job)
    # Woken up, the job mostly finds its HTTP runs answered: only those with questions left are
    # prepared (preparing reads a run's whole question set), the others count as they stand.
    rows = {row.run.pk: row for row in summary(campaign).rows}
    todo = [run for run in mine if rows[run.pk].pending]
    settled = [(rows[run.pk].ok + rows[run.pk].failed, rows[run.pk].total) for run in mine if run not in todo]
    prepared = [services.prepare_answering(run) for run in todo]
    parts = {n: (done, total) for n, (_pending, done, total) in enumerate(prepared)}
    engine_parts: dict[int, tuple[int, int]] = {}
    engine_read = [-ENGINE_PROGRESS_SECONDS]
    reported = [-calls.SAVE_SECONDS]
    save = calls.SharedSave(services.save_answers)

    def report(*, now: bool = True) -> None:
        # Each run's fan-out reports twice a second: the job's row (progress, heartbeat and the
        # cancel check) is written at most that often for them all, not once per run.
        if not now and time.monotonic() - reported[0] < calls.SAVE_SECONDS:
            return
        reported[0] = time.monotonic()
        if engine and time.monotonic() - engine_read[0] >= ENGINE_PROGRESS_SECONDS:
            engine_parts.update(engine_progress(engine))
            engine_read[0] = time.monotonic()
        counted = [*settled, *parts.values(), *engine_parts.values()]
        progress(sum(d for d, _ in counted), sum(t for _, t in counted))

    def part(n: int):
        def report_part(done: int, total: int | None = None) -> None:
            parts[n] = (done, total or 0)
            report(now=False)

        return report_part

    async def answer_all() -> None:
        async with asyncio.TaskGroup() as group:
            for n, (run, (pending, done, total)) in enumerate(zip(todo, prepared, strict=True)):
                group.create_task(services.answer_pending(run, pending, part(n), done, total, save=save))

    try:
        report()
        try:
            async_to_sync(answer_all)()
        finally:
            save.flush()  # the answers in hand are kept, however the runs ended
    except* Exception as group_error:
        first = group_error.exceptions[0]
        if not isinstance(first, JobCancelled | JobLost):
            # The HTTP runs stopped (an endpoint is down): the campaign still ends with its last
            # engine run. Woken up, this job asks the HTTP runs again; it fails once all have ended.
            progress.wait_for_parts()
        raise first from None
    totals = summary(campaign)
    progress(totals.ok + totals.failed, totals.total)
    progress.wait_for_parts()  # parks (raises JobParked) while an engine run's job has not ended
    return finished_result(campaign)


def engine_progress(engine: list[InferenceRun]) -> dict[int, tuple[int, int]]:
    """(done, total) of each engine run from its job's row: a run whose job has
    not counted its questions yet counts the campaign's question count."""
    rows = Job.objects.filter(pk__in=[run.job_id for run in engine if run.job_id]).values_list("pk", "done", "total")
    jobs = {pk: (done, total) for pk, done, total in rows}
    expected = {run.pk: (run.provenance.get("questions") or {}).get("count", 0) for run in engine}
    counted = {}
    for run in engine:
        done, total = jobs.get(run.job_id or 0, (0, None))
        counted[run.pk] = (done, total or expected[run.pk])
    return counted


def finished_result(campaign: Campaign) -> dict:
    """How the campaign ended, once every run has: failed when an engine run's job
    failed (naming them), cancelled when one was cancelled, else the counts."""
    totals = summary(campaign)
    engine_rows = [row for row in totals.rows if not answered_in_campaign_job(row.run.endpoint)]
    failed = [row for row in engine_rows if row.job is not None and row.job.status == Job.Status.FAILED]
    if failed:
        raise JobFailure(RUNS_FAILED, {
            "runs": [{"endpoint": row.run.endpoint.name, "error": (row.job.error if row.job else "")[:300]}
                     for row in failed],
            "of": len(totals.rows),
        })  # fmt: skip
    if any(row.job is not None and row.job.status == Job.Status.CANCELLED for row in engine_rows):
        raise JobCancelled
    return {
        "runs": len(totals.rows), "answered": totals.ok, "failed": totals.failed, "engine_runs": len(engine_rows),
        "prompt_tokens": totals.prompt_tokens, "completion_tokens": totals.completion_tokens,
    }  # fmt: skip


@failure_wording(RUNS_FAILED)
def runs_failed_message(params: dict[str, Any]) -> str:
    names = ", ".join(f"{run['endpoint']} ({run['error']})" if run["error"] else run["endpoint"]
                      for run in params["runs"])  # fmt: skip
    return gettext("%(n)d of the campaign's %(of)d runs failed: %(runs)s") % {
        "n": len(params["runs"]), "of": params["of"], "runs": names,
    }  # fmt: skip


def report_waiting(campaign_id: int) -> None:
    """Moves the bar of a campaign's parked job as an engine run answers: while
    the HTTP runs were answered, the job counted the engine runs itself."""
    job_id = Campaign.objects.filter(pk=campaign_id).values_list("job", flat=True).first()
    if job_id is None or not Job.objects.filter(PARKED, pk=job_id).exists():
        return
    totals = summary(Campaign.objects.get(pk=campaign_id))
    # Not its heartbeat: a stale one is how the sweeper wakes a parked job whose wake-up was lost.
    Job.objects.filter(PARKED, pk=job_id).update(done=totals.ok + totals.failed, total=totals.total)


@transaction.atomic
def retry_failures(*, campaign: Campaign, user: Any) -> int:
    """Asks the failed questions of every run again, in a new campaign job that
    answers the HTTP runs and waits for the engine runs, each restarted in a job
    of its own (so is an engine run whose job failed or was cancelled). Returns
    how many runs restarted."""
    if not summary(campaign).finished:
        raise CampaignError(gettext("%(campaign)s is still running") % {"campaign": campaign})
    resumed = campaign.job is None or campaign.job.status != Job.Status.SUCCEEDED
    http, engine = [], []
    for run in campaign.runs.select_related("job", "endpoint"):
        failed = run.responses.filter(status=Response.Status.FAILED).exists()
        if answered_in_campaign_job(run.endpoint):
            if failed or resumed:
                http.append(run)
        elif failed or run.job is None or run.job.status != Job.Status.SUCCEEDED:
            engine.append(run)
    if not http and not engine:
        return 0
    for run in http + engine:  # a run retried on its own may still be answered by its job's parts
        try:
            services.refuse_retry_while_answering(run)
        except services.RetryRefused as exc:
            raise CampaignError(str(exc)) from None
    campaign.job = start_job(kind=JOB_KIND, user=user, params={"campaign_id": campaign.pk},
                             title=job_text.title("campaign_retry", name=campaign.name))  # fmt: skip
    campaign.save(update_fields=["job"])
    for run in http:
        run.responses.filter(status=Response.Status.FAILED).update(status=Response.Status.PENDING, error="")
    campaign.runs.filter(pk__in=[run.pk for run in http]).update(job=campaign.job)
    for run in engine:
        services.retry_failed(run=run, user=user, part_of=campaign.job)
    return len(http) + len(engine)


def answered_percent(ok: int, failed: int, total: int) -> int:
    """Questions answered or failed for good, in % of the run's (or campaign's) questions."""
    return round(100 * (ok + failed) / total) if total else 0


@dataclass
class RunRow:
    run: InferenceRun
    job: Job | None
    ok: int
    failed: int
    pending: int
    total: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def percent(self) -> int:
        return answered_percent(self.ok, self.failed, self.total)


@dataclass
class Summary:
    rows: list[RunRow]
    ok: int
    failed: int
    pending: int
    total: int
    prompt_tokens: int
    completion_tokens: int
    finished: bool

    @property
    def percent(self) -> int:
        return answered_percent(self.ok, self.failed, self.total)

    @property
    def can_retry(self) -> bool:
        """Finished with questions failed, or left unasked by a run that stopped (its job failed)."""
        return self.finished and (self.failed > 0 or self.pending > 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "failed": self.failed, "pending": self.pending, "total": self.total,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "finished": self.finished, "percent": self.percent,
            "runs": [
                {"id": r.run.pk, "name": r.run.name, "endpoint": r.run.endpoint.name,
                 "status": r.job.status if r.job else None, "ok": r.ok, "failed": r.failed, "pending": r.pending,
                 "total": r.total, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens}
                for r in self.rows
            ],
        }  # fmt: skip


def summary(campaign: Campaign) -> Summary:
    """Every run's counts and tokens in one query (GROUP BY run), and the totals.

    A run whose job has not created its rows yet counts the campaign's
    question count as pending, so the bar does not jump back."""
    expected = {}
    runs = (
        campaign.runs.select_related("endpoint", "job")
        .annotate(
            n_ok=Count("responses", filter=Q(responses__status=Response.Status.OK)),
            n_failed=Count("responses", filter=Q(responses__status=Response.Status.FAILED)),
            n_total=Count("responses"),
            n_prompt=Sum("responses__prompt_tokens"),
            n_completion=Sum("responses__completion_tokens"),
        )
        .order_by("endpoint__name")
    )
    rows = []
    for run in runs:
        expected[run.pk] = (run.provenance.get("questions") or {}).get("count", 0)
        total = max(run.n_total, expected[run.pk])
        rows.append(RunRow(run=run, job=run.job, ok=run.n_ok, failed=run.n_failed,
                           pending=total - run.n_ok - run.n_failed, total=total,
                           prompt_tokens=run.n_prompt or 0, completion_tokens=run.n_completion or 0))  # fmt: skip
    # Read afresh: the campaign object may have been loaded before its job ran.
    job = Job.objects.filter(pk=campaign.job_id).first() if campaign.job_id else None
    campaign_job_finished = job is None or job.is_finished
    return Summary(
        rows=rows,
        ok=sum(r.ok for r in rows),
        failed=sum(r.failed for r in rows),
        pending=sum(r.pending for r in rows),
        total=sum(r.total for r in rows),
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        completion_tokens=sum(r.completion_tokens for r in rows),
        # An engine run has no job until the campaign's job starts it.
        finished=campaign_job_finished and all(r.job is None or r.job.is_finished for r in rows),
    )
