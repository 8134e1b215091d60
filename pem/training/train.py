"""Training the process evaluation model on an export: the record, the subprocess, the endpoint.

The training itself (pem/training/trainer.py) runs in ``TRANSFORMERS_PYTHON``
(the ml environment with torch, trl and peft) when set, else in this Python,
as a subprocess: the web and worker Python need no torch. Before it starts,
the export is checked: finished, with the TRL format, every image present.
The run's record holds the export's manifest hash, the base model, the
hyper-parameters and the studio's commit, so a checkpoint can be traced to
exactly what trained it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from inference import prompts
from inference.models import ModelEndpoint, PromptTemplate, Protocol
from inference.reference import register as reference_register
from inference.services import EndpointError, save_endpoint
from k12vista import job_text
from k12vista.job_text import JobFailure
from pem.models import TrainingExport, TrainingRun
from pem.training import exports, formats, trainer

TRAINING_TIMEOUT_S = 24 * 3600
HYPERPARAMETERS = tuple(trainer.DEFAULTS)


class TrainingError(ValueError):
    """The training cannot start or failed; the message says why."""


class ServerRefused(TrainingError):
    """The served form's server is refused (its base URL is not in MODEL_URL_ALLOWLIST, ...)."""


@job_text.failure_wording("pem.training_failed")
def _training_failed(params: dict[str, Any]) -> str:
    return gettext("training failed: %(detail)s") % params


class TrainingFailed(JobFailure, TrainingError):
    """The trainer itself failed: the job stores a code and the trainer's own words, worded in each
    reader's language where the job is shown (not in the worker's language once for everybody)."""


