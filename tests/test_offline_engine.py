"""The vLLM offline path. vLLM needs a GPU and is never installed here (the
optional gpu extra), so these tests check the refusal without it and, with a
stand-in for the ``vllm`` module, that our side batches, orders and records
correctly. Nothing here shows that real vLLM accepts the calls."""

import sys
import types
from types import SimpleNamespace
from unittest import mock

import pytest

from inference import engine_runs, engines, services
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
    monkeypatch.setattr(engine_runs, "OFFLINE_BATCH", 2)
    questions = [make_question() for _ in range(3)]
    run, _ = start(offline_endpoint, researcher)
    execute_job(run.job_id)
    rows = list(run.responses.order_by("question_id"))
    assert [r.question_id for r in rows] == [q.pk for q in questions]
    assert [r.raw_output for r in rows] == ["答案0", "答案1", "答案0"]  # batches of 2 and 1
    assert {(r.completion_tokens, r.finish_reason, r.status) for r in rows} == {(2, "stop", "ok")}
    assert built == [("/models/Qwen2.5-VL-72B", {"tensor_parallel_size": 4, "seed": 3})]  # built once
    assert [n for n, _ in calls] == [2, 1] and calls[0][1]["max_tokens"] == 64 and calls[0][1]["seed"] == 3


class CountedLLM:
    """A stand-in vLLM engine that counts the instances alive in this process: one
    holds a model's weights and KV cache on the GPU until it is shut down and collected."""

    live = 0
    shut_down: list[str] = []

    def __init__(self, model, **options):
        type(self).live += 1
        self.model = model
        engine = self

        class EngineCore:  # where vLLM's V1 engine keeps its shutdown
            def shutdown(self):
                CountedLLM.shut_down.append(engine.model)

        self.llm_engine = SimpleNamespace(engine_core=EngineCore())

    def __del__(self):
        type(self).live -= 1

    def chat(self, conversations, sampling_params, use_tqdm):
        answer = SimpleNamespace(text="答", token_ids=[1], finish_reason="stop")
        return [SimpleNamespace(prompt_token_ids=[1], outputs=[answer]) for _ in conversations]


@pytest.fixture
def counted_vllm(monkeypatch):
    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = CountedLLM, lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr(engines, "_engines", {})
    monkeypatch.setattr(CountedLLM, "shut_down", [])
    yield CountedLLM
    engines.release_engines()


def offline(name):
    endpoint, _ = ModelEndpoint.objects.get_or_create(name=name, kind="vllm_offline", model_name=f"/models/{name}")
    return endpoint


def test_a_worker_releases_the_engine_it_holds_before_loading_another_model(counted_vllm, researcher):
    make_question()
    for name in ("model-a", "model-b", "model-a"):
        run, _ = start(offline(name), researcher)
        execute_job(run.job_id)
        assert Job.objects.get(pk=run.job_id).status == "succeeded"
        assert counted_vllm.live == 1  # never two models on the GPU at once
    assert counted_vllm.shut_down == ["/models/model-a", "/models/model-b"]


def test_the_same_model_keeps_its_engine(counted_vllm, researcher):
    make_question()
    endpoint = offline("model-a")
    for _ in range(2):
        run, _ = start(endpoint, researcher)
        execute_job(run.job_id)
    assert counted_vllm.live == 1 and counted_vllm.shut_down == []


def test_a_worker_may_keep_more_engines_when_configured(counted_vllm, researcher, settings):
    settings.OFFLINE_ENGINES_PER_WORKER = 2  # e.g. two small models that fit on the GPU together
    make_question()
    for name in ("model-a", "model-b", "model-c"):
        run, _ = start(offline(name), researcher)
        execute_job(run.job_id)
    # The least recently used goes first.
    assert counted_vllm.live == 2 and counted_vllm.shut_down == ["/models/model-a"]


def test_engine_batches_are_counted_for_prometheus(counted_vllm, researcher):
    from prometheus_client import REGISTRY

    def sample(name, **labels):
        return REGISTRY.get_sample_value(name, {"endpoint": "model-m", "replica": "offline", **labels}) or 0

    before = sample("k12vista_model_calls_total", outcome="ok"), sample("k12vista_model_tokens_total", kind="prompt")
    for _ in range(3):
        make_question()
    run, _ = start(offline("model-m"), researcher)
    execute_job(run.job_id)
    after = sample("k12vista_model_calls_total", outcome="ok"), sample("k12vista_model_tokens_total", kind="prompt")
    assert (after[0] - before[0], after[1] - before[1]) == (3, 3)  # a call and a prompt token per conversation
    assert sample("k12vista_model_calls_in_flight") == 0
