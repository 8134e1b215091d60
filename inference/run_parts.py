"""Inference runs split into parts, so that several workers share one run.

A run over more than RUN_PART_SIZE pending questions is not answered by its job (the run's
*whole* job) alone: the whole job cuts the run's answer rows into ranges of ids, each with at most
RUN_PART_SIZE pending rows, and starts one part-job per range, of the same kind and on the same
queue, ``part_of`` itself (k12vista.jobs): several io workers then answer an HTTP run, several gpu
workers of the run's class an offline run. Then it parks, and the end of its last part wakes it
to finish (Progress.wait_for_parts), as a campaign waits for its engine runs. No scheduler of our
own: each part is a Job row and a Celery message, claimed, resumed (answered rows are skipped)
and retried like any other job; cancelling the whole job cancels the parts not finished.

The ranges cover every row of the run, answered ones too, so the parts' progress (done, total)
sums to the run's, and the whole job's bar is that sum while it waits.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet, Sum
from django.utils.translation import gettext

from inference.models import InferenceRun, Response, ScoringRun
from k12vista import job_text
from k12vista.job_text import JobFailure, failure_wording
from k12vista.jobs import JobCancelled, Progress, cancel_job, start_job, unfinished_parts
from k12vista.models import PARKED, Job

PARTS_FAILED = "inference.run_parts_failed"
# Seconds between two updates of the waiting whole job's bar from one part.
WHOLE_REPORT_SECONDS = 2.0

Span = tuple[int, int]


def span_of(job: Job) -> Span | None:
    """The (first, last) answer row ids a part-job answers; None for a run's whole job."""
    params = job.params if isinstance(job.params, dict) else {}
    first, last = params.get("first_id"), params.get("last_id")
    if type(first) is int and type(last) is int:  # not a bool, not a text from a hand-made row
        return first, last
    return None


def rows_of(run: InferenceRun, span: Span | None):
    """The run's answer rows, or those of one part."""
    rows = run.responses.all()
    return rows if span is None else rows.filter(id__gte=span[0], id__lte=span[1])


def rows_of_judgments(run: ScoringRun, span: Span | None):
    """A scoring run's judgments, or those of one part."""
    rows = run.judgments.all()
    return rows if span is None else rows.filter(id__gte=span[0], id__lte=span[1])


def counts(run: InferenceRun, span: Span | None) -> dict[str, int]:
    """What a job answered: the run's counts, or its part's."""
    if span is None:
        return run.counts()
    return rows_of(run, span).aggregate(
        total=Count("id"),
        ok=Count("id", filter=Q(status=Response.Status.OK)),
        failed=Count("id", filter=Q(status=Response.Status.FAILED)),
        pending=Count("id", filter=Q(status=Response.Status.PENDING)),
    )


def spans(run: InferenceRun, size: int) -> list[tuple[Span, int, int]]:
    """((first, last), done, total) of each part, in id order; empty when at most ``size`` rows
    are pending (the whole job answers them). Every part has at most ``size`` pending rows, and
    together they cover every row of the run, so the parts' counts add up to the run's."""
    return row_spans(run.responses.all(), size)


def row_spans(rows_of_run: QuerySet, size: int) -> list[tuple[Span, int, int]]:
    """spans() over any rows with a "pending" status: a run's answers, a scoring run's judgments."""
    rows = list(rows_of_run.order_by("id").values_list("id", "status"))
    pending = [pk for pk, status in rows if status == Response.Status.PENDING]
    if len(pending) <= size:
        return []
    cuts = pending[size::size]  # the first pending row of each part after the first
    bounds = [rows[0][0], *cuts]
    ends = [cut - 1 for cut in cuts] + [rows[-1][0]]
    counted, at = [], 0
    for first, last in zip(bounds, ends, strict=True):
        inside = []
        while at < len(rows) and rows[at][0] <= last:
            inside.append(rows[at][1])
            at += 1
        done = sum(status != Response.Status.PENDING for status in inside)
        counted.append(((first, last), done, len(inside)))
    return counted


def has_parts(job: Job) -> bool:
    return Job.objects.filter(params__part_of=job.pk).exists()


@transaction.atomic
def start_parts(run: InferenceRun, job: Job) -> bool:
    """Starts the run's part-jobs, once, all or none (queued when the transaction commits).
    True when the whole job has parts (started now or by an earlier run of it): it waits for them;
    False when the run is small enough for the whole job to answer it itself."""
    if has_parts(job):
        return True
    counted = spans(run, settings.RUN_PART_SIZE)
    start_part_jobs(job, counted, params={"run_id": run.pk}, name=run.name)
    return bool(counted)


