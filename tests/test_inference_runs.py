"""Inference runs against real HTTP servers on this machine: a scripted fake for
status codes, and transformers serve with a tiny model for the whole path."""

import json
import time

import pytest

from inference import services
from inference.models import InferenceRun, ModelEndpoint, Response
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.scripted_models import ScriptedHandler, serve


class Scripted(ScriptedHandler):
    """Answers /v1/chat/completions with the next status from ``script``."""

    script: list[int] = []
    seen: list[dict] = []
    delay = 0.0  # seconds before each answer, for tests that need a run to take a while
    content = "步骤1：得 $x=2$。\n答案：B"
    finish_reason = "stop"

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        if type(self).delay:
            time.sleep(type(self).delay)
        type(self).seen.append(body)
        status = type(self).script.pop(0) if type(self).script else 200
        if status != 200:
            return self.send_error_status(status)
        return self.send_completion(body, type(self).content, finish=type(self).finish_reason, usage=(11, 7))


@pytest.fixture
def scripted_server():
    Scripted.script, Scripted.seen = [], []
    with serve(Scripted) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 2


def endpoint(base_url, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url, model_name=fields.pop("model", "m"),
                               api_key_env=fields.pop("api_key_env", ""), **fields),
        user=None,
    )  # fmt: skip


def run_now(run: InferenceRun) -> InferenceRun:
    execute_job(run.job_id)
    run.refresh_from_db()
    return run


def start(ep, researcher, **kwargs) -> InferenceRun:
    from unittest import mock

    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return services.start_inference_run(endpoint=ep, mode="step_by_step", filters={}, user=researcher, **kwargs)


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://10.0.0.5:8000/v1", "http://169.254.169.254/latest", "file:///etc/passwd"])
def test_it_refuses_endpoint_urls_outside_the_allowlist(url):
    with pytest.raises(services.EndpointError):
        endpoint(url)
    assert not ModelEndpoint.objects.exists()


@pytest.mark.django_db
def test_it_accepts_an_allowed_url_and_never_stores_the_key(settings, monkeypatch):
    settings.MODEL_URL_ALLOWLIST = ["https://gpu01.lab:8000"]
    monkeypatch.setenv("K12VISTA_KEY_TEST", "sk-secret")
    ep = endpoint("https://gpu01.lab:8000/v1/", api_key_env="K12VISTA_KEY_TEST")
    assert ep.base_url == "https://gpu01.lab:8000/v1" and ep.api_key() == "sk-secret"
    assert "sk-secret" not in json.dumps(list(ModelEndpoint.objects.values()), default=str)


def test_it_answers_every_question_once_and_records_the_call(scripted_server, researcher):
    questions = [make_question() for _ in range(3)]
    run = run_now(start(endpoint(scripted_server, max_concurrency=2), researcher, seed=7))
    rows = list(run.responses.order_by("question_id"))
    assert [r.question_id for r in rows] == [q.pk for q in questions]
    assert all(r.status == "ok" and r.raw_output.endswith("答案：B") for r in rows)
    assert {(r.prompt_tokens, r.completion_tokens, r.finish_reason, r.attempts) for r in rows} == {(11, 7, "stop", 1)}
    sent = Scripted.seen[0]
    assert sent["seed"] == 7 and sent["messages"][-1]["content"][-1]["type"] == "image_url"
    assert run.provenance["prompts"]["multiple_choice"]["hash"]
    assert run.provenance["questions"]["count"] == 3


def test_it_resumes_without_asking_twice(scripted_server, researcher):
    make_question(), make_question()
    run = run_now(start(endpoint(scripted_server), researcher))
    asked = len(Scripted.seen)
    from k12vista.models import Job

    again = Job.objects.create(kind="inference.run", params={"run_id": run.pk})
    execute_job(again.pk)
    assert len(Scripted.seen) == asked and run.responses.count() == 2


def test_it_retries_rate_limits_and_server_errors(scripted_server, researcher):
    make_question()
    Scripted.script = [429, 503]
    run = run_now(start(endpoint(scripted_server), researcher))
    response = run.responses.get()
    assert response.status == "ok" and response.attempts == 3


def test_it_records_a_permanent_error_on_the_item_and_goes_on(scripted_server, researcher):
    make_question(), make_question()
    Scripted.script = [400]
    run = run_now(start(endpoint(scripted_server, max_concurrency=1), researcher))
    failed = run.responses.get(status="failed")
    assert "HTTP 400" in failed.error and failed.attempts == 1
    assert run.responses.filter(status="ok").count() == 1
    assert run.counts() == {"total": 2, "ok": 1, "failed": 1, "pending": 0}


def test_it_reports_a_server_that_is_down_and_retries_failed_items_later(researcher, scripted_server):
    make_question()
    ep = endpoint("http://127.0.0.1:9/v1")  # nothing listens on the discard port
    run = run_now(start(ep, researcher))
    failed = run.responses.get()
    assert failed.status == "failed" and "APIConnectionError" in failed.error and failed.attempts == 3
    ModelEndpoint.objects.filter(pk=ep.pk).update(base_url=scripted_server)
    from unittest import mock

    with mock.patch("k12vista.tasks.run_job.apply_async"):
        job = services.retry_failed(run=run, user=researcher)
    execute_job(job.pk)
    assert run.responses.get().status == "ok"


