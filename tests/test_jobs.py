from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone
from rest_framework import serializers

from k12vista import jobs
from k12vista.models import Job

calls: list[int] = []


class CountParams(serializers.Serializer):
    n = serializers.IntegerField(required=False)
    cancel_at = serializers.IntegerField(required=False)
    part_of = serializers.IntegerField(required=False)


class Counted(serializers.Serializer):
    counted = serializers.IntegerField()


class Parts(serializers.Serializer):
    parts = serializers.IntegerField()


@jobs.job_handler("tests.count_to", params=CountParams, result=Counted)
def count_to(job, progress):
    calls.append(job.pk)
    n = job.params["n"]
    for i in range(n):
        if job.params.get("cancel_at") == i:
            job.request_cancel()  # as if someone pressed Cancel while it ran
        progress(i + 1, n)
    return {"counted": n}


@jobs.job_handler("tests.broken", params=CountParams, result=Counted)
def broken(job, progress):
    raise ValueError("page 3 is not a PDF page")


@jobs.job_handler("tests.flaky", queue=Job.Queue.IO, params=CountParams, result=Counted)
def flaky(job, progress):
    raise jobs.TransientJobError("model server is down")


@jobs.job_handler("tests.whole", params=CountParams, result=Parts)
def whole(job, progress):
    """Starts one part once, then ends only after it."""
    if not Job.objects.filter(params__part_of=job.pk).exists():
        jobs.start_job(kind="tests.count_to", user=None, params={"n": 1}, part_of=job)
    progress(0, 1)
    progress.wait_for_parts()
    return {"parts": Job.objects.filter(params__part_of=job.pk, status=Job.Status.SUCCEEDED).count()}


@pytest.fixture(autouse=True)
def _reset_calls():
    calls.clear()


def start(kind, user, **params):
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        job = jobs.start_job(kind=kind, user=user, params=params)
    return job, apply_async


def test_it_enqueues_only_after_commit(researcher, django_capture_on_commit_callbacks):
    with (
        mock.patch("k12vista.tasks.run_job.apply_async") as apply_async,
        django_capture_on_commit_callbacks(execute=True),
    ):
        job = jobs.start_job(kind="tests.count_to", user=researcher, params={"n": 3})
        apply_async.assert_not_called()
    apply_async.assert_called_once_with((job.pk,), queue="cpu")
    assert job.status == Job.Status.QUEUED
    assert job.started_by == researcher


def test_it_routes_to_the_handlers_queue(researcher, django_capture_on_commit_callbacks):
    with (
        mock.patch("k12vista.tasks.run_job.apply_async") as apply_async,
        django_capture_on_commit_callbacks(execute=True),
    ):
        job = jobs.start_job(kind="tests.flaky", user=researcher)
    apply_async.assert_called_once_with((job.pk,), queue="io")


def test_it_refuses_an_unknown_kind(researcher):
    with pytest.raises(ValueError, match="no job handler"):
        jobs.start_job(kind="tests.nope", user=researcher)


def test_it_runs_a_job_to_success_with_progress(researcher):
    job, _ = start("tests.count_to", researcher, n=4)
    assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert (job.status, job.done, job.total, job.result) == ("succeeded", 4, 4, {"counted": 4})
    assert job.started_at and job.finished_at and job.attempts == 1


def test_it_records_a_permanent_error_on_the_row(researcher):
    job, _ = start("tests.broken", researcher)
    assert jobs.execute_job(job.pk) == Job.Status.FAILED
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert job.error == "ValueError: page 3 is not a PDF page"