def start_part_jobs(job: Job, counted: list[tuple[Span, int, int]], *, params: dict[str, Any], name: str) -> None:
    """One part-job per span, of the whole job's kind and queue, ``params`` plus its span."""
    for n, ((first, last), done, total) in enumerate(counted, start=1):
        part = start_job(kind=job.kind, user=job.started_by, queue=job.queue, part_of=job,
                         params={**params, "first_id": first, "last_id": last},
                         title=job_text.title("run_part", name=name, n=n, of=len(counted)))  # fmt: skip
        # Counted now, so the whole job's bar has its total before any part starts.
        Job.objects.filter(pk=part.pk).update(done=done, total=total)


def finish_whole(run: InferenceRun, job: Job, progress: Progress) -> dict[str, Any]:
    """The whole job's end, once every part has ended (until then it parks: JobParked): failed
    when a part failed, cancelled when one was cancelled, else the run's counts."""
    wait_for_parts(job, progress)
    counts = run.counts()
    progress(counts["total"] - counts["pending"], counts["total"])
    return counts


def wait_for_parts(job: Job, progress: Progress, *, failure: str = PARTS_FAILED) -> None:
    """Returns once every part of ``job`` has ended and succeeded (until then it parks: JobParked);
    JobFailure when a part failed, JobCancelled when one was cancelled. Any whole job that started
    its parts with start_part_jobs (or start_job(part_of=...)) ends through this; ``failure`` is the
    failure's code (worded with n, of and error: a panel names its judges, not parts)."""
    try:
        progress(*parts_progress(job.pk))
        progress.wait_for_parts()
    except JobCancelled:
        # Cancelled while it was starting its parts: cancel_job found none to cancel then.
        for part in unfinished_parts(job):
            cancel_job(job=part)
        raise
    parts = Job.objects.filter(params__part_of=job.pk)
    failed = list(parts.filter(status=Job.Status.FAILED).order_by("id").values_list("error", flat=True))
    if failed:
        raise JobFailure(failure, {"n": len(failed), "of": parts.count(), "error": failed[0][:300]})
    if parts.filter(status=Job.Status.CANCELLED).exists():
        raise JobCancelled


def parts_progress(whole_id: int) -> tuple[int, int]:
    """The sum of the parts' (done, total): the whole job's bar while it waits."""
    sums = Job.objects.filter(params__part_of=whole_id).aggregate(done=Sum("done"), total=Sum("total"))
    return sums["done"] or 0, sums["total"] or 0


def report_whole(whole_id: int) -> None:
    """Moves a parked whole job's bar, without beating its heart (a stale one is how the sweeper
    wakes a parked job whose wake-up was lost)."""
    done, total = parts_progress(whole_id)
    Job.objects.filter(PARKED, pk=whole_id).update(done=done, total=total)


def progress_of(job: Job, progress: Progress) -> Progress:
    """The progress a job's handler reports to: a part's also moves its whole job's bar."""
    return PartProgress(job, progress.token) if span_of(job) is not None else progress


def nested_progress(job: Job, progress: Progress) -> Progress:
    """progress_of for jobs whose wholes are parts too (a judge's scoring part, of its scoring run's
    job, of a panel's job): each waiting whole up the line shows the sum of its parts."""
    wholes: list[int] = []
    at = job.params.get("part_of") if isinstance(job.params, dict) else None
    while isinstance(at, int) and at not in wholes and len(wholes) < 4:  # 4: a bound, not a depth we use
        wholes.append(at)
        params = Job.objects.filter(pk=at).values_list("params", flat=True).first()
        at = params.get("part_of") if isinstance(params, dict) else None
    if not wholes:
        return progress
    nested = PartProgress(job, progress.token)
    nested.wholes = wholes
    return nested


class PartProgress(Progress):
    """A part's progress: its own row, and now and then its whole job's bar (and, from
    nested_progress, the bars of the wholes above that, innermost first)."""

    reported = 0.0
    wholes: list[int] | None = None

    def __call__(self, done: int, total: int | None = None) -> None:
        super().__call__(done, total)
        whole = self.job.params.get("part_of")
        now = time.monotonic()
        if isinstance(whole, int) and (now - self.reported >= WHOLE_REPORT_SECONDS or done == total):
            self.reported = now
            for above in self.wholes or [whole]:
                report_whole(above)


@failure_wording(PARTS_FAILED)
def parts_failed_message(params: dict[str, Any]) -> str:
    return gettext("%(n)d of the run's %(of)d parts failed; the first: %(error)s") % params
