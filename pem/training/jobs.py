"""PEM-800K's background work: import, filters, training export, training.

Each handler takes ids from the job's params, calls one service and is safe to
run again: the import skips chains it has, the filters and the export start
from scratch on their own rows, training writes its own checkpoint directory.
"""

from __future__ import annotations

from typing import Any

from django.db import OperationalError

from k12vista import job_text
from k12vista.jobs import Progress, TransientJobError, job_handler, start_job
from k12vista.models import Job
from pem import job_shapes as shapes
from pem.models import FilterRun, TrainingExport, TrainingRun
from pem.training import exports, filters, pem800k_import, train

IMPORT = "pem.import_pem800k"
FILTER = "pem.filter_pem800k"
EXPORT = "pem.export_training"
TRAIN = "pem.train_pem"
KINDS = (IMPORT, FILTER, EXPORT, TRAIN)


def start_import(*, path: str, name: str, user: Any) -> Job:
    """``path`` is a file the workers can read (an upload kept in storage, or a server path from the command)."""
    return start_job(
        kind=IMPORT,
        user=user,
        params={"path": path, "name": name},
        title=job_text.title("import_pem800k", name=name),
    )


def start_filters(*, source: str, rater: str, params: dict | None, user: Any) -> FilterRun:
    run = filters.start_filter_run(source=source, rater=rater, params=params, user=user)
    run.job = start_job(
        kind=FILTER,
        user=user,
        params={"filter_run_id": run.pk},
        title=job_text.title("filter_pem800k", rater=rater),
    )
    run.save(update_fields=["job"])
    return run


def start_export(*, filter_run: FilterRun, user: Any, **options: Any) -> TrainingExport:
    export = exports.start_export(filter_run=filter_run, user=user, **options)
    export.job = start_job(kind=EXPORT, user=user, params={"export_id": export.pk},
                           title=job_text.title("training_export", id=filter_run.pk))  # fmt: skip
    export.save(update_fields=["job"])
    return export


def start_training(*, export: TrainingExport, base_model: str, hyperparameters: dict | None, user: Any) -> TrainingRun:
    run = train.start_training(export=export, base_model=base_model, hyperparameters=hyperparameters, user=user)
    run.job = start_job(kind=TRAIN, user=user, params={"training_run_id": run.pk},
                        title=job_text.title("train_pem", id=export.pk))  # fmt: skip
    run.save(update_fields=["job"])
    return run


@job_handler(IMPORT, queue=Job.Queue.CPU, params=shapes.Pem800kParams, result=shapes.Pem800kResult)
def import_job(job: Job, progress: Progress) -> dict:
    """Run again after a crash, it counts the chains already written as unchanged."""
    try:
        return pem800k_import.import_pem800k(
            path=job.params["path"], name=job.params.get("name", ""), progress=progress
        )
    except OperationalError as exc:
        raise TransientJobError(str(exc)) from exc


@job_handler(FILTER, queue=Job.Queue.CPU, params=shapes.FilterRunParams, result=shapes.FilterRunResult)
def filter_job(job: Job, progress: Progress) -> dict:
    return filters.run_filters(FilterRun.objects.get(pk=job.params["filter_run_id"]), progress=progress)


@job_handler(EXPORT, queue=Job.Queue.CPU, params=shapes.TrainingExportParams, result=shapes.TrainingExportResult)
def export_job(job: Job, progress: Progress) -> dict:
    export = TrainingExport.objects.select_related("filter_run").get(pk=job.params["export_id"])
    try:
        return exports.write_export(export, progress=progress)
    except exports.ExportError as exc:
        export.status, export.error = TrainingExport.Status.FAILED, str(exc)
        export.save(update_fields=["status", "error"])
        raise


@job_handler(TRAIN, queue=Job.Queue.GPU, params=shapes.TrainingRunParams, result=shapes.TrainingResult)
def train_job(job: Job, progress: Progress) -> dict:
    run = TrainingRun.objects.select_related("export").get(pk=job.params["training_run_id"])
    return train.run_training(run, progress=progress)
