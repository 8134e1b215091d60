"""A real Celery worker process on the configured broker (filesystem, Redis or
RabbitMQ) and the test database: the job mechanism end to end."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from k12vista import jobs
from k12vista.models import Job
from k12vista.tasks import run_job

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def wait_for(job: Job, timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_finished:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job.pk} still {job.status} after {timeout}s")


def test_it_runs_a_job_on_a_real_worker(worker, researcher):
    job = jobs.start_job(kind="k12vista.worker_check_io", user=researcher)  # enqueued on commit (autocommit)
    job = wait_for(job)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.result["queue"] == "io"
    assert job.result["status_seen_by_worker"] == "running"
    assert job.attempts == 1


def test_it_runs_a_job_delivered_twice_only_once(worker, researcher):
    job = jobs.start_job(kind="k12vista.worker_check", user=researcher)
    run_job.apply_async((job.pk,), queue="cpu")  # a duplicate delivery of the same job
    job = wait_for(job)
    time.sleep(1.5)  # let the duplicate be consumed too
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert job.attempts == 1


def test_it_finishes_a_job_whose_worker_crashed(worker, researcher):
    """The message of a job whose worker died is delivered again (acks_late);
    the stale heartbeat lets the new worker take it over."""
    job = Job.objects.create(kind="k12vista.worker_check", started_by=researcher, status=Job.Status.RUNNING)
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS + 5), attempts=1
    )
    run_job.apply_async((job.pk,), queue="cpu")
    job = wait_for(job)
    assert job.status == Job.Status.SUCCEEDED
    assert job.attempts == 2
