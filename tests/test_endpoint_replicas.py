"""An endpoint with several servers (replicas of one model): calls spread by least outstanding
requests, a server that fails is set aside while the others take its calls, every URL passes the
allowlist, and the endpoint's limit is the sum of its servers'."""

import socket
import threading
import time
from unittest import mock

import httpx2
import openai
import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from rest_framework.test import APIClient

from inference import calls, services
from inference.models import InferenceRun, ModelEndpoint
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.scripted_models import ScriptedHandler, completion, serve


def counting_handler(delay: float = 0.05, status: int = 200):
    """A handler class of its own (its own counters): answers after ``delay`` with ``status``."""

    class Handler(ScriptedHandler):
        lock = threading.Lock()
        in_flight = 0
        most = 0
        seen = 0

        def do_POST(self):  # noqa: N802
            body = self.read_body()
            cls = type(self)
            with cls.lock:
                cls.in_flight += 1
                cls.most = max(cls.most, cls.in_flight)
                cls.seen += 1
            try:
                time.sleep(delay)
            finally:
                with cls.lock:
                    cls.in_flight -= 1
            if status != 200:
                self.send_error_status(status)
            else:
                self.send_json(200, completion(body["model"], "答案：B", usage=(5, 3)))

    return Handler


def closed_port_url() -> str:
    """A local URL nothing listens on: calls to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def allow_any_local_port(settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]


def make_endpoint(base_url, replicas, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url, replica_urls=replicas, model_name="m",
                               accepts_images=False, **fields),
        user=None,
    )  # fmt: skip


def execute_job_in_a_thread(job_id: int) -> None:
    """Runs the job as a worker does, in a thread of its own: when the browser tests ran earlier in the
    session, Playwright's sync API keeps an event loop running in the main thread, where the job's
    async_to_sync refuses to run."""

    def work() -> None:
        try:
            execute_job(job_id)
        finally:
            connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


@pytest.mark.django_db(transaction=True)
def test_a_run_spreads_its_calls_and_sets_a_dead_server_aside(researcher, settings, allow_any_local_port):
    settings.MODEL_CALL_RETRIES = 0  # no call may need a retry: the failover alone keeps them
    settings.MODEL_REPLICA_COOLDOWN = 60
    for _ in range(30):
        make_question()
    first, second = counting_handler(), counting_handler()
    with serve(first) as one, serve(second) as two:
        dead = closed_port_url()
        endpoint = make_endpoint(dead, [one, two], max_concurrency=2)
        assert endpoint.call_limit == 6  # three servers of 2 each
        with mock.patch("k12vista.tasks.run_job.apply_async"):
            run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=researcher)
        execute_job_in_a_thread(run.job_id)
    run = InferenceRun.objects.get(pk=run.pk)
    assert run.job.status == "succeeded", run.job.error
    assert run.counts()["ok"] == 30  # every call answered although the base URL is down
    assert first.seen + second.seen == 30  # none lost, none asked twice
    assert first.seen >= 10 and second.seen >= 10  # spread over the two live servers
    # The endpoint's limit is the sum of its servers' (6): more in flight than one server's 2.
    assert 2 < first.most + second.most <= 6


@pytest.mark.django_db
def test_the_caller_picks_the_least_busy_server_and_retries_a_set_aside_one_later(settings, allow_any_local_port):
    settings.MODEL_CALL_RETRIES = 0
    settings.MODEL_REPLICA_COOLDOWN = 2.0  # longer than the six calls take, even on a loaded machine
    first, second, failing = counting_handler(0.2), counting_handler(0.2), counting_handler(0.0, status=502)
    with serve(first) as one, serve(second) as two, serve(failing) as three:
        caller = calls.Caller(make_endpoint(three, [one, two], max_concurrency=4))

        async def ask(count: int):
            import asyncio

            return await asyncio.gather(*(caller.complete([{"role": "user", "content": "x"}], {})
                                          for _ in range(count)))  # fmt: skip

        async def scenario():
            try:
                first_answer = await ask(1)  # to the base URL first, which fails: on to the next server
                answered = first_answer + await ask(6)
                by_url = {server.url: server for server in caller.replicas.servers}
                aside, spread = by_url[three].set_aside_count, (first.seen, second.seen, failing.seen)
                time.sleep(2.1)  # past the cool-down: the failing server is asked again
                await ask(1)
                return answered, aside, spread, by_url[three].set_aside_count
            finally:
                await caller.close()

        answered, aside, spread, aside_later = async_to_sync(scenario)()
    assert len(answered) == 7 and all(done.text == "答案：B" and done.attempts == 1 for done in answered)
    # The failed-over call, then six at once, three each: the failing server asked once and then
    # left alone during its cool-down.
    assert spread == (4, 3, 1)
    # Least outstanding first: the six in flight are never piled up on one server.
    assert max(first.most, second.most) <= 3 and first.most + second.most >= 4
    assert aside == 1
    assert aside_later == 2 and failing.seen == 2  # tried again after it (and failed over again)
    assert first.seen + second.seen == 8


@pytest.mark.django_db
def test_a_busy_server_is_set_aside_only_after_503s_in_a_row(settings, allow_any_local_port):
    """One 503 is a busy moment, not a dead server: the call goes on at once to another server, and
    the busy one keeps its share until it refuses BUSY_IN_A_ROW in a row (issue 28, bench/cluster.py)."""
    settings.MODEL_CALL_RETRIES = 0
    settings.MODEL_REPLICA_COOLDOWN = 60.0
    busy, healthy = counting_handler(0.0, status=503), counting_handler(0.0)
    with serve(busy) as one, serve(healthy) as two:
        caller = calls.Caller(make_endpoint(one, [two]))

        async def scenario():
            try:
                # One at a time, so each call picks the least used server.
                answered = [await caller.complete([{"role": "user", "content": "x"}], {})
                            for _ in range(calls.BUSY_IN_A_ROW + 2)]  # fmt: skip
                return answered, caller.replicas.servers[0].set_aside_count
            finally:
                await caller.close()

        answered, aside = async_to_sync(scenario)()
    assert all(done.text == "答案：B" and done.attempts == 1 for done in answered)
    # Asked again after each of its first 503s (so it would have answered had it been free), set
    # aside at the third, then left alone.
    assert busy.seen == calls.BUSY_IN_A_ROW and aside == 1
    assert healthy.seen == calls.BUSY_IN_A_ROW + 2


@pytest.mark.django_db
def test_a_success_between_503s_keeps_the_server_in_use(allow_any_local_port):
    servers = [calls.Server(make_endpoint("http://127.0.0.1:9/v1", []), "http://127.0.0.1:9/v1")]
    replicas = calls.Replicas.__new__(calls.Replicas)
    replicas.servers, replicas.cooldown = servers, 60.0
    busy = openai.APIStatusError("busy", response=httpx2.Response(503, request=httpx2.Request("POST", "http://x")),
                                 body=None)  # fmt: skip
    for _ in range(calls.BUSY_IN_A_ROW - 1):
        assert replicas.set_aside(servers[0], busy)  # the call moves on, the server stays
    assert replicas.ready() == servers
    servers[0].busy_in_a_row = 0  # what a success does (Caller._attempt)
    for _ in range(calls.BUSY_IN_A_ROW - 1):
        replicas.set_aside(servers[0], busy)
    assert replicas.ready() == servers
    replicas.set_aside(servers[0], busy)
    assert replicas.ready() == [] and servers[0].set_aside_count == 1


@pytest.mark.django_db
def test_each_replica_url_passes_the_allowlist(settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:8000-8010"]
    with pytest.raises(services.EndpointError, match="MODEL_URL_ALLOWLIST"):
        make_endpoint("http://127.0.0.1:8000/v1", ["http://127.0.0.1:8001/v1", "http://10.0.0.5:8002/v1"])
    with pytest.raises(services.EndpointError):
        make_endpoint("http://127.0.0.1:8000/v1", ["http://127.0.0.1:8000/v1"])  # the base URL again
    with pytest.raises(services.EndpointError):
        make_endpoint("http://127.0.0.1:8000/v1", {"not": "a list"})
    endpoint = make_endpoint("http://127.0.0.1:8000/v1", [" http://127.0.0.1:8001/v1 ", ""])
    assert endpoint.replica_urls == ["http://127.0.0.1:8001/v1"]
    assert endpoint.server_urls() == ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"]


def form_post(**overrides):
    data = {
        "name": "qwen", "kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model_name": "qwen-vl",
        "max_concurrency": 4, "timeout_seconds": 60, "max_image_side": 1024, "default_params": "{}", "active": "on",
    }  # fmt: skip
    data.update(overrides)
    return data


def test_the_endpoint_form_and_page_take_and_show_the_replicas(researcher, login, settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:8000-8010"]
    settings.LANGUAGE_CODE = "en"
    client = login(researcher)
    replicas = "http://127.0.0.1:8001/v1\r\n\r\n http://127.0.0.1:8002/v1 "
    response = client.post("/research/endpoints/new/", form_post(replica_urls=replicas))
    assert response.status_code == 302, response.context["form"].errors
    endpoint = ModelEndpoint.objects.get()
    assert endpoint.replica_urls == ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]
    assert endpoint.call_limit == 12
    listed = client.get("/research/endpoints/").content.decode()
    assert 'data-replicas="2"' in listed and "http://127.0.0.1:8002/v1" in listed
    edit = client.get(f"/research/endpoints/{endpoint.pk}/").content.decode()
    assert "http://127.0.0.1:8001/v1\nhttp://127.0.0.1:8002/v1" in edit  # one a line, as typed
    # A replica outside the allowlist: refused on the replicas' field, nothing saved.
    response = client.post(f"/research/endpoints/{endpoint.pk}/", form_post(replica_urls="http://10.0.0.5:8001/v1"))
    assert response.status_code == 200
    assert "MODEL_URL_ALLOWLIST" in response.context["form"].errors["replica_urls"][0]
    endpoint.refresh_from_db()
    assert len(endpoint.replica_urls) == 2


def test_the_api_takes_and_returns_the_replicas(researcher, settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:8000-8010"]
    client = APIClient()
    client.force_authenticate(researcher)
    data = {"name": "q", "base_url": "http://127.0.0.1:8000/v1", "model_name": "m",
            "replica_urls": ["http://127.0.0.1:8001/v1/"]}  # fmt: skip
    created = client.post("/api/endpoints/", data, format="json")
    assert created.status_code == 201 and created.json()["replica_urls"] == ["http://127.0.0.1:8001/v1"]
    for bad in (["http://10.0.0.5:8001/v1"], "http://127.0.0.1:8001/v1", [{"url": 1}], ["x"] * 65):
        refused = client.post("/api/endpoints/", {**data, "name": "r", "replica_urls": bad}, format="json")
        assert refused.status_code == 400 and "replica_urls" in refused.json(), bad
    assert ModelEndpoint.objects.count() == 1
