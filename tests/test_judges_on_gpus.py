"""Judges on GPUs (issue 28 item 5): a scoring run with an offline-engine judge goes to the GPU
class queue its engine fits and is split into parts by judgment-id range (run_parts), and a judge
panel runs one job per judge, each split into parts, finishing when all its judges have. A
stand-in for the ``vllm`` module answers as a step judge; these jobs run here, as workers would
(tests/test_run_parts_workers.py-style worker processes: test_judges_on_gpus_workers.py)."""

import json
import re
import sys
from collections import Counter
from types import SimpleNamespace

import pytest

from inference import engines, scoring, services
from inference.models import Judgment, ModelEndpoint, ScoringRun
from k12vista.jobs import cancel_job, execute_job
from k12vista.models import Job
from pem import panel
from pem.models import PanelVote
from tests.annotation_factories import make_question
from tests.job_runs import run_with_parts, tree_of
from tests.pem_factories import answer, make_run

pytestmark = pytest.mark.django_db

MARK = re.compile(r"甲(\d+)。")


def chain(n: int) -> str:
    return f"步骤1：甲{n}。\n步骤2：乙{n}。"


def step_reply(model: str, conversation: list[dict]) -> str:
    """A step judge's JSON for the chain in the conversation: both steps correct."""
    text = json.dumps(conversation, ensure_ascii=False)
    n = MARK.findall(text)[-1]  # the chain's own marker comes last (after the prompt's fixed text)
    steps = [{"step": f"{s}{n}。", "label": "CS", "reason": f"{model} on {s}{n}"} for s in ("甲", "乙")]
    return json.dumps({"steps": steps}, ensure_ascii=False)


@pytest.fixture
def fake_vllm(monkeypatch):
    """A stand-in vllm module; ``calls`` holds (model, chain number) per judged conversation."""
    calls: list[tuple[str, int]] = []

    class LLM:
        def __init__(self, model, **options):
            self.model = model

        def chat(self, conversations, sampling_params=None, use_tqdm=False):
            outputs = []
            for conversation in conversations:
                calls.append((self.model, int(MARK.findall(json.dumps(conversation, ensure_ascii=False))[-1])))
                reply = step_reply(self.model, conversation)
                outputs.append(SimpleNamespace(prompt_token_ids=[1], outputs=[
                    SimpleNamespace(text=reply, token_ids=[1, 2], finish_reason="stop")]))  # fmt: skip
            return outputs

    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(LLM=LLM, SamplingParams=lambda **o: o))
    yield calls
    engines._engines.clear()  # the stand-in engines are not the next test's


@pytest.fixture
def cluster(settings):
    settings.GPU_CLASSES = ["1x80g", "4x80g"]
    settings.RUN_PART_SIZE = 2
    settings.MODEL_CALL_RETRIES = 0


def offline_judge(name: str, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=name, kind=ModelEndpoint.Kind.VLLM_OFFLINE, model_name=f"/models/{name}",
                               accepts_images=False, **fields),
        user=None,
    )  # fmt: skip


def chains_run(n: int):
    run = make_run()
    for i in range(1, n + 1):
        answer(run, make_question(), chain(i))
    return run


def parts_of(job_id: int) -> list[Job]:
    return list(Job.objects.filter(params__part_of=job_id).order_by("id"))


def test_an_offline_judge_scores_a_large_run_in_parts_on_the_gpu_class_it_fits(
    fake_vllm, cluster, researcher, no_broker
):
    judge = offline_judge("big-judge", gpu_count=2, gpu_memory_gib=40)
    scored = scoring.start_scoring_run(inference_run=chains_run(5), judge=judge, method=ScoringRun.Method.JUDGE_STEPS,
                                       user=researcher)  # fmt: skip
    assert (scored.job.kind, scored.job.queue) == ("inference.score_offline", "gpu-4x80g")
    assert execute_job(scored.job_id) == "parked"  # it made the judgments, started its parts and waits
    parts = parts_of(scored.job_id)
    assert [(p.kind, p.queue, p.total) for p in parts] == [("inference.score_offline", "gpu-4x80g", 2)] * 2 + [
        ("inference.score_offline", "gpu-4x80g", 1)
    ]
    assert not fake_vllm  # the whole job judged nothing itself
    assert run_with_parts(scored.job_id) == Job.Status.SUCCEEDED
    # Every chain judged exactly once, by the parts only.
    assert sorted(n for _model, n in fake_vllm) == [1, 2, 3, 4, 5]
    assert scoring.coverage(scored)["scored"] == 5
    whole = Job.objects.get(pk=scored.job_id)
    assert (whole.done, whole.total) == (5, 5)
    assert [p.status for p in parts_of(scored.job_id)] == [Job.Status.SUCCEEDED] * 3
    assert all(hasattr(r, "board_snapshot") for r in ScoringRun.objects.select_related("board_snapshot"))


