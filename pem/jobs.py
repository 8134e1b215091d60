"""PEBench's background work: imports, exports, chains from runs and labels from scoring.

Each handler takes ids from the job's params, calls one service, and is safe
to run again: the services are idempotent. ``start_*`` functions are what
views, API endpoints and commands call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import OperationalError

from annotation.uploads import check_import_file
from inference.models import InferenceRun, ScoringRun
from k12vista import job_text
from k12vista.files import stored_name
from k12vista.import_files import ImportFileError
from k12vista.jobs import Progress, TransientJobError, job_handler, start_job
from k12vista.line_reasons import reason
from k12vista.models import Job
from pem import (  # noqa: F401
    agreement_store,
    build,
    chains,
    export,
    given_steps,
    panel,
    pebench_import,
    releases,
    services,
    splitting,
)
from pem import job_shapes as shapes
from pem.models import PEBenchBuild

# (The modules imported above register their job handlers on import.)
IMPORT = "pem.import_pebench"
EXPORT = "pem.export_pebench"
COTS_FROM_RUN = "pem.cots_from_run"
LABELS_FROM_SCORING = "pem.labels_from_scoring_run"
BUILD = "pem.build_pebench"
KINDS = (IMPORT, EXPORT, COTS_FROM_RUN, LABELS_FROM_SCORING, BUILD, agreement_store.KIND, releases.BUILD)


# --- starting -------------------------------------------------------------------------


def store_upload(uploaded_file: Any) -> str:
    """Keeps an uploaded import file under MEDIA_ROOT (the job reads it later); checks size and kind first."""
    if uploaded_file.size > settings.MAX_UPLOAD_BYTES:
        raise ImportFileError(reason("over_upload_limit", size=f"{uploaded_file.size:,}",
                                     limit=f"{settings.MAX_UPLOAD_BYTES:,}"))  # fmt: skip
    uploaded_file.seek(0)
    kind = check_import_file(uploaded_file, size=uploaded_file.size)
    # Our name and extension, never the uploader's: the file is served only through its job (pem/files.py).
    return default_storage.save(stored_name("pem-imports", "import", kind), uploaded_file)


def start_import(*, stored_name: str, name: str, user: Any) -> Job:
    """``stored_name`` is the file's name in default storage; ``name`` the rater of its labels."""
    return start_job(kind=IMPORT, user=user, params={"file": stored_name, "name": name},
                     title=job_text.title("import_pebench", name=name))  # fmt: skip


def start_build(*, target_size: int, min_steps: int, strata: list[str], seed: int, user: Any) -> Job:
    """Opening labelling for thousands of chains takes a while: the build runs as a job."""
    params = {"target_size": target_size, "min_steps": min_steps, "strata": list(strata), "seed": seed}
    return start_job(
        kind=BUILD,
        user=user,
        params=params,
        title=job_text.title("build_pebench", size=target_size, seed=seed),
    )


def start_export(*, user: Any, build: PEBenchBuild | None = None) -> Job:
    params = {"build_id": build.pk if build else None}
    return start_job(kind=EXPORT, user=user, params=params, title=job_text.title("export_pebench"))


def start_cots_from_run(*, inference_run: InferenceRun, user: Any) -> Job:
    chains.check_can_make_chains(inference_run)
    return start_job(kind=COTS_FROM_RUN, user=user, params={"inference_run_id": inference_run.pk},
                     title=job_text.title("cots_from_run", run=inference_run.name))  # fmt: skip


def start_labels_from_scoring_run(*, scoring_run: ScoringRun, user: Any) -> Job:
    chains.check_can_label(scoring_run)
    return start_job(kind=LABELS_FROM_SCORING, user=user, params={"scoring_run_id": scoring_run.pk},
                     title=job_text.title("labels_from_scoring_run", run=scoring_run.name))  # fmt: skip


# --- handlers -------------------------------------------------------------------------


@job_handler(IMPORT, queue=Job.Queue.CPU, params=shapes.ImportFileParams, result=shapes.ChainsImportResult)
def import_job(job: Job, progress: Progress) -> dict:
    """Safe to run again after a crash: lines already imported come back as unchanged."""
    try:
        report = pebench_import.import_records(
            path=default_storage.path(job.params["file"]), name=job.params.get("name", ""), progress=progress
        )
    except OperationalError as exc:  # a locked or restarting database: worth another try
        raise TransientJobError(str(exc)) from exc
    agreement_store.refresh_after_change()
    return report.as_dict()


@job_handler(EXPORT, queue=Job.Queue.CPU, params=shapes.ExportPebenchParams, result=shapes.ExportPebenchResult)
def export_job(job: Job, progress: Progress) -> dict:
    build_id = job.params.get("build_id")
    build = PEBenchBuild.objects.get(pk=build_id) if build_id else None
    name = export.export_file_name(job.pk)
    result = export.export_pebench(out_path=Path(settings.MEDIA_ROOT) / name, build=build, progress=progress)
    return {**result, "path": name}


@job_handler(COTS_FROM_RUN, queue=Job.Queue.CPU, params=shapes.InferenceRunParams, result=shapes.CotsFromRunResult)
def cots_from_run_job(job: Job, progress: Progress) -> dict:
    run = InferenceRun.objects.select_related("endpoint").get(pk=job.params["inference_run_id"])
    return chains.cots_from_run(inference_run=run, progress=progress)


@job_handler(LABELS_FROM_SCORING, queue=Job.Queue.CPU, params=shapes.ScoringRunParams,
             result=shapes.LabelsFromScoringResult)  # fmt: skip
def labels_from_scoring_run_job(job: Job, progress: Progress) -> dict:
    scoring_run = ScoringRun.objects.select_related("judge").get(pk=job.params["scoring_run_id"])
    result = chains.labels_from_scoring_run(scoring_run=scoring_run, progress=progress)
    agreement_store.refresh_after_change()
    return result


@job_handler(agreement_store.KIND, queue=Job.Queue.CPU, params=shapes.AgreementParams, result=shapes.AgreementResult)
def agreement_job(job: Job, progress: Progress) -> dict:
    """Run again, it computes again: the stored report is replaced whole."""
    stored = agreement_store.compute_and_store(job.params["scope"], job=job, progress=progress)
    return {"scope": stored.scope, "labels": stored.fingerprint["labels"], "seconds": stored.seconds}


def build_summary(build: PEBenchBuild) -> dict:
    return {"build_id": build.pk, "taken": build.counts["taken"], "shortfall": build.counts["shortfall"],
            "strata": build.counts["strata"]}  # fmt: skip


@job_handler(BUILD, queue=Job.Queue.CPU, params=shapes.BuildPebenchParams, result=shapes.BuildPebenchResult)
def build_job(job: Job, progress: Progress) -> dict:
    """Run again after a crash, it finds the build it made (one transaction) instead of making another."""
    made = PEBenchBuild.objects.filter(job=job).first()
    if made is None:
        progress(0, 1)
        made = build.build_pebench(**job.params, user=job.started_by, job=job)
    progress(1, 1)
    return build_summary(made)


# PEM-800K import, filters, training exports and training register their handlers there.
import pem.training.jobs  # noqa: E402, F401
