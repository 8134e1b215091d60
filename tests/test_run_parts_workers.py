"""Runs split into parts on real Celery worker processes (the configured broker and the test
database): several workers share one run, and an offline run's parts go only to the workers of
the GPU class its endpoint fits."""

import os
import time
from pathlib import Path

import pytest

from inference import services
from inference.models import ModelEndpoint, Response
from k12vista import jobs
from k12vista.models import PARKED_TOKEN, Job
from tests.annotation_factories import make_question
from tests.conftest import start_worker, stop_worker
from tests.test_inference_runs import Scripted, scripted_server  # noqa: F401 (fixture)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def wait(condition, timeout=120, what="condition", every=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def workers_ready(queue_kind: str, n: int) -> None:
    """Waits until ``n`` workers hold a job at once: each holds one (solo pool), so all ``n`` are up."""
    checks = [jobs.start_job(kind=queue_kind, user=None, params={"hold_seconds": 4}) for _ in range(n)]
    wait(lambda: Job.objects.filter(pk__in=[c.pk for c in checks], status=Job.Status.RUNNING).count() == n,
         what=f"{n} workers holding a check job each")  # fmt: skip
    wait(lambda: all(Job.objects.get(pk=c.pk).is_finished for c in checks), what="the check jobs to end")


def parts_of(job_id: int):
    return Job.objects.filter(params__part_of=job_id).order_by("id")


def test_two_io_workers_share_a_run_of_three_parts(scripted_server, researcher, monkeypatch):  # noqa: F811
    monkeypatch.setattr(Scripted, "delay", 0.3, raising=False)
    questions = [make_question(figures=[]) for _ in range(9)]
    endpoint = services.save_endpoint(
        endpoint=ModelEndpoint(name="m", base_url=scripted_server, model_name="m", max_concurrency=2), user=None
    )
    workers = [start_worker(name=name, queues="io", RUN_PART_SIZE="3") for name in ("a", "b")]
    try:
        workers_ready("k12vista.worker_check_io", 2)
        run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=researcher)
        at_once = [0]

        def finished() -> bool:
            held = parts_of(run.job_id).filter(status=Job.Status.RUNNING).exclude(claim_token=PARKED_TOKEN)
            at_once[0] = max(at_once[0], held.count())
            return Job.objects.get(pk=run.job_id).is_finished

        wait(finished, what="the run to end")
    finally:
        for process in workers:
            stop_worker(process)
    whole = Job.objects.get(pk=run.job_id)
    parts = list(parts_of(run.job_id))
    assert whole.status == Job.Status.SUCCEEDED, whole.error
    assert [(p.status, p.done, p.total) for p in parts] == [(Job.Status.SUCCEEDED, 3, 3)] * 3
    assert at_once[0] == 2  # two parts answered at the same time: one by each worker
    assert (whole.done, whole.total) == (9, 9) == (sum(p.done for p in parts), sum(p.total for p in parts))
    # Every question answered exactly once: one row each, one request each.
    assert sorted(run.responses.filter(status=Response.Status.OK).values_list("question_id", flat=True)) == sorted(
        q.pk for q in questions
    )
    assert len(Scripted.seen) == 9


FAKE_VLLM = '''
"""A stand-in for vllm in the worker: answers with its process id, once two workers have begun."""
import os, time
from pathlib import Path
from types import SimpleNamespace


class SamplingParams:
    def __init__(self, **options):
        self.options = options


class LLM:
    def __init__(self, model, **options):
        self.model = model

    def chat(self, conversations, sampling_params=None, use_tqdm=False):
        meeting = Path(os.environ["FAKE_VLLM_MEETING"])
        (meeting / str(os.getpid())).touch()
        deadline = time.monotonic() + 60
        while len(list(meeting.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        return [SimpleNamespace(prompt_token_ids=[1, 2, 3], outputs=[SimpleNamespace(
            text=f"pid {os.getpid()} 答案：B", token_ids=[1], finish_reason="stop")]) for _ in conversations]
'''


def test_an_offline_run_is_shared_by_the_workers_of_its_gpu_class_only(researcher, settings, tmp_path):
    """Two workers of the class the endpoint fits meet inside the engine (neither can finish a part
    before the other has begun one), so both answer; the worker of the smaller class gets nothing."""
    settings.GPU_CLASSES = ["1x80g", "4x80g"]
    package = tmp_path / "site" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_VLLM)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    path = os.pathsep.join(filter(None, [str(package.parent), os.environ.get("PYTHONPATH")]))
    env = {"GPU_CLASSES": "1x80g,4x80g", "RUN_PART_SIZE": "2", "FAKE_VLLM_MEETING": str(meeting), "PYTHONPATH": path}
    for _ in range(6):
        make_question(figures=[])
    endpoint = services.save_endpoint(
        endpoint=ModelEndpoint(name="big", kind=ModelEndpoint.Kind.VLLM_OFFLINE, model_name="/models/big",
                               gpu_count=2, gpu_memory_gib=40),
        user=None,
    )  # fmt: skip
    big = [start_worker(name=f"big{n}", queues="gpu-4x80g", **env) for n in (1, 2)]
    small = start_worker(name="small", queues="gpu-1x80g", **env)
    try:
        run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={}, user=researcher)
        assert run.job.queue == "gpu-4x80g"
        wait(lambda: Job.objects.get(pk=run.job_id).is_finished, what="the run to end", every=0.3)
    finally:
        for process in [*big, small]:
            stop_worker(process)
    whole = Job.objects.get(pk=run.job_id)
    assert whole.status == Job.Status.SUCCEEDED, whole.error
    parts = list(parts_of(run.job_id))
    assert [(p.queue, p.status) for p in parts] == [("gpu-4x80g", Job.Status.SUCCEEDED)] * 3
    answered_by = {row.split()[1] for row in run.responses.values_list("raw_output", flat=True)}
    assert answered_by == {str(process.pid) for process in big}
    assert {Path(p).name for p in meeting.iterdir()} == answered_by
    assert run.counts() == {"total": 6, "ok": 6, "failed": 0, "pending": 0}
