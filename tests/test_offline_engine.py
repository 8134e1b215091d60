"""The vLLM offline path. vLLM needs a GPU and is never installed here (the
optional gpu extra), so these tests check the refusal without it and, with a
stand-in for the ``vllm`` module, that our side batches, orders and records
correctly. Nothing here shows that real vLLM accepts the calls."""

import sys
import types
from types import SimpleNamespace
from unittest import mock

import pytest

from inference import engines, services
from inference.models import ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question


@pytest.fixture
def offline_endpoint(db):
    params = {"max_tokens": 64, "engine": {"tensor_parallel_size": 4}}
    return ModelEndpoint.objects.create(
        name="qwen-vl-72b", kind="vllm_offline", model_name="/models/Qwen2.5-VL-72B", default_params=params
    )


def start(endpoint, user):
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=user, seed=3)
    return run, apply_async


def test_it_sends_offline_runs_to_the_gpu_queue(offline_endpoint, researcher, django_capture_on_commit_callbacks):
    make_question()
    with (
        mock.patch("k12vista.tasks.run_job.apply_async") as apply_async,
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = services.start_inference_run(endpoint=offline_endpoint, mode="direct", filters={}, user=researcher)
    assert run.job.kind == "inference.run_offline"
    apply_async.assert_called_once_with((run.job.pk,), queue="gpu")


def test_it_fails_clearly_on_a_worker_without_vllm(offline_endpoint, researcher, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    make_question()
    run, _ = start(offline_endpoint, researcher)
    execute_job(run.job_id)
    job = Job.objects.get(pk=run.job_id)
    assert job.status == "failed" and "gpu extra" in job.error
    assert run.responses.filter(status="pending").count() == 1  # nothing lost: a gpu worker can take it


def test_it_feeds_whole_batches_and_keeps_the_order(offline_endpoint, researcher, monkeypatch):
    built, calls = [], []

    class LLM:
        def __init__(self, model, **options):
            built.append((model, options))

        def chat(self, conversations, sampling_params, use_tqdm):
            calls.append((len(conversations), sampling_params))
            return [
                SimpleNamespace(prompt_token_ids=[1] * (10 + i),
                                outputs=[SimpleNamespace(text=f"答案{i}", token_ids=[1, 2], finish_reason="stop")])
                for i, _ in enumerate(conversations)
            ]  # fmt: skip

    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = LLM, lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr(engines, "_engines", {})
    monkeypatch.setattr(services, "OFFLINE_BATCH", 2)
    questions = [make_question() for _ in range(3)]
    run, _ = start(offline_endpoint, researcher)
    execute_job(run.job_id)
    rows = list(run.responses.order_by("question_id"))
    assert [r.question_id for r in rows] == [q.pk for q in questions]
    assert [r.raw_output for r in rows] == ["答案0", "答案1", "答案0"]  # batches of 2 and 1
    assert {(r.completion_tokens, r.finish_reason, r.status) for r in rows} == {(2, "stop", "ok")}
    assert built == [("/models/Qwen2.5-VL-72B", {"tensor_parallel_size": 4, "seed": 3})]  # built once
    assert [n for n, _ in calls] == [2, 1] and calls[0][1]["max_tokens"] == 64 and calls[0][1]["seed"] == 3
