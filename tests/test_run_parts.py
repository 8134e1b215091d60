"""Runs split into part-jobs (inference.run_parts) and offline runs routed to GPU classes
(inference.gpu_classes), in this process: each job is executed here as a worker would."""

from unittest import mock

import pytest
from django.urls import reverse

from inference import engines, run_parts, services
from inference.client import Completion
from inference.models import InferenceRun, ModelEndpoint, Response
from k12vista.jobs import cancel_job, execute_job
from k12vista.models import PARKED_TOKEN, Job
from tests.annotation_factories import make_question
from tests.test_inference_runs import Scripted, scripted_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent():
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


@pytest.fixture
def commits(django_capture_on_commit_callbacks):
    """Runs what waits for the test's transaction to commit (the parts' messages) as a commit would."""
    return django_capture_on_commit_callbacks


def http_endpoint(base_url: str) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name="m", base_url=base_url, model_name="m", max_concurrency=2), user=None
    )


def offline_endpoint(name="offline", **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=name, kind=ModelEndpoint.Kind.VLLM_OFFLINE, model_name=f"/models/{name}",
                               **fields),
        user=None,
    )  # fmt: skip


def parts_of(job_id: int) -> list[Job]:
    return list(Job.objects.filter(params__part_of=job_id).order_by("id"))


def start(endpoint, researcher, commits) -> InferenceRun:
    with commits(execute=True):
        return services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=researcher)


def test_a_large_run_becomes_parts_that_answer_every_question_once(
    scripted_server,  # noqa: F811
    researcher,
    settings,
    sent,
    commits,
):
    settings.RUN_PART_SIZE = 2
    questions = [make_question(figures=[]) for _ in range(5)]
    run = start(http_endpoint(scripted_server), researcher, commits)
    with commits(execute=True):
        assert execute_job(run.job_id) == "parked"  # it started its parts and waits for them
    parts = parts_of(run.job_id)
    assert [p.kind for p in parts] == ["inference.run"] * 3 and {p.queue for p in parts} == {"io"}
    assert [(p.done, p.total) for p in parts] == [(0, 2), (0, 2), (0, 1)]
    assert [p.title for p in parts] == [f"{run.name} (part {n} of 3)" for n in (1, 2, 3)]
    assert not Scripted.seen  # the whole job asked nothing itself
    for n, part in enumerate(parts):
        with commits(execute=True):
            assert execute_job(part.pk) == Job.Status.SUCCEEDED
        whole = Job.objects.get(pk=run.job_id)
        if n < 2:  # parked, its bar is the sum of its parts'
            assert whole.claim_token == PARKED_TOKEN and (whole.done, whole.total) == (2 * (n + 1), 5)
    assert execute_job(parts[0].pk) == "not-claimed"  # a second delivery of a part answers nothing twice
    # The last part's end woke the whole job (a message to its queue); the worker finishes it.
    assert sent.call_args_list[-1].args[0] == (run.job_id,)
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    whole = Job.objects.get(pk=run.job_id)
    assert (whole.done, whole.total) == (5, 5) and whole.result["ok"] == 5
    assert len(Scripted.seen) == 5
    assert sorted(r.question_id for r in run.responses.filter(status=Response.Status.OK)) == [q.pk for q in questions]
    assert [Job.objects.get(pk=p.pk).result["total"] for p in parts] == [2, 2, 1]


def test_a_small_run_is_answered_by_its_own_job(scripted_server, researcher, settings, sent, commits):  # noqa: F811
    settings.RUN_PART_SIZE = 3
    for _ in range(3):
        make_question(figures=[])
    run = start(http_endpoint(scripted_server), researcher, commits)
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    assert not parts_of(run.job_id) and run.counts()["ok"] == 3


def test_cancelling_the_run_cancels_the_parts_not_started(scripted_server, researcher, settings, sent, commits):  # noqa: F811
    settings.RUN_PART_SIZE = 2
    for _ in range(6):
        make_question(figures=[])
    run = start(http_endpoint(scripted_server), researcher, commits)
    with commits(execute=True):
        execute_job(run.job_id)
    first, *rest = parts_of(run.job_id)
    with commits(execute=True):
        execute_job(first.pk)
    with commits(execute=True):
        cancel_job(job=Job.objects.get(pk=run.job_id))
    assert Job.objects.get(pk=run.job_id).status == Job.Status.CANCELLED
    assert {Job.objects.get(pk=p.pk).status for p in rest} == {Job.Status.CANCELLED}
    assert [execute_job(p.pk) for p in rest] == ["not-claimed", "not-claimed"]  # their messages come to nothing
    assert run.counts() == {"total": 6, "ok": 2, "failed": 0, "pending": 4} and len(Scripted.seen) == 2


