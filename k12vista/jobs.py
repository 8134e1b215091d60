"""The one way long work runs: a Job row, a Celery task that takes its id, and a
handler registered under the job's kind.

    @job_handler("annotation.import_pdf", queue="cpu", params=ImportPdfParams, result=ImportPdfResult)
    def import_pdf(job: Job, progress: Progress) -> dict:
        for i, page in enumerate(pages):
            ...                       # idempotent: skip what is already saved
            progress(i + 1, len(pages))  # saves progress, honours cancel
        return {"questions": n}

``params`` and ``result`` are serializers (the app's job_shapes.py) of what the job is started with and
the dict its handler returns: the API's schema types each kind's job by them (k12vista.serializers.JobSchema).

Views, API endpoints and commands call ``start_job``; nothing long runs inside a
web request.

The Job table, not the broker, is the truth. ``sweep()`` runs in every worker
(k12vista.celery.JobSweeper) and sends a new message for each job the broker no
longer holds: one whose message could not be sent (the broker was down when it
started), was lost (a broker restart without persistence), or belonged to a
worker that died (its heartbeat is older than JOB_STALE_AFTER_SECONDS). The
message goes through the same claim as any other, so a job never runs twice at
once however many messages it has.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from k12vista import job_text, line_reasons
from k12vista.job_shapes import WorkerCheckParams, WorkerCheckResult
from k12vista.job_text import JobFailure
from k12vista.line_reasons import ReasonError
from k12vista.models import PARKED, Job

log = logging.getLogger(__name__)
# The Celery task that runs a job (k12vista.tasks declares it under this name). The task calls
# execute_job here, so this module sends it by name from Celery's registry rather than importing it.
RUN_JOB = "k12vista.tasks.run_job"


class JobCancelled(Exception):
    """Raised inside a handler by ``progress()`` once someone cancelled the job."""


class JobLost(Exception):
    """Raised inside a handler when another worker took the job over."""


class JobParked(Exception):
    """Raised by ``progress.wait_for_parts()`` while jobs started as parts of this
    one have not ended: the handler stops, the job stays running, and the end of
    its last part wakes it to finish."""


class TransientJobError(Exception):
    """A failure worth retrying later (a server that is down, a lock timeout).

    The job goes back to the queue and the task retries with backoff; after the
    last retry it fails with this message.
    """


Handler = Callable[[Job, "Progress"], dict | None]


@dataclass(frozen=True)
class Registration:
    handler: Handler
    queue: str
    # The shapes of what the kind is started with and what it answers (issue 29): serializers (classes
    # or instances) the API's schema types Job.params and Job.result by, one variant per kind
    # (k12vista.serializers.JobSchema). Required, so that no kind is registered without them.
    params: Any
    result: Any


_registry: dict[str, Registration] = {}


def job_handler(kind: str, *, queue: str = Job.Queue.CPU, params: Any, result: Any) -> Callable[[Handler], Handler]:
    """Registers ``handler`` for ``kind``; ``params`` and ``result`` are the serializers describing the
    job's params (as its start_job gives them, part_of included where it may be a part) and the dict
    the handler returns."""

    def register(handler: Handler) -> Handler:
        _registry[kind] = Registration(handler, queue, params, result)
        return handler

    return register


def registered_kinds() -> list[str]:
    return sorted(_registry)


def registration(kind: str) -> Registration:
    return _registry[kind]


class Progress:
    """Handed to handlers: ``progress(done, total)`` records progress, beats the
    job's heart and stops the handler if the job was cancelled."""

    def __init__(self, job: Job, token: Any) -> None:
        self.job = job
        self.token = token

    def __call__(self, done: int, total: int | None = None) -> None:
        if self.job.report(self.token, done=done, total=total):
            return
        self.job.refresh_from_db(fields=["cancel_requested", "claim_token"])
        if self.job.claim_token != self.token:
            raise JobLost
        raise JobCancelled

    def wait_for_parts(self) -> None:
        """Returns once every job started as a part of this one has ended; until
        then parks the job and raises JobParked, so no worker sleeps waiting for
        jobs that may need that very worker. The end of each part wakes the job
        (its handler runs again, and calls this again), and the sweeper wakes a
        parked job whose heartbeat went stale, should a wake-up have been lost.
        The handler must be safe to run again, as every handler is."""
        if not unfinished_parts(self.job).exists():
            return
        if not self.job.park(self.token):
            self(self.job.done)  # raises JobLost or JobCancelled, whichever it is
        # A part that ended before we parked found us running, and woke no one.
        if not unfinished_parts(self.job).exists():
            wake(self.job.pk)
        raise JobParked


def unfinished_parts(job: Job):
    return Job.objects.unfinished().filter(params__part_of=job.pk)