def commit() -> str:
    try:
        found = subprocess.run(  # noqa: S603 (a fixed command)
            ["git", "rev-parse", "HEAD"], cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=10,  # noqa: S607
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return found.stdout.strip() if found.returncode == 0 else ""


def check_export(export: TrainingExport) -> Path:
    """The export's directory, once it is finished, has the TRL format and every image it names."""
    if export.status != TrainingExport.Status.DONE:
        raise TrainingError(gettext("%(export)s is not finished") % {"export": export})
    if not export.records:  # the trainer would stop on its first batch with a bare StopIteration
        raise TrainingError(gettext("%(export)s has no records: nothing to train on") % {"export": export})
    if "trl" not in export.formats:
        raise TrainingError(
            gettext("%(export)s has no TRL format; export it with the trl format to train") % {"export": export}
        )
    root = exports.export_path(export)
    if not (root / formats.FILE_NAMES["trl"]).is_file():
        raise TrainingError(
            gettext("%(export)s: %(file)s is missing from %(directory)s")
            % {"export": export, "file": formats.FILE_NAMES["trl"], "directory": export.directory}
        )
    missing = trainer.missing_images(root, formats.FILE_NAMES["trl"])
    if missing:
        raise TrainingError(
            gettext("%(export)s: %(n)d images are missing (%(names)s); export again before training")
            % {"export": export, "n": len(missing), "names": ", ".join(sorted(set(missing))[:5])}
        )
    return root


def clean_hyperparameters(given: dict | None) -> dict:
    given = dict(given or {})
    unknown = set(given) - set(HYPERPARAMETERS)
    if unknown:
        raise TrainingError(gettext("unknown hyper-parameters: %(names)s") % {"names": ", ".join(sorted(unknown))})
    params = {**trainer.DEFAULTS, **given}
    for name in ("max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "lora_r"):
        if isinstance(params[name], bool) or not isinstance(params[name], int) or params[name] < 1:
            raise TrainingError(gettext("%(name)s must be a whole number >= 1") % {"name": name})
    for name in ("lora", "completion_only_loss", "gradient_checkpointing"):
        if not isinstance(params[name], bool):
            raise TrainingError(gettext("%(name)s must be true or false") % {"name": name})
    return params


def start_training(*, export: TrainingExport, base_model: str, hyperparameters: dict | None, user: Any) -> TrainingRun:
    check_export(export)
    if not base_model.strip():
        raise TrainingError(gettext("name the base model (a local path or a Hugging Face id the worker has)"))
    return TrainingRun.objects.create(
        export=export, export_sha256=export.manifest_sha256, base_model=base_model.strip(),
        hyperparameters=clean_hyperparameters(hyperparameters), commit=commit(), created_by=user,
    )  # fmt: skip


def checkpoint_dir(run: TrainingRun) -> Path:
    return Path(settings.MEDIA_ROOT) / f"pem-training/checkpoint-{run.pk}"


def run_training(run: TrainingRun, progress: Callable[[int, int | None], None] | None = None) -> dict:
    """Trains (again, from scratch, when run again) and records the checkpoint on the run."""
    root = check_export(run.export)
    python = settings.TRANSFORMERS_PYTHON or sys.executable
    if not Path(python).exists():
        raise TrainingError(
            gettext("TRANSFORMERS_PYTHON is %(python)s, which does not exist on this worker") % {"python": python}
        )
    out = checkpoint_dir(run)
    request = {"export_dir": str(root), "data_file": formats.FILE_NAMES["trl"], "base_model": run.base_model,
               "output_dir": str(out), "hyperparameters": run.hyperparameters}  # fmt: skip
    if progress:
        progress(0, 1)
    finished = subprocess.run(  # noqa: S603 (our own script, a configured interpreter)
        [python, str(Path(trainer.__file__))], input=json.dumps(request), capture_output=True, text=True,
        timeout=TRAINING_TIMEOUT_S,
    )  # fmt: skip
    answer = _last_json(finished.stdout)
    if finished.returncode != 0 or "checkpoint" not in answer:
        detail = answer.get("error") or finished.stderr.strip()[-2000:] or f"exit status {finished.returncode}"
        run.status, run.error, run.finished = TrainingRun.Status.FAILED, detail, timezone.now()
        run.save(update_fields=["status", "error", "finished"])
        raise TrainingFailed("pem.training_failed", {"detail": detail})
    run.status = TrainingRun.Status.DONE
    run.checkpoint = Path(answer["checkpoint"]).relative_to(settings.MEDIA_ROOT).as_posix()
    run.metrics = {k: answer[k] for k in ("global_step", "train_loss", "runtime_s")}
    run.finished, run.error = timezone.now(), ""
    run.save(update_fields=["status", "checkpoint", "metrics", "finished", "error"])
    if progress:
        progress(1, 1)
    return {"training_run": run.pk, "checkpoint": run.checkpoint, **run.metrics}


def _last_json(stdout: str) -> dict:
    """The trainer's answer is its last line; anything a library printed before is ignored."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return {}


def checkpoint_path(run: TrainingRun) -> Path:
    if run.status != TrainingRun.Status.DONE:
        raise TrainingError(gettext("%(run)s has no checkpoint yet") % {"run": run})
    return Path(settings.MEDIA_ROOT) / run.checkpoint


def trained_prompt(run: TrainingRun, *, user: Any) -> PromptTemplate:
    """The judge prompt the checkpoint learnt on. A studio-style export: the studio's PEM prompt as
    its own kind, reused by the next checkpoint trained on the same format, never current(). A
    K12-PEM-style export: the reference step-judge prompt of the set the export was written with
    (its scoring runs then read that set's prompt for each question type, in the reference protocol)."""
    if run.export.style == TrainingExport.Style.REFERENCE:
        try:
            return reference_register.reference_prompt(
                PromptTemplate.Kind.JUDGE_STEPS, prompts.QUESTION_TYPES[0], prompt_set=run.export.prompt_set
            )
        except LookupError as exc:
            raise TrainingError(str(exc)) from None
    return prompts.version_with_text(kind=PromptTemplate.Kind.JUDGE_STEPS_TRAINED, name="PEM-800K",
                                     system=formats.SYSTEM_PROMPT, user_template=formats.JUDGE_USER_TEMPLATE,
                                     user=user)  # fmt: skip


@transaction.atomic
def register_endpoint(run: TrainingRun, *, name: str, user: Any, base_url: str = "",
                      served_name: str = "") -> ModelEndpoint:  # fmt: skip
    """The trained checkpoint as an endpoint carrying the judge prompt it learnt on: a transformers
    (CPU) endpoint of the checkpoint, or, with ``base_url``, the OpenAI-compatible server that serves
    it (``vllm serve``, :func:`vllm_serve_command`) under ``served_name``."""
    path = checkpoint_path(run)
    if ModelEndpoint.objects.filter(name=name).exists():
        raise TrainingError(gettext("an endpoint named %(name)r exists already") % {"name": name})
    prompt = trained_prompt(run, user=user)
    if base_url:
        endpoint = ModelEndpoint(name=name, kind=ModelEndpoint.Kind.OPENAI, base_url=base_url,
                                 model_name=served_name or served_model_name(run), accepts_images=True,
                                 judge_prompt=prompt)  # fmt: skip
    else:
        endpoint = ModelEndpoint(name=name, kind=ModelEndpoint.Kind.TRANSFORMERS, model_name=str(path),
                                 accepts_images=True, max_concurrency=1, judge_prompt=prompt)  # fmt: skip
    try:
        endpoint = save_endpoint(endpoint=endpoint, user=user)
    except EndpointError as exc:
        raise ServerRefused(str(exc)) from None
    run.endpoint = endpoint
    run.save(update_fields=["endpoint"])
    return endpoint


def served_model_name(run: TrainingRun) -> str:
    return f"pem-{run.pk}"


# Where the base URL of the server the checkpoint is served on goes (vllm serve listens on port 8000).
SERVE_URL_PLACEHOLDER = "http://<gpu-host>:8000/v1"


def served_outline(run: TrainingRun) -> dict[str, Any] | None:
    """How a finished checkpoint is served and registered in its served form, read only (the training
    run's page and API show it): the ``vllm serve`` line, the base URL to give (a placeholder), the
    served model name, and the protocol and prompt the registered endpoint keeps."""
    if run.status != TrainingRun.Status.DONE:
        return None
    served = served_model_name(run)
    reference = run.export.style == TrainingExport.Style.REFERENCE
    Kind = PromptTemplate.Kind
    return {
        "vllm_serve": vllm_serve_command(run, name=served),
        "base_url": SERVE_URL_PLACEHOLDER,
        "served_name": served,
        "protocol": (Protocol.REFERENCE if reference else Protocol.STUDIO).value,
        "prompt_kind": (Kind.JUDGE_STEPS if reference else Kind.JUDGE_STEPS_TRAINED).value,
        "prompt_set": run.export.prompt_set if reference else "",
        "keeps_trained_prompt": True,
    }


def half_served_form(*, base_url: str, served_name: str) -> tuple[str, str] | None:
    """The field missing, and why, when the served form is given half (a base URL without the served
    name or the other way round): the API and the page take both or neither."""
    if bool(base_url) == bool(served_name):
        return None
    missing, given = ("served_name", "base_url") if base_url else ("base_url", "served_name")
    return missing, gettext("the served form takes %(missing)s with %(given)s, or neither") % {
        "missing": missing, "given": given,
    }  # fmt: skip


def served_form(run: TrainingRun, *, user: Any, base_url: str = "", served_name: str = "") -> dict[str, Any]:
    """What to register once the checkpoint is served: the body of ``POST /api/endpoints/`` (an
    openai endpoint carrying the trained judge prompt), with the ``vllm serve`` line that serves it."""
    served = served_name or served_model_name(run)
    reference = run.export.style == TrainingExport.Style.REFERENCE
    return {
        "endpoint": {
            "name": served,
            "kind": ModelEndpoint.Kind.OPENAI.value,
            "base_url": base_url or "http://127.0.0.1:8000/v1",
            "model_name": served,
            "judge_prompt": trained_prompt(run, user=user).pk,
        },  # fmt: skip
        "protocol": (Protocol.REFERENCE if reference else Protocol.STUDIO).value,
        "vllm_serve": vllm_serve_command(run, name=served),
    }


def vllm_serve_command(run: TrainingRun, *, name: str = "") -> str:
    """The ``vllm serve`` line for a GPU machine, with the export's pinned image pixels."""
    path = checkpoint_path(run)
    pixels = json.dumps({"min_pixels": run.export.min_pixels, "max_pixels": run.export.max_pixels})
    served = name or served_model_name(run)
    images = json.dumps({"image": 8})
    return (f"vllm serve {shlex.quote(str(path))} --served-model-name {shlex.quote(served)} "
            f"--mm-processor-kwargs {shlex.quote(pixels)} --limit-mm-per-prompt {shlex.quote(images)}")  # fmt: skip
