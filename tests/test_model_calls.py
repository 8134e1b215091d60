"""The one model-call layer (inference.calls): a limit per endpoint shared by
every run, retries that honour Retry-After, leases that a crash cannot keep."""

import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone

from inference import calls, services
from inference.models import CallLease, InferenceRun, ModelEndpoint
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.scripted_models import ScriptedHandler, completion, serve


class Counting(ScriptedHandler):
    """Answers after ``delay`` seconds, counting how many requests are in flight at once."""

    lock = threading.Lock()
    in_flight = 0
    most = 0
    seen: list[float] = []
    script: list[tuple[int, dict]] = []  # (status, headers) before the 200s
    delay = 0.0

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.most = max(cls.most, cls.in_flight)
            cls.seen.append(time.monotonic())
            status, headers = cls.script.pop(0) if cls.script else (200, {})
        try:
            time.sleep(cls.delay)
            if status != 200:
                self.send_error_status(status, headers=headers)
            else:
                self.send_json(200, completion(body["model"], "步骤1：$x=2$。\n答案：B", usage=(5, 3)), headers)
        finally:
            with cls.lock:
                cls.in_flight -= 1


@pytest.fixture
def counting_server():
    Counting.in_flight, Counting.most, Counting.seen, Counting.script, Counting.delay = 0, 0, [], [], 0.0
    with serve(Counting) as base_url:
        yield base_url


def make_endpoint(base_url, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url, model_name="m", accepts_images=False,
                               **fields),
        user=None,
    )  # fmt: skip


def start_run(endpoint, user, **filters) -> InferenceRun:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return services.start_inference_run(endpoint=endpoint, mode="direct", filters=filters, user=user)


@pytest.mark.django_db(transaction=True)
def test_it_never_lets_two_runs_on_one_endpoint_exceed_its_limit(counting_server, researcher, settings):
    settings.MODEL_CALL_RETRIES = 0
    Counting.delay = 0.05
    for _ in range(12):
        make_question()
    endpoint = make_endpoint(counting_server, max_concurrency=3)
    runs = [start_run(endpoint, researcher), start_run(endpoint, researcher)]
    errors = []

    def work(run):
        try:
            execute_job(run.job_id)
        except Exception as exc:  # pragma: no cover - shown in the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert [InferenceRun.objects.get(pk=r.pk).counts()["ok"] for r in runs] == [12, 12]
    assert len(Counting.seen) == 24
    # Each run alone would have used 3; together they never had more than 3 in flight.
    assert Counting.most == 3
    assert not CallLease.objects.exclude(holder="").exists()  # every slot given back


@pytest.mark.django_db
def test_it_never_hands_one_slot_to_two_holders_and_frees_a_dead_runs_slots(counting_server, settings):
    endpoint = make_endpoint(counting_server, max_concurrency=2)
    first = calls.take_slots(endpoint_id=endpoint.pk, limit=2, holder="a", want=5)
    assert sorted(first) == [0, 1]
    assert calls.take_slots(endpoint_id=endpoint.pk, limit=2, holder="b", want=1) == []
    # "a" died: it stops renewing, and once its leases run out "b" gets them.
    CallLease.objects.filter(holder="a").update(expires=timezone.now() - timedelta(seconds=1))
    assert sorted(calls.take_slots(endpoint_id=endpoint.pk, limit=2, holder="b", want=2)) == [0, 1]
    assert calls.renew_slots(endpoint_id=endpoint.pk, holder="a", slots=first) == set()


@pytest.mark.django_db
def test_it_waits_as_long_as_retry_after_asks(counting_server, researcher, settings):
    settings.MODEL_CALL_RETRIES = 2
    settings.MODEL_CALL_BACKOFF = 0.01  # without the header the retry would come at once
    Counting.script = [(429, {"Retry-After": "1"})]
    make_question()
    run = start_run(make_endpoint(counting_server), researcher)
    execute_job(run.job_id)
    response = InferenceRun.objects.get(pk=run.pk).responses.get()
    assert response.status == "ok" and response.attempts == 2
    assert Counting.seen[1] - Counting.seen[0] >= 1.0


@pytest.mark.django_db
def test_it_retries_a_503_quickly_without_retry_after_and_gives_up_after_the_retries(
    counting_server, researcher, settings
):
    settings.MODEL_CALL_RETRIES = 2
    settings.MODEL_CALL_BACKOFF = 0.01
    Counting.script = [(503, {})] * 3
    make_question()
    run = start_run(make_endpoint(counting_server), researcher)
    started = time.monotonic()
    execute_job(run.job_id)
    response = InferenceRun.objects.get(pk=run.pk).responses.get()
    assert response.status == "failed" and response.attempts == 3 and "HTTP 503" in response.error
    assert time.monotonic() - started < 1.0


@pytest.mark.django_db(transaction=True)
def test_synchronous_callers_share_the_same_slots(counting_server, settings):
    """The OCR backend's synchronous calls take the endpoint's slots too."""
    settings.MODEL_CALL_RETRIES = 0
    Counting.delay = 0.1
    endpoint = make_endpoint(counting_server, max_concurrency=1)
    messages = [{"role": "user", "content": "读这一页"}]

    def call():
        try:
            calls.complete_sync(endpoint, messages, {})
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(Counting.seen) == 3 and Counting.most == 1


@pytest.mark.parametrize(
    ("status", "headers", "seconds"),
    [
        (429, {"Retry-After": "7"}, 7.0),
        (503, {"retry-after-ms": "1500"}, 1.5),
        (429, {"Retry-After": "in a while"}, None),  # unreadable: the backoff decides
        (500, {"Retry-After": "7"}, None),  # only 429 and 503 say when to come back
        (429, {}, None),
    ],
)
def test_it_reads_retry_after_in_seconds_or_milliseconds(status, headers, seconds):
    import httpx2
    import openai

    response = httpx2.Response(status, headers=headers, request=httpx2.Request("POST", "http://127.0.0.1/v1"))
    assert calls.retry_after(openai.APIStatusError("x", response=response, body=None)) == seconds


def test_it_reads_retry_after_given_as_a_date():
    import email.utils

    import httpx2
    import openai

    when = email.utils.format_datetime(timezone.now() + timedelta(seconds=30), usegmt=True)
    response = httpx2.Response(429, headers={"Retry-After": when}, request=httpx2.Request("POST", "http://x/v1"))
    assert 25 <= calls.retry_after(openai.APIStatusError("x", response=response, body=None)) <= 30
