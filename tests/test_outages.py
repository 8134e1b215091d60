"""Faults, for real: workers killed mid-job, a broker that lost or never got a
message, a cache that is down. Real Celery workers, and a Redis server of the
test's own on its own port (tests/redis_server.py), never the shared one."""

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from k12vista.models import Job
from tests.ci import missing
from tests.conftest import ROOT, database_url, start_worker, stop_worker
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

STALE = 5  # seconds; the workers here take a job over once its heartbeat is this old
FAST_SWEEPS = {"JOB_STALE_AFTER_SECONDS": str(STALE), "JOB_SWEEP_INTERVAL_SECONDS": "1"}


@pytest.fixture
def own_redis(tmp_path):
    if not shutil.which("redis-server"):
        missing("redis-server is not installed")
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["filesystem", "redis"])
def broker_url(request, settings):
    """The filesystem broker forgets a message once it is read; Redis keeps it
    until it is acknowledged (acks_late). Takeover must hold on both."""
    if request.param == "filesystem":
        return "filesystem://"
    return request.getfixturevalue("own_redis").url(0)


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"not {what} after {timeout}s")


def finished(job: Job, timeout: float = 60) -> Job:
    def done():
        job.refresh_from_db()
        return job.is_finished

    wait_until(done, timeout, f"finished (job {job.pk} is {job.status})")
    return job


def long_ago():
    return timezone.now() - timedelta(seconds=STALE + 60)


@pytest.mark.slow
def test_it_takes_over_the_job_of_a_killed_worker(researcher, broker_url, settings):
    settings.JOB_STALE_AFTER_SECONDS = STALE
    # No message yet, as after a broker outage: the first worker's sweeper sends it.
    job = Job.objects.create(kind="k12vista.worker_check", started_by=researcher, params={"hold_seconds": 6})
    first = start_worker(name="first", CELERY_BROKER_URL=broker_url, **FAST_SWEEPS)
    second = None
    try:
        wait_until(lambda: Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, done__gte=1).exists(), 60,
                   "running")  # fmt: skip
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        killed_at = time.monotonic()
        second = start_worker(name="second", CELERY_BROKER_URL=broker_url, **FAST_SWEEPS)
        wait_until(lambda: Job.objects.filter(pk=job.pk, attempts=2).exists(), 60, "taken over")
        took_over_after = time.monotonic() - killed_at
        job = finished(job)
    finally:
        stop_worker(second) if second else None
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.attempts == 2
    # Stale after STALE seconds, then one sweep (1 s); a worker start-up on top.
    assert took_over_after < STALE + 1 + 15


def test_it_resends_a_queued_job_whose_message_was_lost(researcher, broker_url):
    lost = Job.objects.create(kind="k12vista.worker_check", started_by=researcher, message_due_at=long_ago())
    process = start_worker(CELERY_BROKER_URL=broker_url, **FAST_SWEEPS)
    try:
        lost = finished(lost)
    finally:
        stop_worker(process)
    assert lost.status == Job.Status.SUCCEEDED and lost.attempts == 1


def test_it_hands_a_stale_running_job_to_a_live_worker(researcher, broker_url):
    job = Job.objects.create(
        kind="k12vista.worker_check", started_by=researcher, status=Job.Status.RUNNING, attempts=1,
        heartbeat_at=long_ago(), message_due_at=long_ago(),
    )  # fmt: skip
    process = start_worker(CELERY_BROKER_URL=broker_url, **FAST_SWEEPS)
    try:
        job = finished(job)
    finally:
        stop_worker(process)
    assert job.status == Job.Status.SUCCEEDED and job.attempts == 2


def start_job_in_a_web_process(broker: str) -> subprocess.CompletedProcess:
    """What a page does, in a process of its own so that it talks to `broker`."""
    env = {**os.environ, "DATABASE_URL": database_url(), "DEBUG": "1", "CELERY_BROKER_URL": broker}
    code = (
        "from django.contrib.auth import get_user_model; from k12vista import jobs; "
        "job = jobs.start_job(kind='k12vista.worker_check', user=get_user_model().objects.get(username='rita')); "
        "print(job.pk, job.waiting_for_broker)"
    )
    return subprocess.run([sys.executable, "manage.py", "shell", "--no-imports", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_job_started_while_the_broker_is_down_runs_once_it_is_back(researcher, own_redis):
    own_redis.stop()
    started = start_job_in_a_web_process(own_redis.url(0))
    assert started.returncode == 0, started.stderr
    pk, waiting = started.stdout.split()
    assert waiting == "True"
    job = Job.objects.get(pk=pk)
    assert job.status == Job.Status.QUEUED

    own_redis.start()
    process = start_worker(CELERY_BROKER_URL=own_redis.url(0), **FAST_SWEEPS)
    try:
        job = finished(job)
    finally:
        stop_worker(process)
    assert job.status == Job.Status.SUCCEEDED and job.attempts == 1


@pytest.fixture
def redis_cache(settings, own_redis):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": own_redis.url(1),
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    return own_redis


@pytest.mark.django_db
def test_the_api_answers_while_the_cache_is_down(researcher, login, redis_cache):
    client = login(researcher)
    job = Job.objects.create(kind="k12vista.worker_check", started_by=researcher)
    assert client.get("/api/me/").status_code == 200  # the throttle counts in Redis
    redis_cache.stop()
    assert client.get("/api/me/").status_code == 200
    assert client.get("/api/jobs/").status_code == 200
    assert client.post(f"/api/jobs/{job.pk}/cancel/").status_code == 200
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert client.get("/jobs/").status_code == 200


@pytest.mark.django_db
def test_the_api_still_limits_rates_while_the_cache_is_up(researcher, login, redis_cache):
    from rest_framework.throttling import SimpleRateThrottle

    client = login(researcher)
    with mock.patch.object(SimpleRateThrottle, "THROTTLE_RATES", {"user": "3/min"}):
        codes = [client.get("/api/me/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