def test_a_cancel_that_comes_while_the_parts_are_started_cancels_them_too(
    scripted_server,  # noqa: F811
    researcher,
    settings,
    sent,
    commits,
    monkeypatch,
):
    settings.RUN_PART_SIZE = 1
    make_question(figures=[]), make_question(figures=[])
    run = start(http_endpoint(scripted_server), researcher, commits)
    started = run_parts.start_parts

    def then_cancelled(run, job):
        begun = started(run, job)
        Job.objects.get(pk=job.pk).request_cancel()  # running: a flag its next report reads
        return begun

    monkeypatch.setattr(run_parts, "start_parts", then_cancelled)
    with commits(execute=True):
        assert execute_job(run.job_id) == Job.Status.CANCELLED
    assert [p.status for p in parts_of(run.job_id)] == [Job.Status.CANCELLED] * 2
    assert not Scripted.seen


def test_a_failed_part_fails_the_run_and_retry_asks_only_what_is_left(researcher, settings, sent, commits, monkeypatch):
    settings.RUN_PART_SIZE = 2
    for _ in range(4):
        make_question(figures=[])
    endpoint = services.save_endpoint(
        endpoint=ModelEndpoint(name="local", kind=ModelEndpoint.Kind.TRANSFORMERS, model_name="/nowhere"), user=None
    )
    asked = []

    def answers(endpoint, conversations, params, seed=None, **options):
        if asked:  # the second batch: the engine is gone
            raise engines.EngineUnavailable("the engine died")
        asked.append(len(conversations))
        return [Completion(text="答案：B", latency_ms=1, prompt_tokens=3, completion_tokens=1, finish_reason="stop",
                           attempts=1) for _ in conversations]  # fmt: skip

    monkeypatch.setattr(engines, "local_chat_batch", answers)
    run = start(endpoint, researcher, commits)
    with commits(execute=True):
        execute_job(run.job_id)
    parts = parts_of(run.job_id)
    assert {p.queue for p in parts} == {"cpu"}
    for part in parts:
        with commits(execute=True):
            execute_job(part.pk)
    assert execute_job(run.job_id) == Job.Status.FAILED
    whole = Job.objects.get(pk=run.job_id)
    assert whole.error_code == run_parts.PARTS_FAILED and "the engine died" in whole.error
    assert "1 of the run's 2 parts failed" in whole.error
    asked.clear()
    monkeypatch.setattr(engines, "local_chat_batch", lambda *a, **k: answers(*a, **k))
    retry = services.retry_failed(run=run, user=researcher)
    assert execute_job(retry.pk) == Job.Status.SUCCEEDED  # two questions left: no parts needed
    assert asked == [2] and run.counts()["ok"] == 4


@pytest.mark.parametrize(
    ("fields", "queue"),
    [
        ({}, "gpu-1x80g"),
        ({"gpu_memory_gib": 80}, "gpu-1x80g"),
        ({"gpu_count": 2}, "gpu-4x80g"),
        ({"default_params": {"engine": {"tensor_parallel_size": 4}}}, "gpu-4x80g"),
        ({"gpu_count": 1, "gpu_memory_gib": 100}, "gpu-8x141g"),
        ({"gpu_count": 8}, "gpu-8x141g"),
    ],
)
def test_an_offline_run_goes_to_the_smallest_gpu_class_it_fits(fields, queue, researcher, settings, sent, commits):
    settings.GPU_CLASSES = ["8x141g", "4x80g", "1x80g"]
    settings.RUN_PART_SIZE = 1
    make_question(figures=[]), make_question(figures=[])
    run = start(offline_endpoint(**fields), researcher, commits)
    assert run.job.kind == "inference.run_offline" and run.job.queue == queue
    assert sent.call_args.kwargs == {"queue": queue}
    with commits(execute=True):
        execute_job(run.job_id)  # its parts go where it went
    assert [(p.queue, p.params["run_id"]) for p in parts_of(run.job_id)] == [(queue, run.pk)] * 2
    assert {call.kwargs["queue"] for call in sent.call_args_list} == {queue}