def still_running(job_id: int | None) -> bool:
    """Whether the job or one of its parts is queued or running. The parts count on their own: a part
    may still run after its whole job failed or was cancelled (it stops at its next report)."""
    if job_id is None:
        return False
    return Job.objects.unfinished().filter(Q(pk=job_id) | Q(params__part_of=job_id)).exists()


def start_job(
    *,
    kind: str,
    user: Any,
    params: dict | None = None,
    title: str | dict = "",
    part_of: Job | None = None,
    queue: str | None = None,
) -> Job:
    """Creates the job row and enqueues it once the surrounding transaction commits.

    ``title`` is ``job_text.title(code, **params)`` (worded in each reader's language when shown) or a
    text a person chose (a run's name), shown as written.

    A job started ``part_of`` another is cancelled with it, and its end wakes
    the other (see Progress.wait_for_parts): a campaign's engine runs, a run's parts.

    ``queue`` overrides the kind's queue: an offline run goes to its GPU class's queue."""
    if kind not in _registry:
        raise ValueError(f"no job handler is registered for {kind!r}")
    registration = _registry[kind]
    params = dict(params or {})
    if part_of is not None:
        params["part_of"] = part_of.pk
    coded = title if isinstance(title, dict) else None
    job = Job.objects.create(
        kind=kind,
        title=(job_text.english_title(coded) if coded else title)[:300] or kind,
        title_code=coded["code"] if coded else "",
        title_params=coded["params"] if coded else {},
        queue=queue or registration.queue,
        params=params,
        started_by=user if getattr(user, "is_authenticated", False) else None,
        message_due_at=timezone.now(),
    )

    def send() -> None:
        if not send_message(job.pk, job.queue):
            job.message_due_at = None  # the page says it waits for the broker

    transaction.on_commit(send)
    return job


def send_message(job_id: int, queue: str) -> bool:
    """Enqueues run_job for the job. A broker that is down is not an error the
    user caused: the job stays queued with no message due, and the sweeper of
    the first worker to reach the broker again sends it."""
    try:
        current_app.tasks[RUN_JOB].apply_async((job_id,), queue=queue)
    except (BrokerError, OSError) as exc:
        log.warning("job %s not sent, the broker is unreachable (%s); a worker's sweeper will send it", job_id, exc)
        Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(message_due_at=None)
        return False
    return True


def sweep() -> dict[str, int]:
    """Sends a message for every job the broker no longer holds, and finishes
    cancelled jobs whose worker is gone. Safe in every worker at once: each
    re-send is claimed with a conditional UPDATE on ``message_due_at``, so only
    one sweeper sends it, and the job itself is claimed as always."""
    now = timezone.now()
    cancelled = Job.objects.orphaned_by_cancel(now=now).update(
        status=Job.Status.CANCELLED, finished_at=now, claim_token=None
    )
    sent = 0
    for job_id, queue, message_due_at in Job.objects.needing_a_message(now=now).values_list(
        "pk", "queue", "message_due_at"
    )[:500]:
        # The same row may be swept by another worker this very moment.
        mine = Job.objects.filter(pk=job_id, message_due_at=message_due_at).needing_a_message(now=now)
        won = mine.update(message_due_at=now)
        if won and send_message(job_id, queue):
            sent += 1
    if sent or cancelled:
        log.info("job sweeper: %s message(s) sent, %s orphaned job(s) cancelled", sent, cancelled)
    return {"sent": sent, "cancelled": cancelled}


def cancel_job(*, job: Job) -> Job:
    """Cancels the job and the unfinished jobs started as its parts."""
    job.request_cancel()
    for part in unfinished_parts(job):
        cancel_job(job=part)
    if job.is_finished:
        ended(job)  # cancelled at once: nothing else tells the job it is part of
    return job


def wake(job_id: int) -> None:
    """Sends a message for a parked job, once the surrounding transaction commits;
    nothing for a job that is not parked (a running handler sees for itself)."""

    def send() -> None:
        queue = Job.objects.filter(PARKED, pk=job_id).values_list("queue", flat=True).first()
        if queue is not None:
            send_message(job_id, queue)

    transaction.on_commit(send)


def ended(job: Job) -> None:
    """A job ended: wakes the job it is a part of, if any."""
    whole = job.params.get("part_of") if isinstance(job.params, dict) else None
    if isinstance(whole, int):
        wake(whole)


def execute_job(job_id: int) -> str:
    """Runs a job in this process. Returns what happened, for logs and tests.

    Called by the Celery task; safe to call twice for the same id.
    """
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        return "missing"
    token = job.claim()
    if token is None:
        log.info("job %s not claimed (status %s); another delivery holds or finished it", job_id, job.status)
        return "not-claimed"
    status = _run(job, token)
    if status in Job.Status.values and status not in Job.UNFINISHED:
        ended(job)
    return status