def test_it_runs_against_a_real_openai_compatible_model_server(tiny_model_server, researcher):  # noqa: F811
    base_url, model_name = tiny_model_server
    make_question(), make_question(qtype="fill_in_blank", text="$1+1=$___", options=[], answers=["2"])
    ep = endpoint(base_url, model=model_name, default_params={"max_tokens": 6, "temperature": 0})
    run = run_now(start(ep, researcher))
    rows = list(run.responses.all())
    assert [r.status for r in rows] == ["ok", "ok"], [r.error for r in rows]
    assert all(r.completion_tokens and r.prompt_tokens and r.latency_ms is not None for r in rows)
    assert Response.objects.filter(run=run, finish_reason__in=["length", "stop"]).count() == 2


def test_it_gives_text_only_models_the_caption_instead_of_the_image(scripted_server, researcher):
    from inference.models import AssistRun, Caption

    captioned, uncaptioned = make_question(), make_question()
    ep = endpoint(scripted_server, accepts_images=False)
    helper_run = AssistRun.objects.create(name="c", kind="caption_image", endpoint=ep)
    Caption.objects.create(question=captioned, run=helper_run, text="坐标系中一条开口向上的抛物线，顶点 (1,-4)")
    run = run_now(start(ep, researcher, input_form="captions"))
    sent = Scripted.seen[0]["messages"][-1]["content"]
    assert isinstance(sent, str) and "顶点 (1,-4)" in sent  # text only, with the caption
    failed = run.responses.get(question=uncaptioned)
    assert failed.status == "failed" and "no caption" in failed.error
    assert run.responses.get(question=captioned).status == "ok"


@pytest.mark.django_db
def test_it_refuses_to_start_without_the_api_key_variable(researcher, monkeypatch, english):
    monkeypatch.delenv("K12VISTA_KEY_TEST", raising=False)
    make_question()
    ep = endpoint("http://127.0.0.1:9/v1", api_key_env="K12VISTA_KEY_TEST")
    with pytest.raises(services.EndpointError, match="K12VISTA_KEY_TEST is not set"):
        services.start_inference_run(endpoint=ep, mode="direct", filters={}, user=researcher)
    assert not InferenceRun.objects.exists()


def test_it_records_what_produced_a_run_and_says_when_two_differ(scripted_server, researcher):
    make_question(), make_question(subject="physics")
    ep = endpoint(scripted_server)
    first = start(ep, researcher, seed=1)
    same = start(ep, researcher, seed=1)
    record = first.provenance
    assert len(record["studio_version"]) >= 7 and record["questions"]["content_hash"] and record["seed"] == 1
    assert services.record_differences(first, same) == []
    other_seed = start(ep, researcher, seed=2)
    assert services.record_differences(first, other_seed) == ["seed"]
    from unittest import mock

    with mock.patch("k12vista.tasks.run_job.apply_async"):
        math_only = services.start_inference_run(
            endpoint=ep, mode="step_by_step", filters={"subject": "math"}, user=researcher, seed=1
        )
    assert services.record_differences(first, math_only) == ["questions"]


def test_it_keeps_and_flags_a_truncated_answer_and_fails_an_empty_one(scripted_server, researcher, monkeypatch):
    make_question()
    monkeypatch.setattr(Scripted, "content", "步骤1：" + "很长的推理" * 500)
    monkeypatch.setattr(Scripted, "finish_reason", "length")
    run = run_now(start(endpoint(scripted_server), researcher))
    cut = run.responses.get()
    assert cut.status == "ok" and cut.finish_reason == "length" and "truncated" in cut.error
    monkeypatch.setattr(Scripted, "content", "  ")
    monkeypatch.setattr(Scripted, "finish_reason", "stop")
    empty = run_now(start(endpoint(scripted_server, name="m2"), researcher)).responses.get()
    assert empty.status == "failed" and "empty answer" in empty.error


@pytest.mark.django_db
@pytest.mark.parametrize("accepts_images", [True, False])
def test_requests_are_built_from_what_the_run_loaded_without_a_query(researcher, accepts_images):
    """Everything a request needs is loaded with the run; the figures only when they are sent."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    make_question()
    make_question()
    run = start(endpoint("http://127.0.0.1:9/v1", accepts_images=accepts_images), researcher)
    run = InferenceRun.objects.select_related("endpoint").get(pk=run.pk)
    with CaptureQueriesContext(connection) as loading:
        pending, done, total = services.prepare_answering(run)
    with CaptureQueriesContext(connection) as building:
        requests = [services.request_for(run, response)[1] for response in pending]
    assert (len(pending), done, total) == (2, 0, 2) and len(building) == 0
    contents = [messages[-1]["content"] for messages in requests]
    images = [part for content in contents if isinstance(content, list) for part in content
              if part["type"] == "image_url"]  # fmt: skip
    assert len(images) == (2 if accepts_images else 0)
    assert any("annotation_figure" in query["sql"] for query in loading) is accepts_images
