"""The Prometheus endpoint: who may read it, what it says about jobs and requests, and
model calls counted in the one model-call layer against a scripted model server."""

from unittest import mock

import pytest
from prometheus_client.parser import text_string_to_metric_families

from inference import services
from inference.models import ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question
from tests.scripted_models import serving

URL = "/metrics"
TOKEN = "s3cret-scrape-token-0123456789"


@pytest.fixture(autouse=True)
def scrape_token(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.MODEL_CALL_RETRIES = 1


def samples(response) -> dict[tuple, float]:
    """Every sample of an exposition as {(name, sorted labels): value}."""
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_it_hides_the_metrics_from_anonymous_readers(client, db):
    response = client.get(URL)
    assert response.status_code == 404 and b"k12vista_" not in response.content


@pytest.mark.parametrize("header", ["Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer "])
def test_it_refuses_a_wrong_token(client, db, header):
    response = client.get(URL, headers={"Authorization": header})
    assert response.status_code == 404 and b"k12vista_" not in response.content


def test_it_refuses_every_token_when_none_is_configured(client, db, settings):
    settings.METRICS_TOKEN = ""
    assert client.get(URL, headers={"Authorization": "Bearer "}).status_code == 404


def test_it_refuses_people_who_are_not_admins(client, researcher):
    client.force_login(researcher)
    response = client.get(URL)
    assert response.status_code == 403 and b"k12vista_" not in response.content


def test_it_serves_admins(client, administrator):
    client.force_login(administrator)
    client.get("/jobs/")  # a request the latency histogram records
    response = client.get(URL)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    found = samples(response)
    assert (
        value(
            found, "k12vista_http_request_duration_seconds_count", method="GET", view="k12vista:job_list", status="200"
        )
        >= 1
    )


def test_it_serves_the_scrape_token_with_jobs_by_kind_and_state_and_queue_depth(client, db):
    Job.objects.create(kind="inference.run", queue=Job.Queue.IO, status=Job.Status.QUEUED)
    Job.objects.create(kind="inference.run", queue=Job.Queue.IO, status=Job.Status.QUEUED)
    Job.objects.create(kind="annotation.import_pdf", queue=Job.Queue.CPU, status=Job.Status.RUNNING)
    response = client.get(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    found = samples(response)
    assert value(found, "k12vista_jobs", kind="inference.run", status="queued") == 2
    assert value(found, "k12vista_jobs", kind="annotation.import_pdf", status="running") == 1
    assert value(found, "k12vista_queue_depth", queue="io") == 2
    assert value(found, "k12vista_queue_depth", queue="cpu") == 0  # running is not waiting
    assert value(found, "k12vista_queue_depth", queue="gpu") == 0  # every queue, even an empty one


def test_the_queue_depth_counts_the_jobs_waiting_on_a_gpu_class_queue(client, db):
    # An offline run's jobs wait on its GPU class's queue (inference.gpu_classes), not "gpu".
    Job.objects.create(kind="inference.run_offline", queue="gpu-4x80g", status=Job.Status.QUEUED)
    found = samples(client.get(URL, headers={"Authorization": f"Bearer {TOKEN}"}))
    assert value(found, "k12vista_queue_depth", queue="gpu-4x80g") == 1
    assert value(found, "k12vista_queue_depth", queue="gpu") == 0


def test_a_model_call_moves_the_call_and_token_counters(client, db, researcher):
    def scrape():
        return samples(client.get(URL, headers={"Authorization": f"Bearer {TOKEN}"}))

    make_question()
    make_question()
    replies = {"good-model": lambda body: (200, "答案：B"), "bad-model": lambda body: (400, "no such thing")}
    with serving(replies) as base_url:
        good = ModelEndpoint.objects.create(name="good", base_url=base_url, model_name="good-model")
        bad = ModelEndpoint.objects.create(name="bad", base_url=base_url, model_name="bad-model")
        before = scrape()
        for endpoint in (good, bad):
            with mock.patch("k12vista.tasks.run_job.apply_async"):
                run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=researcher)
            execute_job(run.job_id)
    after = scrape()

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    ok = {"endpoint": "good", "replica": base_url}
    assert moved("k12vista_model_calls_total", outcome="ok", **ok) == 2
    assert moved("k12vista_model_tokens_total", kind="prompt", **ok) == 20  # the server reports 10 + 4 a call
    assert moved("k12vista_model_tokens_total", kind="completion", **ok) == 8
    failed = {"endpoint": "bad", "replica": base_url}
    assert moved("k12vista_model_calls_total", outcome="failed", **failed) == 2
    assert moved("k12vista_model_calls_total", outcome="ok", **failed) == 0
    assert value(after, "k12vista_model_calls_in_flight", **ok) == 0  # every call has ended


def test_the_jobs_page_shows_model_calls_per_second_per_endpoint(client, db, researcher, annotator, english):
    for _ in range(3):
        make_question()
    with serving({"good-model": lambda body: (200, "答案：B")}) as base_url:
        good = ModelEndpoint.objects.create(name="good-endpoint", base_url=base_url, model_name="good-model")
        with mock.patch("k12vista.tasks.run_job.apply_async"):
            run = services.start_inference_run(endpoint=good, mode="direct", filters={}, user=researcher)
        execute_job(run.job_id)
    ModelEndpoint.objects.create(name="idle-endpoint", base_url=base_url, model_name="idle")
    client.force_login(researcher)
    page = client.get("/jobs/").content.decode()
    # Three calls ended within the last minute: 3/60 a second.
    assert 'data-endpoint="good-endpoint"' in page and "0.05" in page
    assert "idle-endpoint" not in page  # only endpoints with calls
    client.force_login(annotator)  # the jobs page of an annotator names no endpoints
    assert "good-endpoint" not in client.get("/jobs/").content.decode()


CALL_IN_ANOTHER_PROCESS = """
from types import SimpleNamespace
from k12vista import metrics
with metrics.model_call(endpoint="shared", replica="http://gpu01:8001/v1") as call:
    call.used(SimpleNamespace(prompt_tokens=5, completion_tokens=2))
"""


def test_in_multiprocess_mode_it_adds_up_every_process(client, db, tmp_path, monkeypatch):
    """Several gunicorn and Celery processes on a machine share PROMETHEUS_MULTIPROC_DIR;
    whichever one Prometheus reaches reports the calls of all of them."""
    import os
    import subprocess
    import sys

    env = os.environ | {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", CALL_IN_ANOTHER_PROCESS], env=env, check=True, timeout=60)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    found = samples(client.get(URL, headers={"Authorization": f"Bearer {TOKEN}"}))
    labels = {"endpoint": "shared", "replica": "http://gpu01:8001/v1"}
    assert value(found, "k12vista_model_calls_total", outcome="ok", **labels) == 2
    assert value(found, "k12vista_model_tokens_total", kind="prompt", **labels) == 10
    assert ("k12vista_queue_depth", (("queue", "io"),)) in found  # and the jobs from the database
