"""The one model-call layer (inference.calls): a limit per endpoint shared by
every run, retries that honour Retry-After, leases that a crash cannot keep."""

import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.utils import timezone

from inference import calls, services
from inference.models import CallDemand, CallLease, InferenceRun, ModelEndpoint
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.scripted_models import ScriptedHandler, completion, serve


class Counting(ScriptedHandler):
    """Answers after ``delay`` seconds, counting how many requests are in flight at once."""

    lock = threading.Lock()
    in_flight = 0
    most = 0
    seen: list[float] = []
    calls: list[tuple[float | None, float, float]] = []
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
            started = time.monotonic()
        try:
            time.sleep(cls.delay)
        finally:
            # Counted out before the answer goes: once the client has it, it may send its next call.
            with cls.lock:
                cls.in_flight -= 1
                # Which run asked (its temperature tells), and when: concurrency per run.
                cls.calls.append((body.get("temperature"), started, time.monotonic()))
        if status != 200:
            self.send_error_status(status, headers=headers)
        else:
            self.send_json(200, completion(body["model"], "步骤1：$x=2$。\n答案：B", usage=(5, 3)), headers)


@pytest.fixture
def counting_server():
    Counting.in_flight, Counting.most, Counting.seen, Counting.script, Counting.delay = 0, 0, [], [], 0.0
    Counting.calls = []
    with serve(Counting) as base_url:
        yield base_url


def make_endpoint(base_url, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url, model_name="m", accepts_images=False,
                               **fields),
        user=None,
    )  # fmt: skip


def start_run(endpoint, user, params=None, **filters) -> InferenceRun:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return services.start_inference_run(endpoint=endpoint, mode="direct", filters=filters, user=user,
                                            params=params)  # fmt: skip


def worker_thread(run: InferenceRun, errors: list, after: float = 0.0) -> threading.Thread:
    """A thread that runs the run's job as a worker would, ``after`` seconds from its start; what it
    raises goes to ``errors`` (asserted empty by the test)."""

    def work():
        time.sleep(after)
        try:
            execute_job(run.job_id)
        except Exception as exc:  # pragma: no cover - shown in the assertion of the test
            errors.append(exc)
        finally:
            connection.close()

    return threading.Thread(target=work)


def in_flight_at(moment: float, run_key: float) -> int:
    return sum(1 for key, start, end in Counting.calls if key == run_key and start <= moment < end)


@pytest.mark.django_db(transaction=True)
def test_it_never_lets_two_runs_on_one_endpoint_exceed_its_limit(counting_server, researcher, settings):
    settings.MODEL_CALL_RETRIES = 0
    Counting.delay = 0.05
    for _ in range(12):
        make_question()
    endpoint = make_endpoint(counting_server, max_concurrency=3)
    runs = [start_run(endpoint, researcher), start_run(endpoint, researcher)]
    errors: list = []
    threads = [worker_thread(run, errors) for run in runs]
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


