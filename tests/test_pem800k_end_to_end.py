"""Issue 12's "Done when", end to end on this machine, through the real services and jobs.

A campaign over three endpoints (the real local ``transformers serve`` tiny model and two scripted
models), a model split (one chain's split is not in its text: the rule split is the recorded
fallback), a four-judge panel with a strict-majority threshold (one judge answers garbage for some
chains: missing votes, never guessed), the four filters with their funnel, an export in all four
formats (each line checked against its format's rules), ``train_pem`` training the tiny model with
TRL on the TRL export (the loss on the answers only), the checkpoint registered as a PEM endpoint,
and a step-by-step scoring run with it, prompted as the export's examples are, that labels every step.

Jobs run eagerly (``execute_job``, the broker send mocked), as the other job tests do.
"""

import json
from unittest import mock

import pytest
from django.conf import settings as django_settings

from inference import campaigns, prompts, scoring, services
from inference.default_prompts import PromptKind
from inference.models import JudgedStep, Judgment, ModelEndpoint, ScoringRun
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.vocabulary import LABEL_CODES
from pem import panel, splitting
from pem.models import ChainOfThought, SplitResult, StepLabel, TrainingExport, TrainingRun
from pem.training import exports, formats, jobs, train
from tests.annotation_factories import make_question
from tests.job_runs import run_with_parts
from tests.model_server import (
    ML_PYTHON,
    MODEL_NAME,
    MODEL_REVISION,
    build_model_subprocess,
    ml_venv_missing_reason,
)
from tests.scripted_models import Servers, user_text

pytestmark = pytest.mark.django_db

# Every line numbered, the final answer too: the rule split keeps the step texts without their numbers,
# and the export's prompt (formats.user_text) numbers them again, so the PEM is trained on the answer
# exactly as the scoring run shows it (the tiny model only repeats what it learnt for that exact prompt).
RIGHT = "步骤1：由题意 $x=2$。\n步骤2：代入得 $y=4$。\n步骤3：最终答案：B"
RIGHT_STEPS = ["由题意 $x=2$。", "代入得 $y=4$。", "最终答案：B"]  # the rule split
WRONG = "步骤1：设 $x=3$。\n步骤2：计算得 $2x=5$。\n最终答案：B"
# The prompt register_endpoint gives the PEM: an answer shown as formats.user_text shows a training example.
PEM_USER_TEMPLATE = (
    "题目：\n${question_with_options}\n\n参考答案：\n${reference_answer_lines}\n\n学生解答：\n${model_answer}"
)
# Enough for the tiny model (2 layers, width 64) to learn its two examples' answer; the former 4 steps at
# 1e-4 left it writing noise, and 2e-2 is unstable for it.
TINY_TRAINING = {"max_steps": 100, "learning_rate": 1e-2, "gradient_checkpointing": False}
WRONG_LABELS = [("CS", ""), ("CE", "计算错误：2x 应为 6"), ("CS", "")]


def splitter_reply(body):
    text = user_text(body)
    if "$2x=5$" in text:
        return 200, json.dumps({"steps": WRONG.split("\n")}, ensure_ascii=False)
    return 200, json.dumps({"steps": ["这一步不在解答里。"]}, ensure_ascii=False)  # not in the chain: fallback


def judge_reply(name):
    def reply(body):
        text = user_text(body)
        if "$y=4$" in text:
            steps = [{"step": s, "label": "CS", "reason": ""} for s in RIGHT_STEPS]
        elif "$2x=5$" in text:
            if name == "j4":
                return 200, "我不确定。"  # garbage: j4 casts no vote on this chain
            steps = [{"step": s, "label": label, "reason": why}
                     for s, (label, why) in zip(WRONG.split("\n"), WRONG_LABELS, strict=True)]  # fmt: skip
        else:  # the tiny model's random text: one error covering all of it
            steps = [{"step": text, "label": "LRE", "reason": "答非所问"}]
        return 200, json.dumps({"steps": steps}, ensure_ascii=False)

    return reply


@pytest.fixture
def scripted():
    servers = Servers()
    replies = {"right": lambda body: (200, RIGHT), "wrong": lambda body: (200, WRONG), "splitter": splitter_reply}
    replies |= {f"j{n}": judge_reply(f"j{n}") for n in range(1, 5)}
    yield servers.start(replies)
    servers.stop()


@pytest.fixture
def tiny_model_dir(tmp_path_factory):
    reason = ml_venv_missing_reason()
    if reason:
        pytest.skip(reason)
    hf_home = tmp_path_factory.mktemp("hf-e2e")
    build_model_subprocess(hf_home)
    return hf_home / "hub" / ("models--" + MODEL_NAME.replace("/", "--")) / "snapshots" / MODEL_REVISION


