"""The one way long work runs: a Job row, a Celery task that takes its id, and a
handler registered under the job's kind.

    @job_handler("annotation.import_pdf", queue="cpu")
    def import_pdf(job: Job, progress: Progress) -> dict:
        for i, page in enumerate(pages):
            ...                       # idempotent: skip what is already saved
            progress(i + 1, len(pages))  # saves progress, honours cancel
        return {"questions": n}

Views, API endpoints and commands call ``start_job``; nothing long runs inside a
web request.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from k12vista.models import Job

log = logging.getLogger(__name__)


class JobCancelled(Exception):
    """Raised inside a handler by ``progress()`` once someone cancelled the job."""


class JobLost(Exception):
    """Raised inside a handler when another worker took the job over."""


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


_registry: dict[str, Registration] = {}


def job_handler(kind: str, *, queue: str = Job.Queue.CPU) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _registry[kind] = Registration(handler, queue)
        return handler

    return register


def registered_kinds() -> list[str]:
    return sorted(_registry)


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


def start_job(*, kind: str, user: Any, params: dict | None = None, title: str = "") -> Job:
    """Creates the job row and enqueues it once the surrounding transaction commits."""
    from k12vista.tasks import run_job

    if kind not in _registry:
        raise ValueError(f"no job handler is registered for {kind!r}")
    registration = _registry[kind]
    job = Job.objects.create(
        kind=kind,
        title=title or kind,
        queue=registration.queue,
        params=params or {},
        started_by=user if getattr(user, "is_authenticated", False) else None,
    )
    transaction.on_commit(lambda: run_job.apply_async((job.pk,), queue=job.queue))
    return job


def cancel_job(*, job: Job) -> Job:
    job.request_cancel()
    return job


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
    registration = _registry.get(job.kind)
    if registration is None:
        job.finish(token, Job.Status.FAILED, error=f"No handler is registered for job kind {job.kind!r}.")
        return Job.Status.FAILED
    try:
        result = registration.handler(job, Progress(job, token))
    except JobCancelled:
        job.finish(token, Job.Status.CANCELLED)
        return Job.Status.CANCELLED
    except JobLost:
        return "lost"
    except TransientJobError:
        # Release the claim so the retry can take the job again.
        Job.objects.filter(pk=job.pk, claim_token=token).update(status=Job.Status.QUEUED, claim_token=None)
        raise
    except Exception as exc:
        log.exception("job %s (%s) failed", job.pk, job.kind)
        job.finish(token, Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        return Job.Status.FAILED
    job.finish(token, Job.Status.SUCCEEDED, result=result or {})
    return Job.Status.SUCCEEDED


def fail_job(job_id: int, message: str) -> None:
    """Marks a job failed after its retries ran out."""
    Job.objects.filter(pk=job_id, status__in=Job.UNFINISHED).update(
        status=Job.Status.FAILED, error=message[:10000], claim_token=None
    )


@job_handler("k12vista.worker_check", queue=Job.Queue.CPU)
@job_handler("k12vista.worker_check_io", queue=Job.Queue.IO)
def worker_check(job: Job, progress: Progress) -> dict:
    """Proves that a worker consumes the job's queue and can reach the database."""
    progress(0, 1)
    seen = Job.objects.filter(pk=job.pk).values_list("status", flat=True).get()
    progress(1, 1)
    return {"hostname": socket.gethostname(), "queue": job.queue, "status_seen_by_worker": seen}
