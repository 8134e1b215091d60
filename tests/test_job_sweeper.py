"""The Job table is the truth, not the broker: the sweeper sends a message for
each job the broker lost or never got, and a cancel does not wait for a dead
worker. The broker is mocked at its edge (apply_async); tests/test_outages.py
runs the same cases against real workers and a real Redis."""

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError

from k12vista import jobs
from k12vista.models import Job

BROKER_DOWN = OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


@pytest.fixture
def broker():
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


def start_with_broker_down(user, captured):
    with mock.patch("k12vista.tasks.run_job.apply_async", side_effect=BROKER_DOWN), captured(execute=True):
        return jobs.start_job(kind="k12vista.worker_check", user=user)


def test_it_keeps_a_job_started_while_the_broker_is_down(researcher, django_capture_on_commit_callbacks):
    job = start_with_broker_down(researcher, django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED
    assert job.waiting_for_broker


def test_it_sends_a_job_whose_message_was_never_sent(researcher, django_capture_on_commit_callbacks, broker):
    job = start_with_broker_down(researcher, django_capture_on_commit_callbacks)
    assert jobs.sweep() == {"sent": 1, "cancelled": 0}
    broker.assert_called_once_with((job.pk,), queue="cpu")
    job.refresh_from_db()
    assert not job.waiting_for_broker
    assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED


def test_it_tries_again_next_sweep_while_the_broker_stays_down(researcher, django_capture_on_commit_callbacks):
    job = start_with_broker_down(researcher, django_capture_on_commit_callbacks)
    with mock.patch("k12vista.tasks.run_job.apply_async", side_effect=BROKER_DOWN):
        assert jobs.sweep()["sent"] == 0
    job.refresh_from_db()
    assert job.waiting_for_broker


def test_it_resends_a_queued_job_whose_message_was_lost(researcher, settings, broker):
    lost = Job.objects.create(kind="k12vista.worker_check", message_due_at=ago(settings.JOB_STALE_AFTER_SECONDS + 1))
    in_flight = Job.objects.create(kind="k12vista.worker_check", message_due_at=ago(5))
    assert jobs.sweep()["sent"] == 1
    broker.assert_called_once_with((lost.pk,), queue="cpu")
    assert in_flight.pk not in [c.args[0][0] for c in broker.call_args_list]


def test_it_sends_a_lost_job_once_however_many_workers_sweep(researcher, settings, broker):
    Job.objects.create(kind="k12vista.worker_check", message_due_at=ago(settings.JOB_STALE_AFTER_SECONDS + 1))
    assert jobs.sweep()["sent"] == 1
    assert jobs.sweep()["sent"] == 0  # a second worker's sweep, a moment later
    assert broker.call_count == 1


def test_it_hands_a_dead_workers_job_to_a_live_one(researcher, settings, broker):
    job = jobs.start_job(kind="k12vista.worker_check", user=researcher)
    first = job.claim()
    stale = ago(settings.JOB_STALE_AFTER_SECONDS + 1)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=stale, message_due_at=stale)
    broker.reset_mock()
    assert jobs.sweep()["sent"] == 1
    broker.assert_called_once_with((job.pk,), queue="cpu")
    assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED  # what the live worker does with it
    job.refresh_from_db()
    assert job.attempts == 2 and job.claim_token != first


def test_it_leaves_a_job_alone_while_its_worker_is_alive(researcher, settings, broker):
    job = jobs.start_job(kind="k12vista.worker_check", user=researcher)
    job.claim()
    Job.objects.filter(pk=job.pk).update(message_due_at=ago(settings.JOB_STALE_AFTER_SECONDS + 60))
    broker.reset_mock()
    assert jobs.sweep()["sent"] == 0
    broker.assert_not_called()


def test_it_waits_out_a_retrys_countdown(researcher, broker):
    job = Job.objects.create(kind="k12vista.worker_check", message_due_at=timezone.now() + timedelta(seconds=600))
    assert jobs.sweep()["sent"] == 0
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED


def test_it_cancels_at_once_a_running_job_whose_worker_is_gone(researcher, settings, broker):
    job = jobs.start_job(kind="k12vista.worker_check", user=researcher)
    token = job.claim()
    Job.objects.filter(pk=job.pk).update(heartbeat_at=ago(settings.JOB_STALE_AFTER_SECONDS + 1))
    jobs.cancel_job(job=job)
    assert job.status == Job.Status.CANCELLED and job.finished_at
    assert not job.report(token, done=1)  # the dead worker, should it wake, cannot write
    assert jobs.execute_job(job.pk) == "not-claimed"


def test_it_lets_a_live_worker_stop_its_job_itself(researcher, broker):
    job = jobs.start_job(kind="k12vista.worker_check", user=researcher)
    job.claim()
    jobs.cancel_job(job=job)
    assert job.status == Job.Status.RUNNING and job.cancel_requested


def test_it_finishes_a_cancel_whose_worker_died_after_it(researcher, settings, broker):
    """Cancel pressed while the worker lived; the worker died before its next report."""
    job = jobs.start_job(kind="k12vista.worker_check", user=researcher)
    job.claim()
    jobs.cancel_job(job=job)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=ago(settings.JOB_STALE_AFTER_SECONDS + 1))
    broker.reset_mock()
    assert jobs.sweep() == {"sent": 0, "cancelled": 1}
    broker.assert_not_called()
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_the_job_page_says_it_waits_for_the_broker(administrator, login, english):
    # Autocommit, as in production: the job is sent (and fails to be) inside the request.
    with mock.patch("k12vista.tasks.run_job.apply_async", side_effect=BROKER_DOWN):
        response = login(administrator).post("/manage/settings/", {"queue": "cpu"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "starts by itself once the queue is back" in response.content.decode()
    job = Job.objects.get()
    page = login(administrator).get(f"/jobs/{job.pk}/").content.decode()
    assert "starts by itself once the queue is back" in page


@pytest.mark.django_db(transaction=True)
def test_the_api_accepts_a_job_while_the_broker_is_down(researcher, login):
    with mock.patch("k12vista.tasks.run_job.apply_async", side_effect=BROKER_DOWN):
        response = login(researcher).post("/api/pem/data/exports/", {}, content_type="application/json")
    assert response.status_code == 202, response.content
    assert response.json()["waiting_for_broker"] is True
    job_id = response.json()["id"]
    assert login(researcher).get(f"/api/jobs/{job_id}/").json()["waiting_for_broker"] is True


def test_the_sweep_command_sends_waiting_jobs(researcher, django_capture_on_commit_callbacks, broker):
    from django.core.management import call_command

    job = start_with_broker_down(researcher, django_capture_on_commit_callbacks)
    call_command("sweep_jobs")
    broker.assert_called_once_with((job.pk,), queue="cpu")