def _run(job: Job, token: Any) -> str:
    registration = _registry.get(job.kind)
    if registration is None:
        job.finish(token, Job.Status.FAILED, error=f"No handler is registered for job kind {job.kind!r}.")
        return Job.Status.FAILED
    try:
        result = registration.handler(job, Progress(job, token))
    except JobCancelled:
        job.finish(token, Job.Status.CANCELLED)
        return Job.Status.CANCELLED
    except JobParked:
        return "parked"
    except JobLost:
        return "lost"
    except TransientJobError:
        # Release the claim so the retry can take the job again.
        Job.objects.filter(pk=job.pk, claim_token=token).update(status=Job.Status.QUEUED, claim_token=None)
        raise
    except JobFailure as exc:
        # Stated for people (an unreachable model server): no traceback, the words stored as a code.
        log.warning("job %s (%s) failed: %s", job.pk, job.kind, exc)
        job.finish(token, Job.Status.FAILED, error=str(exc), error_code=exc.code, error_params=exc.params)
        return Job.Status.FAILED
    except ReasonError as exc:
        # A refusal stated as a code (the file cannot be imported, nothing is eligible): stored as its code, so
        # each reader sees it in their language, and in English in ``error``; a reason given only as text
        # (said in the worker's language) is kept as the text it is.
        code, params = exc.reason["code"], exc.reason["params"]
        log.warning("job %s (%s) refused: %s", job.pk, job.kind, line_reasons.english(exc.reason))
        if code == "text":
            job.finish(token, Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        else:
            job.finish(token, Job.Status.FAILED, error=line_reasons.english(exc.reason) or code, error_code=code,
                       error_params=params)  # fmt: skip
        return Job.Status.FAILED
    except Exception as exc:
        log.exception("job %s (%s) failed", job.pk, job.kind)
        job.finish(token, Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        return Job.Status.FAILED
    job.finish(token, Job.Status.SUCCEEDED, result=result or {})
    return Job.Status.SUCCEEDED


def fail_job(job_id: int, message: str) -> None:
    """Marks a job failed after its retries ran out."""
    failed = Job.objects.filter(pk=job_id, status__in=Job.UNFINISHED).update(
        status=Job.Status.FAILED, error=message[:10000], claim_token=None
    )
    job = Job.objects.filter(pk=job_id).first()
    if failed and job is not None:
        ended(job)


# Queues an app sends jobs to beyond the kinds' own (inference: each GPU class's, "gpu-4x80g"). The
# project package imports no app, so an app names them here when it loads.
_queue_namers: list[Callable[[], list[str]]] = []


def more_queues_from(namer: Callable[[], list[str]]) -> None:
    if namer not in _queue_namers:
        _queue_namers.append(namer)


def worker_queues() -> list[str]:
    """Every queue a worker may be started on: the kinds' (cpu, io, gpu), then those the apps name."""
    queues = list(Job.Queue.values)
    for namer in _queue_namers:
        queues += [queue for queue in namer() if queue not in queues]
    return queues


def start_worker_check(*, queue: str, user: Any) -> Job:
    """A worker check on one of worker_queues() (ValueError for another name)."""
    if queue not in worker_queues():
        raise ValueError(f"no worker queue is named {queue!r}")
    kinds = {Job.Queue.CPU.value: "k12vista.worker_check", Job.Queue.IO.value: "k12vista.worker_check_io"}
    kind = kinds.get(queue, "k12vista.worker_check_gpu")
    return start_job(kind=kind, user=user, title=job_text.title("worker_check", queue=queue), queue=queue)


@job_handler("k12vista.worker_check", queue=Job.Queue.CPU, params=WorkerCheckParams, result=WorkerCheckResult)
@job_handler("k12vista.worker_check_io", queue=Job.Queue.IO, params=WorkerCheckParams, result=WorkerCheckResult)
# or a GPU class's queue, start_worker_check
@job_handler("k12vista.worker_check_gpu", queue=Job.Queue.GPU, params=WorkerCheckParams, result=WorkerCheckResult)
def worker_check(job: Job, progress: Progress) -> dict:
    """Proves that a worker consumes the job's queue and can reach the database.

    With ``hold_seconds`` it keeps the worker busy that long, beating its heart
    every second: how operators (and bench/load.py) check that a killed worker's
    job is taken over."""
    hold = max(0, min(int(job.params.get("hold_seconds", 0)), 3600))
    progress(0, hold + 1)
    seen = Job.objects.filter(pk=job.pk).values_list("status", flat=True).get()
    for second in range(hold):
        time.sleep(1)
        progress(second + 1, hold + 1)
    progress(hold + 1, hold + 1)
    return {"hostname": socket.gethostname(), "queue": job.queue, "status_seen_by_worker": seen}
