"""A judge panel on real Celery worker processes (the configured broker and the test database):
two offline-engine judges, each judge's job split into parts, judged in parallel by the workers of
their GPU class; the panel votes when both have ended."""

import os
from collections import Counter

import pytest

from inference import services
from inference.models import ModelEndpoint
from k12vista.models import Job
from pem import panel
from tests.annotation_factories import make_question
from tests.conftest import start_worker, stop_worker
from tests.pem_factories import answer, make_run
from tests.test_run_parts_workers import wait

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

FAKE_VLLM = r'''
"""A stand-in for vllm in the worker: a step judge that answers only once both judges have begun,
so neither judge's part can end before the other judge's job is running too."""
import json, os, re, time
from pathlib import Path
from types import SimpleNamespace

MARK = re.compile(r"甲(\d+)。")


class SamplingParams:
    def __init__(self, **options):
        self.options = options


class LLM:
    def __init__(self, model, **options):
        self.model = model

    def chat(self, conversations, sampling_params=None, use_tqdm=False):
        meeting = Path(os.environ["FAKE_VLLM_MEETING"])
        judge = self.model.rsplit("/", 1)[-1]
        (meeting / f"{judge}-{os.getpid()}").touch()
        deadline = time.monotonic() + 240  # the other judge's worker may start slowly on a loaded machine
        while len({p.name.split("-")[0] for p in meeting.iterdir()}) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the other judge never began")
            time.sleep(0.05)
        outputs = []
        for conversation in conversations:
            n = MARK.findall(json.dumps(conversation, ensure_ascii=False))[-1]
            with open(os.environ["FAKE_VLLM_LOG"], "a") as log:
                log.write(f"{judge} {n}\n")
            steps = [{"step": f"{s}{n}。", "label": "CS", "reason": judge} for s in ("甲", "乙")]
            outputs.append(SimpleNamespace(prompt_token_ids=[1], outputs=[SimpleNamespace(
                text=json.dumps({"steps": steps}, ensure_ascii=False), token_ids=[1], finish_reason="stop")]))
        return outputs
'''


@pytest.mark.timeout(600)  # four worker processes start on 2 shared cores
def test_a_panel_of_two_offline_judges_is_judged_in_parallel_in_parts(researcher, settings, tmp_path):
    settings.GPU_CLASSES = ["1x80g"]
    package = tmp_path / "site" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_VLLM)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    log = tmp_path / "calls.log"
    path = os.pathsep.join(filter(None, [str(package.parent), os.environ.get("PYTHONPATH")]))
    env = {"GPU_CLASSES": "1x80g", "RUN_PART_SIZE": "2", "FAKE_VLLM_MEETING": str(meeting),
           "FAKE_VLLM_LOG": str(log), "PYTHONPATH": path}  # fmt: skip
    run = make_run()
    for n in range(1, 5):
        answer(run, make_question(), f"步骤1：甲{n}。\n步骤2：乙{n}。")
    judges = [
        services.save_endpoint(endpoint=ModelEndpoint(name=name, kind=ModelEndpoint.Kind.VLLM_OFFLINE,
                                                      model_name=f"/models/{name}", accepts_images=False), user=None)
        for name in ("j1", "j2")
    ]  # fmt: skip
    # Three GPU workers: two parts of one judge waiting for the other judge leave a third free to start it.
    workers = [start_worker(name="io", queues="io", **env)]
    workers += [start_worker(name=f"gpu{n}", queues="gpu-1x80g", **env) for n in (1, 2, 3)]
    try:
        board = panel.start_panel(name="two judges", inference_runs=[run], judges=judges, user=researcher)
        wait(lambda: Job.objects.get(pk=board.job_id).is_finished, timeout=400, what="the panel to end")
    finally:
        for process in workers:
            stop_worker(process)
    whole = Job.objects.get(pk=board.job_id)
    assert whole.status == Job.Status.SUCCEEDED, whole.error
    per_judge = list(Job.objects.filter(params__part_of=board.job_id).order_by("id"))
    assert [(j.kind, j.queue, j.status) for j in per_judge] == [
        ("inference.score_offline", "gpu-1x80g", Job.Status.SUCCEEDED)
    ] * 2
    for judge_job in per_judge:  # each judge's job split into two parts of two chains
        parts = Job.objects.filter(params__part_of=judge_job.pk)
        assert sorted(parts.values_list("status", "total")) == [(Job.Status.SUCCEEDED, 2)] * 2
    # Every step judged exactly once per judge: one call per chain and judge, no more.
    calls = Counter(tuple(line.split()) for line in log.read_text().splitlines())
    assert calls == {(j, str(n)): 1 for j in ("j1", "j2") for n in range(1, 5)}
    # Both judges' jobs ran at once: a judge's engine answers only once the other judge's has begun (a panel
    # judged one judge after the other fails with "the other judge never began"). Polling the parts' statuses
    # for the overlap missed it on a quiet machine: once both have begun, both end within milliseconds.
    assert {name.split("-")[0] for name in os.listdir(meeting)} == {"j1", "j2"}
    board.refresh_from_db()
    assert (board.counts["steps"], board.counts["decided"]) == (8, 8)
    assert (whole.done, whole.total) == (8, 8)