def test_it_releases_a_transient_failure_for_retry(researcher):
    job, _ = start("tests.flaky", researcher)
    with pytest.raises(jobs.TransientJobError):
        jobs.execute_job(job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED
    jobs.fail_job(job.pk, "Gave up after 6 attempts: model server is down")
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "model server is down" in job.error


def test_it_does_not_run_a_job_twice_when_delivered_twice(researcher):
    job, _ = start("tests.count_to", researcher, n=2)
    assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED
    assert jobs.execute_job(job.pk) == "not-claimed"
    assert calls == [job.pk]
    job.refresh_from_db()
    assert job.attempts == 1


def test_it_leaves_a_job_alone_while_its_worker_is_alive(researcher):
    job, _ = start("tests.count_to", researcher, n=2)
    assert job.claim() is not None  # a first worker holds it and its heart beats
    assert jobs.execute_job(job.pk) == "not-claimed"
    assert calls == []


def test_it_takes_over_a_job_whose_worker_died(researcher, settings):
    job, _ = start("tests.count_to", researcher, n=2)
    first = job.claim()
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS + 1)
    )
    assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.attempts == 2 and job.claim_token != first
    # The dead worker, should it wake up, can no longer write to the job.
    assert not job.report(first, done=0)


def test_it_cancels_a_queued_job_at_once(researcher):
    job, _ = start("tests.count_to", researcher, n=2)
    jobs.cancel_job(job=job)
    assert job.status == Job.Status.CANCELLED
    assert jobs.execute_job(job.pk) == "not-claimed"
    assert calls == []


def test_it_stops_a_running_job_at_its_next_progress_report(researcher):
    job, _ = start("tests.count_to", researcher, n=10, cancel_at=3)
    assert jobs.execute_job(job.pk) == Job.Status.CANCELLED
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert job.done == 3  # steps 1-3 were reported, step 4 found the cancel


def test_it_fails_a_job_whose_kind_has_no_handler(researcher):
    job = Job.objects.create(kind="tests.gone", started_by=researcher)
    assert jobs.execute_job(job.pk) == Job.Status.FAILED
    job.refresh_from_db()
    assert "tests.gone" in job.error


@pytest.mark.django_db
def test_it_ignores_a_missing_job():
    assert jobs.execute_job(987654) == "missing"


def test_a_job_waits_for_its_parts_parked_on_no_worker_and_ends_after_them(
    researcher, django_capture_on_commit_callbacks
):
    committed = django_capture_on_commit_callbacks  # what waits for a commit runs as the block ends
    with mock.patch("k12vista.tasks.run_job.apply_async") as sent:
        job = jobs.start_job(kind="tests.whole", user=researcher)
        assert jobs.execute_job(job.pk) == "parked"  # the handler returned; the job did not end
        job.refresh_from_db()
        part = Job.objects.get(params__part_of=job.pk)
        assert job.status == Job.Status.RUNNING and part.status == Job.Status.QUEUED
        assert jobs.execute_job(job.pk) == "parked"  # woken too early (a stray message): parks again
        sent.reset_mock()
        with committed(execute=True):
            assert jobs.execute_job(part.pk) == Job.Status.SUCCEEDED
        sent.assert_called_once_with((job.pk,), queue="cpu")  # the part's end woke it
        assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result == {"parts": 1} and job.attempts == 1


def test_a_parked_job_is_cancelled_at_once_with_its_parts_and_a_part_that_gives_up_wakes_it(
    researcher, django_capture_on_commit_callbacks
):
    with mock.patch("k12vista.tasks.run_job.apply_async") as sent:
        cancelled = jobs.start_job(kind="tests.whole", user=researcher)
        assert jobs.execute_job(cancelled.pk) == "parked"
        jobs.cancel_job(job=cancelled)
        assert cancelled.status == Job.Status.CANCELLED
        assert Job.objects.get(params__part_of=cancelled.pk).status == Job.Status.CANCELLED
        given_up = jobs.start_job(kind="tests.whole", user=researcher)
        assert jobs.execute_job(given_up.pk) == "parked"
        sent.reset_mock()
        with django_capture_on_commit_callbacks(execute=True):
            jobs.fail_job(Job.objects.get(params__part_of=given_up.pk).pk, "Gave up after 6 attempts")
        sent.assert_called_once_with((given_up.pk,), queue="cpu")