def test_an_offline_run_that_fits_no_class_is_refused_before_any_job(researcher, settings, sent, commits, english):
    settings.GPU_CLASSES = ["1x80g", "4x80g"]
    make_question(figures=[])
    big = offline_endpoint("big", gpu_count=8)
    with pytest.raises(services.EndpointError, match="needs 8 GPU"):
        start(big, researcher, commits)
    heavy = offline_endpoint("heavy", gpu_memory_gib=141)
    with pytest.raises(services.EndpointError, match="141 GiB"):
        start(heavy, researcher, commits)
    assert not Job.objects.exists() and not InferenceRun.objects.exists() and not sent.called


def test_without_gpu_classes_offline_runs_use_the_one_gpu_queue(researcher, settings, sent, commits):
    settings.GPU_CLASSES = []
    make_question(figures=[])
    run = start(offline_endpoint(gpu_count=8, gpu_memory_gib=141), researcher, commits)
    assert run.job.queue == "gpu" and sent.call_args.kwargs == {"queue": "gpu"}


def test_a_retry_of_a_run_that_no_longer_fits_changes_nothing(researcher, settings, sent, commits, login, english):
    settings.GPU_CLASSES = ["4x80g"]
    question = make_question(figures=[])
    run = start(offline_endpoint(gpu_count=4), researcher, commits)
    run.responses.create(question=question, status=Response.Status.FAILED)
    Job.objects.filter(pk=run.job_id).update(status=Job.Status.FAILED)  # ended: a retry is not refused for that
    settings.GPU_CLASSES = ["1x80g"]  # the four-card machines left the cluster
    page = login(researcher).post(reverse("inference:run_retry", args=[run.pk]))
    assert page.status_code == 302
    assert run.responses.get().status == Response.Status.FAILED and Job.objects.count() == 1
    api = login(researcher).post(reverse("inference_api:run_retry", args=[run.pk]))
    assert api.status_code == 400 and "needs 4 GPU" in api.content.decode()


def test_malformed_gpu_classes_are_reported_at_start_up(settings):
    from inference.gpu_classes import check_gpu_classes, parse

    settings.GPU_CLASSES = ["1x80g", "four-a100", "0x80g"]
    assert [e.id for e in check_gpu_classes()] == ["inference.E004", "inference.E004"]
    assert parse("4X80G").queue == "gpu-4x80g"


def test_the_endpoint_form_and_api_take_the_gpu_needs_and_refuse_nonsense(researcher, login):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(researcher)
    body = {"name": "big", "kind": "vllm_offline", "model_name": "/models/big", "gpu_count": 4, "gpu_memory_gib": 80}
    assert api.post("/api/endpoints/", body, format="json").status_code == 201
    assert ModelEndpoint.objects.values_list("gpu_count", "gpu_memory_gib").get() == (4, 80)
    for bad in ({"gpu_count": 0}, {"gpu_count": "four"}, {"gpu_memory_gib": -1}, {"gpu_count": 10**9}):
        assert api.post("/api/endpoints/", {**body, "name": "x", **bad}, format="json").status_code == 400
    page = login(researcher).post(reverse("inference:endpoint_create"), {
        "name": "small", "kind": "vllm_offline", "model_name": "/models/small", "max_concurrency": 8,
        "timeout_seconds": 120, "max_image_side": 1024, "gpu_count": "1", "gpu_memory_gib": "0",
    })  # fmt: skip
    assert page.status_code == 302
    assert ModelEndpoint.objects.values_list("gpu_count", "gpu_memory_gib").get(name="small") == (1, 0)
    refused = login(researcher).post(reverse("inference:endpoint_create"), {
        "name": "odd", "kind": "vllm_offline", "model_name": "/models/odd", "max_concurrency": 8,
        "timeout_seconds": 120, "max_image_side": 1024, "gpu_count": "0",
    })  # fmt: skip
    assert refused.status_code == 200 and not ModelEndpoint.objects.filter(name="odd").exists()


