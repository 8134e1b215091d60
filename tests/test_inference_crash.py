"""A worker killed in the middle of a run: the run, delivered again to a new
worker, finishes with exactly one answer per question."""

import os
import signal
import time

import pytest

from inference import services
from inference.models import ModelEndpoint, Response
from k12vista.models import Job
from k12vista.tasks import run_job
from tests.annotation_factories import make_question
from tests.conftest import start_worker, stop_worker
from tests.test_inference_runs import Scripted, scripted_server  # noqa: F401 (fixture)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
QUESTIONS = 8


def wait(condition, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_it_finishes_a_run_whose_worker_was_killed(scripted_server, researcher, monkeypatch):  # noqa: F811
    monkeypatch.setattr(Scripted, "delay", 0.4, raising=False)
    for _ in range(QUESTIONS):
        make_question(figures=[])
    endpoint = services.save_endpoint(
        endpoint=ModelEndpoint(name="slow", base_url=scripted_server, model_name="m", max_concurrency=1), user=None
    )
    stale = "5"  # seconds without a heartbeat before another worker may take the job over
    # The killed worker's call slot (max_concurrency 1) comes free after its lease: 60 s by default.
    quick = {"JOB_STALE_AFTER_SECONDS": stale, "CALL_LEASE_SECONDS": "5"}
    first = start_worker(name="first", **quick)
    try:
        run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=researcher)
        answered = Response.objects.filter(run=run, status=Response.Status.OK)
        wait(lambda: answered.count() >= 2, what="two answers from the first worker")
        os.kill(first.pid, signal.SIGKILL)  # no warm shutdown, no cleanup
        first.wait(timeout=10)
    finally:
        stop_worker(first)
    job = Job.objects.get(pk=run.job_id)
    assert job.status == Job.Status.RUNNING and answered.count() < QUESTIONS

    second = start_worker(name="second", **quick)
    try:
        time.sleep(int(stale) + 1)
        run_job.apply_async((job.pk,), queue="io")  # the broker's redelivery of the unacknowledged message
        wait(lambda: Job.objects.get(pk=job.pk).is_finished, timeout=90, what="the run to finish")
    finally:
        stop_worker(second)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.attempts == 2
    assert Response.objects.filter(run=run).count() == QUESTIONS
    assert Response.objects.filter(run=run, status=Response.Status.OK).count() == QUESTIONS
    assert len({r.question_id for r in Response.objects.filter(run=run)}) == QUESTIONS
