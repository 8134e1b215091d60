"""transformers on CPU, for real: the tiny LLaVA model the tests build, run by
inference.local_engine in .venv-ml's Python (it has torch; the project's Python
3.12 has not), fed by the same batch loop as the offline engine."""

import sys

import pytest

from inference import engines, services
from inference.models import ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question
from tests.model_server import ML_PYTHON


@pytest.fixture
def small_endpoint(db, tiny_model_dir):
    return ModelEndpoint.objects.create(
        name="tiny", kind=ModelEndpoint.Kind.TRANSFORMERS, model_name=str(tiny_model_dir),
        default_params={"max_tokens": 6}, max_image_side=64,
    )  # fmt: skip


def start(endpoint, user, **options):
    from unittest import mock

    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=user, **options)


def test_a_run_on_a_small_cpu_model_answers_every_question(small_endpoint, researcher, settings):
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    questions = [make_question(), make_question(subject="physics", grade=8)]
    run = start(small_endpoint, researcher, seed=5)
    execute_job(run.job_id)
    run.refresh_from_db()
    assert Job.objects.get(pk=run.job_id).status == "succeeded"
    rows = list(run.responses.order_by("question_id"))
    assert [r.question_id for r in rows] == [q.pk for q in questions]
    for row in rows:
        assert row.status == "ok" and row.attempts == 1
        # The prompt holds the question's figure: 4 image tokens plus the Chinese prompt text.
        assert row.prompt_tokens > 20
        assert 1 <= row.completion_tokens <= 6 and row.finish_reason in ("stop", "length")
        # A random model rarely stops by itself: an answer cut at max_tokens is flagged, as on the HTTP path.
        assert ("truncated" in row.error) == (row.finish_reason == "length")
        assert row.latency_ms is not None


def test_the_same_seed_gives_the_same_answers(small_endpoint, researcher, settings):
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    make_question()
    outputs = []
    for _ in range(2):
        run = start(small_endpoint, researcher, seed=9, params={"temperature": 0.8})
        execute_job(run.job_id)
        outputs.append(run.responses.get().raw_output)
    assert outputs[0] == outputs[1]


def test_an_engine_failure_fails_the_job_and_loses_nothing(small_endpoint, researcher, settings):
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    ModelEndpoint.objects.filter(pk=small_endpoint.pk).update(model_name="/nonexistent/model")
    small_endpoint.refresh_from_db()
    make_question()
    run = start(small_endpoint, researcher)
    execute_job(run.job_id)
    job = Job.objects.get(pk=run.job_id)
    assert job.status == "failed" and "/nonexistent/model" in job.error
    assert run.responses.filter(status="pending").count() == 1  # retried later, nothing half-written


def test_a_missing_interpreter_is_named(small_endpoint, settings):
    settings.TRANSFORMERS_PYTHON = "/opt/no-such-python"
    with pytest.raises(engines.EngineUnavailable, match="/opt/no-such-python"):
        engines.local_chat_batch(small_endpoint, [[{"role": "user", "content": "hi"}]], {})


def test_in_process_without_torch_says_what_to_install(small_endpoint, settings, monkeypatch):
    settings.TRANSFORMERS_PYTHON = ""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(engines.EngineUnavailable, match="ml extra"):
        engines.local_chat_batch(small_endpoint, [[{"role": "user", "content": "hi"}]], {})


def test_the_reference_protocol_leaves_length_and_sampling_to_the_model():
    """The studio caps small models at 512 new tokens, greedy; the reference sends neither, so an
    OpenAI-compatible server generates up to the context with the model's own sampling: so does
    the local engine for the reference protocol, unless the run sets them."""
    from inference import local_engine

    options = local_engine.generation_options
    assert options({}, engine_defaults=False, context=4096, prompt_len=100) == {"max_new_tokens": 512,
                                                                                "do_sample": False}  # fmt: skip
    assert options({}, engine_defaults=True, context=4096, prompt_len=100) == {"max_new_tokens": 3996}
    assert options({}, engine_defaults=True, context=None, prompt_len=100) == {}
    assert options({"max_tokens": 9, "temperature": 0.7}, engine_defaults=True, context=4096, prompt_len=100) == {
        "max_new_tokens": 9, "do_sample": True, "temperature": 0.7}  # fmt: skip
    config = type("C", (), {"text_config": type("T", (), {"max_position_embeddings": 32768})()})()
    assert local_engine.context_length(config) == 32768
