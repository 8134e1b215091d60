"""A real Celery worker process on the configured broker (filesystem, Redis or
RabbitMQ) and the test database: the job mechanism end to end."""

import json
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from k12vista import jobs
from k12vista.models import Job
from k12vista.tasks import run_job

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def wait_for(job: Job, timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_finished:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job.pk} still {job.status} after {timeout}s")


def test_it_runs_a_job_on_a_real_worker(worker, researcher):
    job = jobs.start_job(kind="k12vista.worker_check_io", user=researcher)  # enqueued on commit (autocommit)
    job = wait_for(job)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.result["queue"] == "io"
    assert job.result["status_seen_by_worker"] == "running"
    assert job.attempts == 1


def test_it_runs_a_job_delivered_twice_only_once(worker, researcher):
    job = jobs.start_job(kind="k12vista.worker_check", user=researcher)
    run_job.apply_async((job.pk,), queue="cpu")  # a duplicate delivery of the same job
    job = wait_for(job)
    time.sleep(1.5)  # let the duplicate be consumed too
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert job.attempts == 1


def test_it_finishes_a_job_whose_worker_crashed(worker, researcher):
    """The message of a job whose worker died is delivered again (acks_late);
    the stale heartbeat lets the new worker take it over."""
    job = Job.objects.create(kind="k12vista.worker_check", started_by=researcher, status=Job.Status.RUNNING)
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS + 5), attempts=1
    )
    run_job.apply_async((job.pk,), queue="cpu")
    job = wait_for(job)
    assert job.status == Job.Status.SUCCEEDED
    assert job.attempts == 2


def test_a_real_worker_imports_answers_with_the_local_model_and_exports(
    worker,
    researcher,
    tiny_model_server,
    tmp_path,  # noqa: F811
):
    """The pipeline's own jobs, not check jobs, through the broker: a JSONL
    import, an inference run against the local `transformers serve` model and
    an export, each started by the same service call as its page."""
    from annotation.jsonl_import import register_upload, start_import
    from annotation.models import Question
    from inference import services
    from inference.models import ModelEndpoint, Response
    from tests.test_jsonl_import import release_file

    document = register_upload(path=release_file(tmp_path), user=researcher)
    imported = wait_for(start_import(document=document, user=researcher), timeout=120)
    assert imported.status == Job.Status.SUCCEEDED, imported.error
    assert imported.result["created"] == Question.objects.filter(source_document=document).count() == 10

    base_url, model_name = tiny_model_server
    endpoint = services.save_endpoint(
        endpoint=ModelEndpoint(name="tiny", base_url=base_url, model_name=model_name,
                               default_params={"max_tokens": 4, "temperature": 0}),
        user=researcher,
    )  # fmt: skip
    run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=researcher)
    answered = wait_for(run.job, timeout=300)
    assert answered.status == Job.Status.SUCCEEDED, answered.error
    assert Response.objects.filter(run=run, status=Response.Status.OK).count() == 10
    assert not Response.objects.filter(run=run).exclude(status=Response.Status.OK).exists()

    export = jobs.start_job(kind="annotation.export_questions", user=researcher,
                            params={"filters": {}, "fmt": "reference"})  # fmt: skip
    export = wait_for(export, timeout=120)
    assert export.status == Job.Status.SUCCEEDED, export.error
    written = (settings.MEDIA_ROOT / export.result["path"]).read_text(encoding="utf-8").splitlines()
    assert len(written) == export.result["count"] == 10
    assert {json.loads(line)["hash_id"] for line in written} == set(Question.objects.values_list("hash_id", flat=True))


def test_a_real_worker_imports_pem800k_through_its_reader_process(worker, researcher, tmp_path):
    """The PEM-800K import job on a worker: on PostgreSQL its lines are read by pem.training.reader,
    a process the worker's own (daemonic) process starts; elsewhere in the worker itself."""
    from bench.generate import iter_pem
    from pem.models import ChainOfThought, Step, StepLabel
    from pem.training import jobs as training_jobs

    records = list(iter_pem(0.0001, 3))[:40]
    path = tmp_path / "pem.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + "not json\n")
    job = wait_for(training_jobs.start_import(path=str(path), name="pem800k", user=researcher), timeout=120)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert (job.result["created"], job.result["failed"]) == (40, 1)
    assert job.done == job.total == 41
    assert ChainOfThought.objects.count() == 40
    assert (
        StepLabel.objects.filter(rater="pem800k").count()
        == Step.objects.count()
        == sum(len(r["step_labels"]) for r in records)
    )