@pytest.mark.django_db(transaction=True)
def test_two_busy_runs_on_one_endpoint_share_its_slots_evenly(counting_server, researcher, settings):
    """The first run takes every slot while alone; once a second busy run wants
    slots, each holds half, instead of the second waiting for the first to end."""
    settings.MODEL_CALL_RETRIES = 0
    Counting.delay = 0.2
    for _ in range(100):
        make_question()
    endpoint = make_endpoint(counting_server, max_concurrency=4)
    first, second = (start_run(endpoint, researcher, params={"temperature": t}) for t in (0.1, 0.2))
    errors: list = []
    threads = [worker_thread(first, errors), worker_thread(second, errors, after=0.6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and Counting.most <= 4
    assert [InferenceRun.objects.get(pk=r.pk).counts()["ok"] for r in (first, second)] == [100, 100]
    starts = {key: min(s for k, s, _ in Counting.calls if k == key) for key in (0.1, 0.2)}
    ends = {key: max(e for k, _, e in Counting.calls if k == key) for key in (0.1, 0.2)}
    # Alone at first, the first run used all four slots.
    assert max(in_flight_at(starts[0.1] + n * 0.02, 0.1) for n in range(25)) == 4
    # The second got slots long before the first ended (100 calls over 4 slots take 5 s alone) ...
    assert starts[0.2] < ends[0.1] - 2
    # ... and from a settling time on, while both were busy, they split the slots evenly.
    both = [starts[0.2] + 2.0 + n * 0.05 for n in range(200)]
    both = [t for t in both if t < min(ends.values()) - 0.3]
    assert len(both) >= 10
    shares = [(in_flight_at(t, 0.1), in_flight_at(t, 0.2)) for t in both]
    assert all(a <= 2 and b <= 2 for a, b in shares), shares  # neither above its share ...
    # ... and each close to it (a call's end and the next's start leave short gaps).
    assert sum(a for a, _ in shares) >= 1.5 * len(shares) and sum(b for _, b in shares) >= 1.5 * len(shares), shares
    assert not CallLease.objects.exclude(holder="").exists() and not CallDemand.objects.exists()


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


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("limit", "questions"), [(4, 100), (1, 30)])
def test_a_synchronous_caller_gets_a_slot_from_a_busy_run_without_waiting_for_its_end(
    counting_server, researcher, settings, limit, questions
):
    """The run holds every slot and always has work; the OCR caller's demand
    makes it give one back as a call ends, instead of the caller polling until
    the run is over (100 calls over 4 slots take 5 s; 30 over 1, 6 s). With a
    limit of 1 the run's share drops to none while the caller waits."""
    settings.MODEL_CALL_RETRIES = 0
    Counting.delay = 0.2
    for _ in range(questions):
        make_question()
    endpoint = make_endpoint(counting_server, max_concurrency=limit)
    run = start_run(endpoint, researcher, params={"temperature": 0.1})
    errors: list = []
    demands: list = []
    thread = worker_thread(run, errors)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while Counting.most < limit and time.monotonic() < deadline:
            time.sleep(0.02)
        assert Counting.most == limit  # the run alone holds them all
        real_take = calls.take_slots

        def take_and_look(**kwargs):
            demands.append(set(CallDemand.objects.values_list("holder", flat=True)))
            return real_take(**kwargs)

        asked = time.monotonic()
        with mock.patch.object(calls, "take_slots", take_and_look):
            calls.complete_sync(endpoint, [{"role": "user", "content": "读这一页"}], {"temperature": 0.9})
        answered = time.monotonic()
    finally:
        thread.join(timeout=60)
        connection.close()
    assert not errors and Counting.most <= limit
    assert InferenceRun.objects.get(pk=run.pk).counts()["ok"] == questions
    ends = max(e for k, _, e in Counting.calls if k == 0.1)
    # Within a few seconds, well before the run's end ...
    assert answered - asked < 3 and answered < ends - 1.5, (answered - asked, ends - answered)
    # ... because its demand, beside the run's, was there while it waited; both gone at the end.
    assert any(any(h.startswith(calls.SYNC_HOLDER) for h in seen) and len(seen) == 2 for seen in demands)
    assert not CallLease.objects.exclude(holder="").exists() and not CallDemand.objects.exists()


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


@pytest.mark.django_db
def test_answers_saved_in_bulk_are_stored_as_the_orm_stores_them(researcher):
    from inference.models import Response

    endpoint = make_endpoint("http://127.0.0.1:9/v1")
    questions = [make_question() for _ in range(3)]
    run = start_run(endpoint, researcher)
    services.create_missing_responses(run)
    ok, failed, untouched = (Response.objects.get(run=run, question=q) for q in questions)
    answered = calls.client.Completion(text="最终答案：B", latency_ms=12, prompt_tokens=None, completion_tokens=7,
                                       finish_reason="length", attempts=2)  # fmt: skip
    services.save_answers([
        (ok.pk, services.answer_fields(answered)),
        (failed.pk, services.answer_fields(None, error="HTTP 400: bad 'quote'", attempts=1)),
    ])  # fmt: skip
    ok.refresh_from_db()
    failed.refresh_from_db()
    untouched.refresh_from_db()
    assert (ok.status, ok.raw_output, ok.latency_ms, ok.prompt_tokens, ok.completion_tokens, ok.attempts) == (
        "ok", "最终答案：B", 12, None, 7, 2)  # fmt: skip
    assert ok.error == "truncated: the answer reached max_tokens"
    assert abs((timezone.now() - ok.finished).total_seconds()) < 60  # an aware datetime, read back as one
    assert (failed.status, failed.error, failed.attempts) == ("failed", "HTTP 400: bad 'quote'", 1)
    assert failed.raw_output == ""
    assert untouched.status == "pending" and untouched.finished is None
    assert run.counts()["ok"] == 1 and run.counts()["failed"] == 1


class Recording(ScriptedHandler):
    """Keeps each request's path, headers and body."""

    seen: list[tuple[str, dict[str, str], dict]] = []

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        type(self).seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_completion(body, "最终答案：B", usage=(5, 3))


@pytest.mark.django_db
def test_a_call_sends_what_the_sdks_create_sends(monkeypatch):
    """Caller.complete posts the body it built through the client's post (the SDK's
    create() transform costs a third of a millisecond per request): the server must
    see the same path, headers (the declared key as bearer) and body as from create()."""
    monkeypatch.setenv("K12VISTA_KEY_TEST", "sk-declared")
    monkeypatch.setenv("OPENAI_ADMIN_KEY", "sk-admin-undeclared")  # the SDK reads it; no call may send it
    Recording.seen = []
    messages = [{"role": "system", "content": "你是老师。"}, {"role": "user", "content": "已知 $x^2=4$，求 $x$。"}]
    params = {"temperature": 0.2, "max_tokens": 16, "seed": 7, "stop": ["\n\n"],
              "response_format": {"type": "json_schema", "json_schema": {"name": "k", "schema": {"type": "object"},
                                                                         "strict": True}}}  # fmt: skip
    with serve(Recording) as base_url:
        endpoint = make_endpoint(base_url, api_key_env="K12VISTA_KEY_TEST", timeout_seconds=17)

        async def both():
            caller = calls.Caller(endpoint)
            try:
                ours = await caller.complete(messages, params)
                await caller.api.chat.completions.create(model="m", messages=messages, **params)
            finally:
                await caller.close()
            return ours

        ours = async_to_sync(both)()
    assert (ours.text, ours.prompt_tokens, ours.completion_tokens, ours.finish_reason) == ("最终答案：B", 5, 3, "stop")
    (path, headers, body), (sdk_path, sdk_headers, sdk_body) = Recording.seen
    assert path == sdk_path == "/v1/chat/completions"
    assert body == sdk_body == {"model": "m", "messages": messages, **params}
    assert headers["authorization"] == "Bearer sk-declared"
    assert not any("sk-admin" in value for value in headers.values())
    assert headers == sdk_headers
    assert float(headers["x-stainless-read-timeout"]) == 17  # the endpoint's timeout, as create() sends it


@pytest.mark.django_db
def test_a_call_retries_by_the_rules_and_counts_its_attempts(counting_server, settings):
    # async_to_sync, as the jobs call it: the slots' queries then use this test's connection.
    settings.MODEL_CALL_BACKOFF = 0.01
    Counting.script = [(502, {}), (429, {"retry-after-ms": "300"})]
    caller = calls.Caller(make_endpoint(counting_server), retries=2)

    async def call():
        try:
            return await caller.complete([{"role": "user", "content": "x"}], {})
        finally:
            await caller.close()

    done = async_to_sync(call)()
    assert done.attempts == 3 and len(Counting.seen) == 3
    assert Counting.seen[2] - Counting.seen[1] >= 0.3  # the 429's retry-after-ms
    Counting.script = [(400, {})]  # not transient: no second attempt
    caller = calls.Caller(make_endpoint(counting_server, name="m2"), retries=2)
    with pytest.raises(calls.client.ModelCallError) as failure:
        async_to_sync(call)()
    assert failure.value.attempts == 1 and not failure.value.transient and len(Counting.seen) == 4


@pytest.mark.django_db(transaction=True)
def test_runs_in_one_process_hand_slots_over_without_waiting_for_a_poll(counting_server, researcher, settings):
    """With the polls and housekeeping rounds made 30 s long, slots still move at
    once between two runs of this process: the second run's demand wakes the first,
    whose calls give back what is over its share as they end; the first's end wakes
    the second, which then takes every slot."""
    settings.MODEL_CALL_RETRIES = 0
    Counting.delay = 0.1
    for _ in range(60):
        make_question()
    endpoint = make_endpoint(counting_server, max_concurrency=4)
    first, second = (start_run(endpoint, researcher, params={"temperature": t}) for t in (0.1, 0.2))
    errors: list = []
    # The second run starts 0.8 s late (32 calls behind), so it still has calls left after the first ends.
    threads = [worker_thread(first, errors), worker_thread(second, errors, after=0.8)]
    with mock.patch.multiple(calls, KEEP_SECONDS=30, LEASE_POLL_SECONDS=30, DEMAND_SECONDS=120):
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors and Counting.most <= 4
    assert time.monotonic() - started < 15  # not one 30 s pause waited out
    assert [InferenceRun.objects.get(pk=r.pk).counts()["ok"] for r in (first, second)] == [60, 60]
    starts = {key: min(s for k, s, _ in Counting.calls if k == key) for key in (0.1, 0.2)}
    ends = {key: max(e for k, _, e in Counting.calls if k == key) for key in (0.1, 0.2)}
    # The second run got its share while the first was still busy (60 calls over 4 slots take 1.5 s alone) ...
    assert starts[0.2] < ends[0.1] - 0.5, (starts, ends)
    # ... and every slot once the first was done.
    last = sorted(c for c in Counting.calls if c[0] == 0.2 and c[1] > ends[0.1] + 0.3)
    assert last and max(in_flight_at(s + 0.01, 0.2) for _, s, _ in last) == 4
    assert not CallLease.objects.exclude(holder="").exists() and not CallDemand.objects.exists()


@pytest.mark.django_db
def test_renewing_a_runs_demand_is_one_statement(django_assert_num_queries):
    """A run renews its demand every KEEP_SECONDS while it works: one UPDATE, not update_or_create's
    transaction of a locking SELECT and an UPDATE (issue 28: the cluster's per-run, per-second cost)."""
    endpoint = make_endpoint("http://127.0.0.1:9/v1")
    calls.note_demand(endpoint_id=endpoint.pk, holder="run-1", seconds=5)  # the first creates the row
    first = CallDemand.objects.get(holder="run-1").expires
    with django_assert_num_queries(1):
        calls.note_demand(endpoint_id=endpoint.pk, holder="run-1", seconds=50)
    assert CallDemand.objects.get(holder="run-1").expires > first
    assert CallDemand.objects.count() == 1