def test_a_retry_is_refused_while_the_run_or_a_part_of_it_is_answered(
    scripted_server,  # noqa: F811
    researcher,
    settings,
    sent,
    commits,
    login,
    english,
):
    settings.RUN_PART_SIZE = 2
    for _ in range(4):
        make_question(figures=[])
    run = start(http_endpoint(scripted_server), researcher, commits)
    with commits(execute=True):
        assert execute_job(run.job_id) == "parked"
    failed = run.responses.order_by("id").first()
    run.responses.filter(pk=failed.pk).update(status=Response.Status.FAILED, error="timeout")
    whole_id, (first, _second) = run.job_id, parts_of(run.job_id)
    jobs_before = Job.objects.count()

    def refused() -> None:
        with pytest.raises(services.RetryRefused, match="still being answered"):
            services.retry_failed(run=run, user=researcher)
        page = login(researcher).post(reverse("inference:run_retry", args=[run.pk]), follow=True)
        assert "still being answered" in page.content.decode()
        api = login(researcher).post(reverse("inference_api:run_retry", args=[run.pk]))
        assert api.status_code == 400 and "still being answered" in api.content.decode()
        # Nothing changed: no second set of parts over the same rows, the failed row still failed.
        assert Job.objects.count() == jobs_before and run.responses.get(pk=failed.pk).status == Response.Status.FAILED

    refused()  # the whole job waits for its parts
    assert first.claim() is not None  # a worker answers the first part
    with commits(execute=True):
        cancel_job(job=Job.objects.get(pk=run.job_id))
    assert Job.objects.get(pk=run.job_id).status == Job.Status.CANCELLED
    assert Job.objects.get(pk=first.pk).status == Job.Status.RUNNING  # until its next report
    refused()  # the whole job ended, one of its parts not yet
    Job.objects.filter(pk=first.pk).update(status=Job.Status.CANCELLED)
    retry = services.retry_failed(run=run, user=researcher)
    assert retry.pk != whole_id and run.responses.get(pk=failed.pk).status == Response.Status.PENDING
    with pytest.raises(services.RetryRefused):  # the retry's own job is queued now
        services.retry_failed(run=run, user=researcher)


def test_a_blank_gpu_need_is_refused_for_an_offline_engine_and_kept_for_others(researcher, login, english):
    from rest_framework.test import APIClient

    big = offline_endpoint("big", gpu_count=4, gpu_memory_gib=80)
    form = {"name": "big", "kind": "vllm_offline", "model_name": "/models/big", "max_concurrency": 8,
            "timeout_seconds": 120, "max_image_side": 1024, "gpu_count": "4", "gpu_memory_gib": "80"}  # fmt: skip
    client = login(researcher)
    for cleared in ("gpu_count", "gpu_memory_gib"):
        for sent in ({**form, cleared: ""}, {k: v for k, v in form.items() if k != cleared}):
            page = client.post(reverse("inference:endpoint_edit", args=[big.pk]), sent)
            assert page.status_code == 200 and page.context["form"].errors[cleared] == ["This field is required."]
            assert ModelEndpoint.objects.values_list("gpu_count", "gpu_memory_gib").get(pk=big.pk) == (4, 80)
    new = client.post(reverse("inference:endpoint_create"), {**form, "name": "new", "gpu_count": ""})
    assert new.status_code == 200 and not ModelEndpoint.objects.filter(name="new").exists()
    # An HTTP endpoint never reads them: a form without them keeps what is stored.
    http = ModelEndpoint.objects.create(name="http", base_url="http://127.0.0.1:8001/v1", model_name="m",
                                        gpu_count=2, gpu_memory_gib=40)  # fmt: skip
    kept = client.post(reverse("inference:endpoint_edit", args=[http.pk]), {
        "name": "http", "kind": "openai", "base_url": "http://127.0.0.1:8001/v1", "model_name": "m",
        "max_concurrency": 8, "timeout_seconds": 60, "max_image_side": 1024, "gpu_count": "",
    })  # fmt: skip
    assert kept.status_code == 302
    assert ModelEndpoint.objects.values_list("gpu_count", "gpu_memory_gib").get(pk=http.pk) == (2, 40)
    api = APIClient()
    api.force_authenticate(researcher)
    body = {"name": "api", "kind": "vllm_offline", "model_name": "/models/api", "gpu_count": 4}
    for blank in ("", None):
        refused = api.post("/api/endpoints/", {**body, "gpu_count": blank}, format="json")
        assert refused.status_code == 400 and "gpu_count" in refused.json()
    assert not ModelEndpoint.objects.filter(name="api").exists()
