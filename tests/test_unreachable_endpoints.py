"""A run whose model server cannot be reached stops with one message (inference.calls.Reachability):
after a few attempts in a row that never reached the server, not one question at a time.
Against real sockets on this machine: a server that drops connections, and a closed port."""

import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import httpx2
import openai
import pytest
from django.urls import reverse
from django.utils import translation

from inference import assist, client, scoring, services
from inference.models import AssistRun, InferenceRun, ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question


class Dropping(BaseHTTPRequestHandler):
    """Plays ``script`` one request at a time: "ok" answers, "drop" closes the connection
    without a word, an int is that HTTP status; once the script is used up, ``then`` repeats."""

    script: list = []
    then = "ok"
    seen = 0
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.seen += 1
            step = cls.script.pop(0) if cls.script else cls.then
        if step == "drop":
            self.close_connection = True
            return  # nothing written: the client sees the server hang up
        status = 200 if step == "ok" else step
        data = json.dumps(
            {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "答案：B"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
            if status == 200 else {"error": {"message": f"scripted {status}"}}
        ).encode()  # fmt: skip
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def dropping_server():
    Dropping.script, Dropping.then, Dropping.seen = [], "ok", 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dropping)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def closed_port_url() -> str:
    """A local port nothing listens on: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture(autouse=True)
def _quick_backoff(settings):
    settings.MODEL_CALL_RETRIES = 2
    settings.MODEL_CALL_BACKOFF = 0.01
    settings.MODEL_UNREACHABLE_AFTER = 3


def make_endpoint(base_url, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url, model_name="m", accepts_images=False,
                               **fields),
        user=None,
    )  # fmt: skip


def start_run(endpoint, user) -> InferenceRun:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=user)


def statuses(run: InferenceRun) -> dict[str, int]:
    counts = run.counts()
    return {k: counts[k] for k in ("ok", "failed", "pending")}


@pytest.mark.django_db
def test_a_server_that_drops_connections_after_three_answers_stops_the_run_with_one_message(
    dropping_server, researcher
):
    for _ in range(8):
        make_question()
    Dropping.script, Dropping.then = ["ok"] * 3, "drop"
    endpoint = make_endpoint(dropping_server, max_concurrency=1)
    run = start_run(endpoint, researcher)
    assert execute_job(run.job_id) == Job.Status.FAILED
    # Three answers kept, and no question failed for the outage: the other five wait for a retry.
    assert statuses(run) == {"ok": 3, "failed": 0, "pending": 5}
    assert Dropping.seen == 3 + 3  # the fourth question's three attempts, then nothing more
    job = Job.objects.get(pk=run.job_id)
    assert job.error_code == client.UNREACHABLE
    assert job.error_params == {"url": endpoint.base_url, "cause": "disconnected", "count": 3}
    assert job.error.startswith(f"Cannot reach the model server {endpoint.base_url}: the server closed the connection")
    with translation.override("zh-hans"):
        assert job.error_message.startswith(f"无法连接模型服务 {endpoint.base_url}：服务器未应答就断开了连接。")
        assert "连续 3 次连接失败" in job.error_message


@pytest.mark.django_db
def test_one_dropped_connection_is_retried_and_does_not_fail_the_run(dropping_server, researcher):
    for _ in range(4):
        make_question()
    Dropping.script = ["ok", "drop", "ok"]
    run = start_run(make_endpoint(dropping_server, max_concurrency=1), researcher)
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    assert statuses(run) == {"ok": 4, "failed": 0, "pending": 0}
    assert sorted(run.responses.values_list("attempts", flat=True)) == [1, 1, 1, 2]


@pytest.mark.django_db
def test_drops_broken_by_answers_never_add_up_to_an_outage(dropping_server, researcher, settings):
    settings.MODEL_CALL_RETRIES = 1
    for _ in range(4):
        make_question()
    # Two drops (one question's both attempts: it fails), an answer, two drops, an answer...
    Dropping.script = ["drop", "drop", "ok", "drop", "drop", "ok"]
    run = start_run(make_endpoint(dropping_server, max_concurrency=1), researcher)
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    assert statuses(run) == {"ok": 2, "failed": 2, "pending": 0}
    assert "Connection error" in run.responses.filter(status="failed").first().error


@pytest.mark.django_db
def test_http_errors_are_answers_about_one_question_not_an_outage(dropping_server, researcher, settings):
    settings.MODEL_UNREACHABLE_AFTER = 1
    for _ in range(4):
        make_question()
    Dropping.then = 503
    run = start_run(make_endpoint(dropping_server, max_concurrency=2), researcher)
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    assert statuses(run) == {"ok": 0, "failed": 4, "pending": 0}
    assert Job.objects.get(pk=run.job_id).error_code == ""


@pytest.mark.django_db
def test_a_closed_port_fails_the_run_in_seconds_and_a_retry_resumes_it(dropping_server, researcher, settings):
    settings.MODEL_CALL_RETRIES = 4  # production's retries and backoff: the outage is found before they run out
    settings.MODEL_CALL_BACKOFF = 1.0
    settings.MODEL_UNREACHABLE_AFTER = 4
    for _ in range(20):
        make_question()
    url = closed_port_url()
    endpoint = make_endpoint(url, max_concurrency=4)
    run = start_run(endpoint, researcher)
    started = time.monotonic()
    assert execute_job(run.job_id) == Job.Status.FAILED
    assert time.monotonic() - started < 5
    assert statuses(run) == {"ok": 0, "failed": 0, "pending": 20}
    job = Job.objects.get(pk=run.job_id)
    assert (job.error_code, job.error_params["cause"], job.error_params["url"]) == (client.UNREACHABLE, "refused", url)
    with translation.override("zh-hans"):
        assert job.error_message.startswith(f"无法连接模型服务 {url}：连接被拒绝。")

    # The server is up again (here: the endpoint moved to one that answers): a retry answers the rest.
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(base_url=dropping_server)
    run.refresh_from_db()
    job = services.retry_failed(run=run, user=researcher)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    assert statuses(run) == {"ok": 20, "failed": 0, "pending": 0}


@pytest.mark.django_db
def test_the_run_page_and_the_api_say_it_in_the_readers_language(researcher, login):
    make_question()
    url = closed_port_url()
    run = start_run(make_endpoint(url), researcher)
    execute_job(run.job_id)
    web = login(researcher)
    page = web.get(reverse("inference:run", args=[run.pk])).content.decode()
    assert f"无法连接模型服务 {url}：连接被拒绝。" in page and "APIConnectionError" not in page
    job_page = web.get(reverse("k12vista:job_detail", args=[run.job_id])).content.decode()
    assert f"无法连接模型服务 {url}：连接被拒绝。" in job_page
    data = web.get(f"/api/jobs/{run.job_id}/").json()
    assert data["status"] == "failed" and data["error"].startswith(f"无法连接模型服务 {url}：连接被拒绝。")
    assert data["error_code"] == "inference.endpoint_unreachable"
    assert data["error_params"] == {"url": url, "cause": "refused", "count": 3}
    web.cookies["k12vista_language"] = "en"
    data = web.get(f"/api/jobs/{run.job_id}/").json()
    assert data["error"].startswith(f"Cannot reach the model server {url}: connection refused.")


@pytest.mark.django_db
def test_a_scoring_run_stops_the_same_way(researcher):
    from tests.test_scoring import answered_run, judge_endpoint
    from tests.test_scoring import start as start_scoring

    run = answered_run("direct", ["最终答案：B", "最终答案：C", "最终答案：D"])
    scoring_run = start_scoring(run, judge_endpoint(closed_port_url()), researcher)
    assert execute_job(scoring_run.job_id) == Job.Status.FAILED
    assert set(scoring_run.judgments.values_list("status", flat=True)) == {"pending"}
    job = Job.objects.get(pk=scoring_run.job_id)
    assert (job.error_code, job.error_params["cause"]) == (client.UNREACHABLE, "refused")
    assert scoring.coverage(scoring_run)["pending"] == 3


@pytest.mark.django_db
def test_an_assist_run_stops_the_same_way(researcher):
    for _ in range(3):
        make_question()
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        run = assist.start_assist_run(kind=AssistRun.Kind.CHECK_STRUCTURE, endpoint=make_endpoint(closed_port_url()),
                                      filters={}, user=researcher)  # fmt: skip
    assert execute_job(run.job_id) == Job.Status.FAILED
    assert set(run.results.values_list("status", flat=True)) == {"pending"}
    assert Job.objects.get(pk=run.job_id).error_code == client.UNREACHABLE


# --- what counts as not reaching the server --------------------------------------------


def connection_error(*chain: BaseException) -> openai.APIConnectionError:
    """The error the SDK raises, with the causes it chains below it."""
    request = httpx2.Request("POST", "http://127.0.0.1:8000/v1/chat/completions")
    top = openai.APITimeoutError(request=request) if isinstance(chain[0], httpx2.TimeoutException) else None
    top = top or openai.APIConnectionError(request=request)
    below = top
    for cause in chain:
        below.__cause__ = cause
        below = cause
    return top


@pytest.mark.parametrize(
    ("chain", "cause"),
    [
        ((httpx2.ConnectError("failed"), ConnectionRefusedError(111, "refused")), "refused"),
        ((httpx2.ConnectError("x"), socket.gaierror(-2, "Name or service not known")), "dns"),
        ((httpx2.ConnectError("x"), ssl.SSLCertVerificationError("certificate verify failed")), "tls"),
        ((httpx2.ConnectTimeout("slow to connect"),), "connect_timeout"),
        ((httpx2.ConnectError("x"), ConnectionResetError(104, "reset")), "connect"),
        ((httpx2.RemoteProtocolError("Server disconnected without sending a response."),), "disconnected"),
        ((httpx2.ReadError("x"), ConnectionResetError(104, "reset")), "disconnected"),
        ((httpx2.ReadTimeout("the model is thinking"),), None),  # reached: the model is slow
        ((httpx2.PoolTimeout("our own pool"),), None),
    ],
)
def test_it_tells_why_a_call_never_reached_the_server(chain, cause):
    assert client.connection_failure(connection_error(*chain)) == cause


def test_an_http_answer_is_never_a_connection_failure():
    response = httpx2.Response(503, request=httpx2.Request("POST", "http://127.0.0.1/v1"))
    assert client.connection_failure(openai.APIStatusError("busy", response=response, body=None)) is None
    assert client.connection_failure(ValueError("not a call")) is None