def endpoint(name, base_url, **fields) -> ModelEndpoint:
    fields.setdefault("accepts_images", False)
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=name, base_url=base_url, model_name=fields.pop("model", name), **fields),
        user=None,
    )


def run_job(job_id) -> None:
    assert execute_job(job_id) == Job.Status.SUCCEEDED, Job.objects.get(pk=job_id).error


@pytest.mark.slow
@pytest.mark.timeout(900)  # 100 training steps on CPU: about 300 s alone, more beside other suites
def test_a_researcher_goes_from_a_campaign_to_a_trained_pem_that_scores_step_by_step(
    tiny_model_server,  # noqa: F811
    tiny_model_dir,
    scripted,
    researcher,
    settings,
    tmp_path,
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    settings.MODEL_CALL_RETRIES = 0
    base_url, model_name = tiny_model_server
    questions = [make_question(subject="math", answers=["B"]) for _ in range(2)]
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        # 1. A campaign over three endpoints, one of them the real transformers serve model.
        models = [
            endpoint("tiny", base_url, model=model_name, default_params={"max_tokens": 8, "temperature": 0}),
            endpoint("right", scripted),
            endpoint("wrong", scripted),
        ]
        campaign = campaigns.start_campaign(name="PEM-800K e2e", endpoints=models, mode="step_by_step",
                                            filters={"subject": "math"}, user=researcher, seed=7)  # fmt: skip
        run_job(campaign.job_id)
        summary = campaigns.summary(campaign)
        assert (summary.ok, summary.failed, summary.finished) == (6, 0, True)
        runs = {run.endpoint.name: run for run in campaign.runs.select_related("endpoint")}

        # 2. A model split: the wrong chains take the model's steps, the others keep the rule split, recorded.
        split = splitting.start_split_run(splitter=endpoint("splitter", scripted), inference_runs=list(runs.values()),
                                          user=researcher)  # fmt: skip
        run_job(split.job_id)
        assert splitting.counts(split) | {"total": 6} == {**splitting.counts(split), "model": 2, "fallback": 4}
        fallback = SplitResult.objects.filter(split_run=split, outcome="fallback").first()
        assert "not in the chain" in fallback.error and fallback.cot.splitter == "rule"
        assert set(ChainOfThought.objects.filter(response_text=WRONG).values_list("splitter", flat=True)) == {
            "model:splitter"
        }
        assert [list(c.steps.order_by("position").values_list("text", flat=True))
                for c in ChainOfThought.objects.filter(response_text=RIGHT)] == [RIGHT_STEPS] * 2  # fmt: skip

        # 3. Four judges, a strict majority of three; j4's garbage is missing votes, not a guess.
        judges = [endpoint(f"j{n}", scripted) for n in range(1, 5)]
        board = panel.start_panel(name="four", inference_runs=list(runs.values()), judges=judges, user=researcher)
        assert board.threshold == 3
        assert run_with_parts(board.job_id) == Job.Status.SUCCEEDED  # one job per judge, as parts of the panel's
        board.refresh_from_db()
        assert board.counts["missing_votes"]["j4"] == 6 and board.counts["no_majority"] == 0
        assert board.counts["chains_fully_decided"] == 6

        # 4. The four filters over the panel's labels: the balance keeps correct chains only.
        params = {"coverage": {"min_models": 3}, "balance": {"target": {"correct": 1}, "seed": 3}}
        filtered = jobs.start_filters(source=StepLabel.Source.PANEL, rater="four", params=params, user=researcher)
        run_job(filtered.job_id)
        filtered.refresh_from_db()
        assert filtered.funnel["input"]["chains"] == 6 and filtered.kept == 2
        removed = {
            stage: filtered.funnel[stage]["chains"] for stage in ("format", "consistency", "coverage", "balance")
        }
        assert removed == {"format": 0, "consistency": 0, "coverage": 0, "balance": 4}
        assert filtered.params["coverage"]["min_models"] == 3  # thresholds recorded

        # 5. The export in all four formats, each line checked against its format.
        export = jobs.start_export(filter_run=filtered, user=researcher, min_pixels=28 * 28, max_pixels=64 * 64)
        run_job(export.job_id)
        export.refresh_from_db()
        assert export.status == TrainingExport.Status.DONE
        assert exports.verify_export(export) == dict.fromkeys(formats.FORMATS, 2)

        # 6. train_pem: TRL on the TRL export, the loss on the assistant's answers only (recorded).
        trained = jobs.start_training(export=export, base_model=str(tiny_model_dir), user=researcher,
                                      hyperparameters=TINY_TRAINING)  # fmt: skip
        assert trained.job.queue == Job.Queue.GPU and trained.hyperparameters["completion_only_loss"] is True
        run_job(trained.job_id)
        trained.refresh_from_db()
        assert trained.status == TrainingRun.Status.DONE and trained.metrics["global_step"] == 100
        assert trained.metrics["train_loss"] < 2  # a random model's loss over a 600-token vocabulary is ~6.4
        assert (django_settings.MEDIA_ROOT / trained.checkpoint / "config.json").is_file()

        # 7. The checkpoint registered as the PEM, and a step-by-step scoring run with it, prompted the way
        # the export showed it its examples (a PEM reads the prompt it was trained on).
        pem = train.register_endpoint(trained, name="pem-tiny", user=researcher)
        assert pem.kind == ModelEndpoint.Kind.TRANSFORMERS
        global_judge = prompts.current(PromptKind.JUDGE_STEPS, "multiple_choice")
        assert pem.judge_prompt.system == formats.SYSTEM_PROMPT and pem.judge_prompt.user_template == PEM_USER_TEMPLATE
        scored = scoring.start_scoring_run(inference_run=runs["right"], judge=pem, method=ScoringRun.Method.JUDGE_STEPS,
                                           user=researcher, params={"max_tokens": 256, "temperature": 0})  # fmt: skip
        assert scored.job.kind == "inference.score_local" and scored.job.queue == Job.Queue.CPU
        # The PEM's own prompt for every type, recorded; every other judge keeps the studio's.
        assert {p["id"] for p in scored.provenance["prompts"].values()} == {pem.judge_prompt_id}
        assert prompts.current(PromptKind.JUDGE_STEPS, "multiple_choice") == global_judge
        run_job(scored.job_id)
    # The trained PEM's own greedy answers, read into step labels: every step of both chains, as correct.
    judgments = Judgment.objects.filter(scoring_run=scored)
    assert [(j.status, j.error) for j in judgments] == [("ok", "")] * 2, [j.raw_output for j in judgments]
    assert all(j.attempts == 1 and j.score == 1 for j in judgments)
    for judgment in judgments:
        steps = list(JudgedStep.objects.filter(judgment=judgment).order_by("position"))
        assert [s.text for s in steps] == RIGHT_STEPS
        assert {s.label for s in steps} <= set(LABEL_CODES) and [s.label for s in steps] == ["CS"] * 3
    coverage = scoring.coverage(scored)
    assert (coverage["total"], coverage["scored"], coverage["pending"]) == (2, 2, 0)
    assert len(questions) == 2


def test_a_local_pem_judges_steps_in_the_training_format(researcher, settings):
    """The score_local job reads a PEM's answer in the export's target format (the judge's structured
    output) into step labels; an answer it cannot read is asked again in the next round."""
    from inference import engines
    from inference.client import Completion
    from tests.pem_factories import answer, make_run

    run = make_run(mode="step_by_step")
    answer(run, make_question(answers=["B"]), WRONG)
    local = ModelEndpoint(name="pem", kind=ModelEndpoint.Kind.TRANSFORMERS, model_name="/ckpt", accepts_images=True)
    pem = services.save_endpoint(endpoint=local, user=None)
    target = formats.assistant_text({"steps": WRONG.split("\n"), "labels": WRONG_LABELS})
    replies = iter([["还没想好"], [target]])

    def chat_batch(endpoint, conversations, params, seed=None):
        assert endpoint == pem and conversations[0][-1]["role"] == "user"
        return [Completion(text=text, latency_ms=5, prompt_tokens=9, completion_tokens=9, finish_reason="stop",
                           attempts=1) for text in next(replies)]  # fmt: skip

    with mock.patch("k12vista.tasks.run_job.apply_async"), mock.patch.object(engines, "local_chat_batch", chat_batch):
        scored = scoring.start_scoring_run(inference_run=run, judge=pem, method=ScoringRun.Method.JUDGE_STEPS,
                                           user=researcher)  # fmt: skip
        run_job(scored.job_id)
    judgment = Judgment.objects.get(scoring_run=scored)
    assert judgment.status == "ok" and judgment.attempts == 2 and judgment.score == pytest.approx(2 / 3)
    assert [(s.label, s.reason) for s in JudgedStep.objects.filter(judgment=judgment).order_by("position")] == [
        ("CS", ""),
        ("CE", "计算错误：2x 应为 6"),
        ("CS", ""),
    ]
