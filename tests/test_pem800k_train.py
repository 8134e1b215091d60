"""train_pem: TRL on the tiny test model, for a few steps, on a TRL export; the checkpoint as an endpoint."""

from io import StringIO
from unittest import mock

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from inference import engines
from inference.models import ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from pem.models import TrainingRun
from pem.training import exports, jobs, train
from tests.model_server import ML_PYTHON
from tests.test_pem800k_export import kept_run

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def export(settings, tmp_path, researcher):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    run, _ = kept_run(researcher)
    made = exports.start_export(filter_run=run, user=researcher, formats_wanted=["trl", "llamafactory"],
                                min_pixels=28 * 28, max_pixels=64 * 64)  # fmt: skip
    exports.write_export(made)
    made.refresh_from_db()
    return made


def test_it_trains_the_tiny_model_with_lora_on_the_gpu_queue_and_registers_the_checkpoint(
    export, tiny_model_dir, researcher
):
    params = {"max_steps": 2, "lora": True, "lora_r": 4}
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        run = jobs.start_training(export=export, base_model=str(tiny_model_dir), hyperparameters=params,
                                  user=researcher)  # fmt: skip
    assert run.job.queue == Job.Queue.GPU
    assert run.export_sha256 == export.manifest_sha256 and len(run.commit) == 40
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.DONE and run.metrics["global_step"] == 2
    assert (settings.MEDIA_ROOT / run.checkpoint / "config.json").is_file()
    assert run.hyperparameters["lora"] is True and run.hyperparameters["learning_rate"] == 1e-4
    endpoint = train.register_endpoint(run, name="pem-tiny", user=researcher)
    assert endpoint.kind == ModelEndpoint.Kind.TRANSFORMERS
    [completion] = engines.local_chat_batch(endpoint, [[{"role": "user", "content": "步骤1：$1+1=2$"}]],
                                            {"max_tokens": 3})  # fmt: skip
    assert completion.completion_tokens >= 1
    assert "vllm serve" in train.vllm_serve_command(run) and '"max_pixels": 4096' in train.vllm_serve_command(run)


def test_it_refuses_an_export_whose_images_are_missing_before_training(export, researcher, english):
    for image in (exports.export_path(export) / "images").iterdir():
        image.unlink()
    with pytest.raises(train.TrainingError, match="images are missing"):
        train.start_training(export=export, base_model="/nowhere", hyperparameters={}, user=researcher)
    with pytest.raises(CommandError, match="images are missing"):
        call_command("train_pem", str(export.pk), "--base-model", "/nowhere", stdout=StringIO())
    assert not TrainingRun.objects.exists()