def test_cancelling_a_scoring_run_cancels_its_parts_not_finished(fake_vllm, cluster, researcher, no_broker):
    scored = scoring.start_scoring_run(inference_run=chains_run(5), judge=offline_judge("j"),
                                       method=ScoringRun.Method.JUDGE_STEPS, user=researcher)  # fmt: skip
    assert scored.job.queue == "gpu-1x80g"
    execute_job(scored.job_id)
    first, *rest = parts_of(scored.job_id)
    assert execute_job(first.pk) == Job.Status.SUCCEEDED
    cancel_job(job=Job.objects.get(pk=scored.job_id))
    assert [execute_job(p.pk) for p in rest] == ["not-claimed", "not-claimed"]
    assert [Job.objects.get(pk=p.pk).status for p in rest] == [Job.Status.CANCELLED] * 2
    assert len(fake_vllm) == 2 and scored.judgments.filter(status=Judgment.Status.PENDING).count() == 3


def test_a_judge_that_fits_no_gpu_class_is_refused_before_anything_is_saved(cluster, researcher, no_broker, english):
    too_big = offline_judge("huge", gpu_count=8)
    with pytest.raises(services.EndpointError, match="no GPU class"):
        scoring.start_scoring_run(inference_run=chains_run(1), judge=too_big, method=ScoringRun.Method.JUDGE_STEPS,
                                  user=researcher)  # fmt: skip
    assert not ScoringRun.objects.exists() and not Job.objects.exists()


def test_a_panel_runs_one_job_per_judge_each_in_parts_and_votes_when_all_have_ended(
    fake_vllm, cluster, researcher, no_broker
):
    judges = [offline_judge("j1"), offline_judge("j2", gpu_count=4)]
    board = panel.start_panel(name="gpu panel", inference_runs=[chains_run(5)], judges=judges, user=researcher)
    assert execute_job(board.job_id) == "parked"
    per_judge = parts_of(board.job_id)
    assert [(j.kind, j.queue) for j in per_judge] == [("inference.score_offline", "gpu-1x80g"),
                                                      ("inference.score_offline", "gpu-4x80g")]  # fmt: skip
    assert run_with_parts(board.job_id) == Job.Status.SUCCEEDED
    for judge_job in per_judge:
        assert [p.queue for p in parts_of(judge_job.pk)] == [judge_job.queue] * 3  # 2 + 2 + 1 judgments
    # Every chain judged exactly once per judge.
    assert Counter(fake_vllm) == {(f"/models/{j}", n): 1 for j in ("j1", "j2") for n in range(1, 6)}
    board.refresh_from_db()
    assert (board.counts["steps"], board.counts["decided"], board.counts["no_majority"]) == (10, 10, 0)
    assert PanelVote.objects.filter(panel_run=board).count() == 10
    whole = Job.objects.get(pk=board.job_id)
    assert (whole.status, whole.done, whole.total) == (Job.Status.SUCCEEDED, 10, 10)
    assert all(Job.objects.get(pk=pk).status == Job.Status.SUCCEEDED for pk in tree_of(board.job_id))


def test_a_panel_fails_when_a_judge_fails_and_a_restart_judges_only_what_is_left(
    fake_vllm, cluster, researcher, no_broker, monkeypatch
):
    judges = [offline_judge("j1"), offline_judge("j2")]
    board = panel.start_panel(name="p", inference_runs=[chains_run(3)], judges=judges, user=researcher)
    real_chat = sys.modules["vllm"].LLM.chat

    def broken_for_j2(self, conversations, **options):
        if self.model == "/models/j2":
            raise RuntimeError("CUDA out of memory")
        return real_chat(self, conversations, **options)

    monkeypatch.setattr(sys.modules["vllm"].LLM, "chat", broken_for_j2)
    assert run_with_parts(board.job_id) == Job.Status.FAILED
    failed = Job.objects.get(pk=board.job_id)
    assert failed.error_code == panel.JUDGES_FAILED and "CUDA out of memory" in failed.error
    assert failed.error.startswith("1 of the panel's 2 judge jobs failed; nothing was voted")
    assert not PanelVote.objects.exists()  # no vote on half the judges
    monkeypatch.setattr(sys.modules["vllm"].LLM, "chat", real_chat)
    board.refresh_from_db()
    again = panel.restart_panel(panel=board, user=researcher)
    assert run_with_parts(again.pk) == Job.Status.SUCCEEDED
    assert Counter(fake_vllm) == {(f"/models/{j}", n): 1 for j in ("j1", "j2") for n in range(1, 4)}
    board.refresh_from_db()
    assert board.counts["decided"] == 6


def test_rescoring_with_an_offline_judge_that_no_longer_fits_is_refused_and_changes_nothing(
    fake_vllm, cluster, researcher, no_broker, settings, login
):
    run = chains_run(1)
    run.created_by = researcher
    run.save()
    scored = scoring.start_scoring_run(inference_run=run, judge=offline_judge("j", gpu_count=4),
                                       method=ScoringRun.Method.JUDGE_STEPS, user=researcher)  # fmt: skip
    assert run_with_parts(scored.job_id) == Job.Status.SUCCEEDED
    scored.judgments.update(status=Judgment.Status.CALL_FAILED)
    settings.GPU_CLASSES = ["1x80g"]
    reply = login(researcher).post(f"/api/scoring/{scored.pk}/rescore/")
    assert reply.status_code == 400
    assert scored.judgments.get().status == Judgment.Status.CALL_FAILED and Job.objects.count() == 1
