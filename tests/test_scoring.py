"""Scoring runs against real HTTP servers on this machine: a scripted judge
that answers by what it is asked about, and the tiny model for the whole path."""

import json
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inference import client, prompts, scoring, services
from inference.models import InferenceRun, JudgedStep, Judgment, ModelEndpoint, Response, ScoringRun
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question
from tests.scripted_models import ScriptedHandler, serve

DIRECT_OK = json.dumps({"reference_answers": ["B", "5"], "model_answers": ["B", "6"], "scores": [1, 0]})
DIRECT_FENCED = "好的，评分如下：\n```json\n" + json.dumps(
    {"reference_answers": ["$x=3$", "增大", "C"], "model_answers": ["$x=3$", "增大", "C"], "scores": [1, 1, 1]},
    ensure_ascii=False,
) + "\n```"  # fmt: skip
STEPS_JSON = json.dumps(
    {
        "steps": [
            {"step": "由 $x^2=4$ 得 $x=\\pm 2$。", "label": "CS", "reason": "正确"},
            {"step": "因为 $x>0$，所以 $x=2$。", "label": "CS", "reason": "正确"},
            {"step": "故选 C。", "label": "LRE", "reason": "由 $x=2$ 应选 B。"},
        ]
    },
    ensure_ascii=False,
)
# The public reference prompts' wrapper, with Chinese label names.
STEPS_EVALUATION = (
    "分析完毕。\n<evaluation>\n"
    "[['由图可知 AB=3，BC=4', '步骤正确', '读图正确'], ['AC=\\sqrt{3^2+4^2}=\\sqrt{24}', '运算处理错误', '应为25']]\n"
    "</evaluation>"
)
GIBBERISH = "嗯……这道题我觉得还行吧"


class Judge(ScriptedHandler):
    """Answers /v1/chat/completions by what the prompt is about: ``replies`` maps
    a marker in the messages to the judge's replies, in order; an int is an HTTP
    status, a str the content; the last reply repeats."""

    replies: dict[str, list[int | str]] = {}
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        type(self).seen.append(body)
        asked = json.dumps(body["messages"], ensure_ascii=False)
        queue = next((q for marker, q in type(self).replies.items() if marker in asked), ["no reply scripted"])
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(reply, int):
            return self.send_error_status(reply)
        return self.send_completion(body, reply, usage=(100, 20))


@pytest.fixture
def judge_server():
    Judge.replies, Judge.seen = {}, []
    with serve(Judge) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 2


def judge_endpoint(base_url, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "judge"), base_url=base_url,
                               model_name=fields.pop("model", "judge-72b"), **fields),
        user=None,
    )  # fmt: skip


def answered_run(mode: str, answers: list[str | None]) -> InferenceRun:
    """An inference run as its job leaves it: None is an answer that failed."""
    answerer, _ = ModelEndpoint.objects.get_or_create(name="student", defaults={"model_name": "student-7b"})
    run = InferenceRun.objects.create(name=f"student {mode}", endpoint=answerer, mode=mode)
    for answer in answers:
        Response.objects.create(
            run=run, question=make_question(), status="failed" if answer is None else "ok",
            raw_output=answer or "", error="HTTP 400: too long" if answer is None else "",
        )  # fmt: skip
    return run


def start(run: InferenceRun, judge: ModelEndpoint, user, method=None, **kwargs) -> ScoringRun:
    method = method or scoring.METHOD_OF_MODE[run.mode]
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return scoring.start_scoring_run(inference_run=run, judge=judge, method=method, user=user, **kwargs)


def score_now(scoring_run: ScoringRun) -> ScoringRun:
    assert execute_job(scoring_run.job_id) == Job.Status.SUCCEEDED
    scoring_run.refresh_from_db()
    return scoring_run


def judgment_of(scoring_run: ScoringRun, marker: str) -> Judgment:
    return scoring_run.judgments.get(response__raw_output__startswith=marker)


def test_it_scores_direct_answers_with_the_mean_of_item_scores(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [DIRECT_OK], "ANSWER-2": [DIRECT_FENCED]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B；6", "ANSWER-2 最终答案：x=3；增大；C"])
    scored = score_now(start(run, judge_endpoint(judge_server, max_concurrency=2), researcher))
    first, second = judgment_of(scored, "ANSWER-1"), judgment_of(scored, "ANSWER-2")
    assert (first.status, first.score, first.item_scores) == ("ok", 0.5, [1, 0])
    assert first.reference_answers == ["B", "5"] and first.model_answers == ["B", "6"]
    assert (second.status, second.score, second.raw_output) == ("ok", 1.0, DIRECT_FENCED)
    assert first.parsed["scores"] == [1, 0] and first.parse_status == "ok"
    assert (first.prompt_tokens, first.completion_tokens, first.attempts) == (100, 20, 1)
    assert first.latency_ms is not None and first.finished is not None
    assert scoring.coverage(scored) | {"coverage": None} == {
        "pending": 0, "ok": 2, "parse_failed": 0, "call_failed": 0, "no_response": 0,
        "scored": 2, "total": 2, "coverage": None,
    }  # fmt: skip


def test_it_puts_the_question_and_the_answer_in_the_judge_prompt(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [DIRECT_OK]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B"])
    score_now(start(run, judge_endpoint(judge_server), researcher))
    (sent,) = Judge.seen
    system, user = sent["messages"]
    assert system["role"] == "system" and "阅卷老师" in system["content"]
    assert "ANSWER-1 最终答案：B" in user["content"] and "已知 $x^2=4$" in user["content"]
    assert "${" not in user["content"] and sent["model"] == "judge-72b"


def test_it_labels_steps_and_scores_correct_steps_over_steps(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [STEPS_JSON], "ANSWER-2": [STEPS_EVALUATION]}
    run = answered_run("step_by_step", ["ANSWER-1 步骤1：……", "ANSWER-2 步骤1：……"])
    scored = score_now(start(run, judge_endpoint(judge_server), researcher))
    json_judged, reference_judged = judgment_of(scored, "ANSWER-1"), judgment_of(scored, "ANSWER-2")
    assert json_judged.status == "ok" and json_judged.score == pytest.approx(2 / 3)
    assert list(json_judged.steps.values_list("position", "label", "text")) == [
        (1, "CS", "由 $x^2=4$ 得 $x=\\pm 2$。"), (2, "CS", "因为 $x>0$，所以 $x=2$。"), (3, "LRE", "故选 C。"),
    ]  # fmt: skip
    assert json_judged.steps.get(position=3).reason == "由 $x=2$ 应选 B。"
    assert reference_judged.status == "ok" and reference_judged.score == 0.5
    assert reference_judged.parse_status == "repaired" and reference_judged.parse_notes
    assert list(reference_judged.steps.values_list("label", flat=True)) == ["CS", "CE"]
    assert reference_judged.item_scores == [] and reference_judged.parsed["steps"][1]["label"] == "CE"


def test_it_sends_the_figures_to_a_step_judge_but_not_to_a_direct_one(judge_server, researcher):
    Judge.replies = {"STEPS": [STEPS_JSON], "DIRECT": [DIRECT_OK]}
    judge = judge_endpoint(judge_server)
    score_now(start(answered_run("step_by_step", ["STEPS 步骤1：……"]), judge, researcher))
    score_now(start(answered_run("direct", ["DIRECT 最终答案：B"]), judge, researcher))
    steps_request, direct_request = Judge.seen
    assert [part["type"] for part in steps_request["messages"][-1]["content"]] == ["text", "image_url"]
    assert isinstance(direct_request["messages"][-1]["content"], str)


def test_it_keeps_output_that_never_parses_as_parse_failed_with_no_score(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [GIBBERISH]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B"])
    scored = score_now(start(run, judge_endpoint(judge_server), researcher))
    judged = scored.judgments.get()
    assert len(Judge.seen) == 1 + scoring.PARSE_RETRIES == judged.attempts == 3
    assert (judged.status, judged.score, judged.raw_output) == ("parse_failed", None, GIBBERISH)
    assert judged.parse_status == "failed" and judged.error
    assert len(judged.parse_notes) == 3 and judged.prompt_tokens == 300
    assert scoring.coverage(scored)["scored"] == 0 and scoring.coverage(scored)["parse_failed"] == 1


def test_it_scores_an_output_that_parses_on_a_retry(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [GIBBERISH, DIRECT_OK]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B"])
    judged = score_now(start(run, judge_endpoint(judge_server), researcher)).judgments.get()
    assert (judged.status, judged.score, judged.attempts, len(Judge.seen)) == ("ok", 0.5, 2, 2)
    assert judged.parse_notes[0].startswith("call 1 not understood")


def test_it_never_scores_a_judgment_without_steps_as_zero(judge_server, researcher):
    Judge.replies = {"ANSWER-1": ['{"steps": []}']}
    run = answered_run("step_by_step", ["ANSWER-1 步骤1：……"])
    judged = score_now(start(run, judge_endpoint(judge_server), researcher)).judgments.get()
    assert (judged.status, judged.score) == ("parse_failed", None) and judged.error
    assert not judged.steps.exists() and len(Judge.seen) == 3


def test_it_marks_failed_and_empty_answers_as_no_response_without_asking_the_judge(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [DIRECT_OK]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B", None, "  \n"])
    scored = score_now(start(run, judge_endpoint(judge_server), researcher))
    assert sorted(scored.judgments.values_list("status", "score")) == [
        ("no_response", None), ("no_response", None), ("ok", 0.5),
    ]  # fmt: skip
    assert len(Judge.seen) == 1
    assert scoring.coverage(scored) == {
        "pending": 0, "ok": 1, "parse_failed": 0, "call_failed": 0, "no_response": 2,
        "scored": 1, "total": 3, "coverage": 1 / 3,
    }  # fmt: skip


def test_it_records_a_refused_call_as_call_failed(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [400]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B"])
    judged = score_now(start(run, judge_endpoint(judge_server), researcher)).judgments.get()
    assert (judged.status, judged.score, judged.attempts) == ("call_failed", None, 1)
    assert "HTTP 400" in judged.error and len(Judge.seen) == 1


def test_it_runs_again_without_duplicates_or_new_calls(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [STEPS_JSON], "ANSWER-2": [GIBBERISH]}
    run = answered_run("step_by_step", ["ANSWER-1 步骤1：……", "ANSWER-2 步骤1：……"])
    scored = score_now(start(run, judge_endpoint(judge_server), researcher))
    asked, before = len(Judge.seen), list(scored.judgments.values_list("id", "status", "score"))
    again = Job.objects.create(kind="inference.score", params={"scoring_run_id": scored.pk})
    assert execute_job(again.pk) == Job.Status.SUCCEEDED
    assert len(Judge.seen) == asked == 4
    assert list(scored.judgments.values_list("id", "status", "score")) == before
    assert JudgedStep.objects.filter(judgment__scoring_run=scored).count() == 3


def save_judged(researcher, answers: int) -> tuple[ScoringRun, int]:
    """Saves ``answers`` step-by-step judgments as one batch (the last call failed; one finished
    meanwhile by another job); returns the scoring run and the statements the save took."""
    run = answered_run("step_by_step", [f"ANSWER-{n} 步骤1：……" for n in range(answers)])
    scoring_run = start(run, judge_endpoint("http://127.0.0.1:9/v1", name=f"judge {answers}"), researcher)
    pending, _done, _total = scoring.prepare_judging(scoring_run)
    said = client.Completion(text=STEPS_JSON, latency_ms=5, prompt_tokens=100, completion_tokens=20,
                             finish_reason="stop", attempts=1)  # fmt: skip
    verdicts = [scoring.Verdict(completions=[said], result=scoring.parse_steps(STEPS_JSON)) for _ in pending]
    verdicts[-1] = scoring.Verdict(call_error="HTTP 400: too long", call_attempts=1)
    Judgment.objects.filter(pk=pending[0].pk).update(status=Judgment.Status.OK, score=1.0)
    batch = [(j, *scoring.judgment_fields(scoring_run.method, v)) for j, v in zip(pending, verdicts, strict=True)]
    with CaptureQueriesContext(connection) as queries:
        scoring.save_judgments(batch)
    return scoring_run, len(queries)


def test_a_batch_of_judgments_is_saved_in_as_many_statements_for_3_as_for_40(researcher):
    small, few = save_judged(researcher, 3)
    large, many = save_judged(researcher, 40)
    assert few == many <= 8  # the claim, one UPDATE per set of columns, the old steps, the new ones
    statuses = list(large.judgments.order_by("id").values_list("status", "score"))
    assert statuses[0] == ("ok", 1.0)  # finished meanwhile: left as it was, no steps added
    assert statuses[1:-1] == [("ok", pytest.approx(2 / 3))] * 38 and statuses[-1] == ("call_failed", None)
    assert JudgedStep.objects.filter(judgment__scoring_run=large).count() == 38 * 3
    judged = large.judgments.order_by("id")[1]
    assert list(judged.steps.values_list("position", "label")) == [(1, "CS"), (2, "CS"), (3, "LRE")]
    assert (judged.attempts, judged.prompt_tokens, judged.parse_status) == (1, 100, "ok")
    assert "HTTP 400" in large.judgments.order_by("id").last().error


def test_it_rescores_only_the_failed_judgments(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [DIRECT_OK], "ANSWER-2": [400, DIRECT_FENCED], "ANSWER-3": [GIBBERISH]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B", "ANSWER-2 最终答案：x=3", "ANSWER-3 最终答案：C"])
    scored = score_now(start(run, judge_endpoint(judge_server), researcher))
    Judge.replies["ANSWER-3"] = [DIRECT_OK]
    asked = len(Judge.seen)
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        job = scoring.rescore_failed(scoring_run=scored, user=researcher)
    execute_job(job.pk)
    assert len(Judge.seen) == asked + 2
    assert sorted(scored.judgments.values_list("status", "score")) == [("ok", 0.5), ("ok", 0.5), ("ok", 1.0)]
    assert scored.judgments.count() == 3


def test_a_finished_scoring_job_stores_the_leaderboard_slices_and_a_rescore_replaces_them(judge_server, researcher):
    from inference import standings
    from inference.models import BoardSnapshot

    Judge.replies = {"ANSWER-1": [DIRECT_OK], "ANSWER-2": [400, 400, 400, 400, 400, 400]}
    run = answered_run("direct", ["ANSWER-1 最终答案：B", "ANSWER-2 最终答案：x=3"])
    scored = score_now(start(run, judge_endpoint(judge_server), researcher))
    snapshot = BoardSnapshot.objects.get(scoring_run=scored)
    assert snapshot.job_id == scored.job_id
    overall = standings.standings().entry("student", "direct").cells["overall"]
    assert (overall.n, overall.items, overall.mean) == (1, 2, 0.5)
    Judge.replies["ANSWER-2"] = [DIRECT_FENCED]
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        job = scoring.rescore_failed(scoring_run=scored, user=researcher)
    # while the rescore has not run, the board keeps the finished job's numbers
    assert standings.standings().entry("student", "direct").cells["overall"] == overall
    execute_job(job.pk)
    assert BoardSnapshot.objects.get(scoring_run=scored).job_id == job.pk
    assert standings.standings().entry("student", "direct").cells["overall"].n == 2


def test_it_refuses_a_method_that_does_not_match_the_mode(judge_server, researcher, english):
    run = answered_run("direct", ["最终答案：B"])
    with pytest.raises(scoring.ScoringError, match="(?i)direct run"):
        start(run, judge_endpoint(judge_server), researcher, method=ScoringRun.Method.JUDGE_STEPS)
    assert not ScoringRun.objects.exists() and not Job.objects.exists()


@pytest.mark.parametrize("change", [{"active": False}, {"kind": "vllm_offline", "gpu_count": 8}])
def test_it_refuses_a_judge_that_is_off_or_an_offline_engine_no_gpu_class_holds(
    judge_server, researcher, change, settings
):
    settings.GPU_CLASSES = ["1x80g", "4x80g"]
    judge = judge_endpoint(judge_server)
    ModelEndpoint.objects.filter(pk=judge.pk).update(**change)
    judge.refresh_from_db()
    with pytest.raises(services.EndpointError):
        start(answered_run("direct", ["最终答案：B"]), judge, researcher)
    assert not ScoringRun.objects.exists()


def test_it_refuses_to_score_a_run_that_is_still_answering(judge_server, researcher, english):
    run = answered_run("direct", ["最终答案：B"])
    Response.objects.create(run=run, question=make_question())  # pending
    with pytest.raises(scoring.ScoringError, match="still answering"):
        start(run, judge_endpoint(judge_server), researcher)


def test_it_refuses_a_judge_prompt_it_cannot_fill(judge_server, researcher):
    prompts.ensure_default_prompts()
    prompts.save_version(kind="judge_direct", qtype="", name="draft", system="", user_template="${steps}", user=None)
    with pytest.raises(scoring.ScoringError, match=r"\$\{steps\}"):
        start(answered_run("direct", ["最终答案：B"]), judge_endpoint(judge_server), researcher)


def test_it_asks_for_json_schema_output_only_when_the_judge_supports_it(judge_server, researcher):
    Judge.replies = {"ANSWER-1": [STEPS_JSON]}
    run = answered_run("step_by_step", ["ANSWER-1 步骤1：……"])
    score_now(start(run, judge_endpoint(judge_server, default_params={"temperature": 0}), researcher))
    plain = judge_endpoint(judge_server, name="plain", supports_json_schema=False)
    score_now(start(run, plain, researcher, params={"max_tokens": 512, "bogus": 1}))
    with_schema, without = Judge.seen
    assert with_schema["response_format"]["type"] == "json_schema"
    assert with_schema["response_format"]["json_schema"]["name"] == "step_judgment"
    assert with_schema["temperature"] == 0
    assert "response_format" not in without and without["max_tokens"] == 512 and "bogus" not in without


def test_it_freezes_what_produced_the_scores(judge_server, researcher):
    run = answered_run("direct", ["最终答案：B", None])
    scoring_run = start(run, judge_endpoint(judge_server, supports_json_schema=False), researcher)
    frozen = scoring_run.provenance
    assert set(frozen["prompts"]) == {"multiple_choice", "fill_in_blank", "free_response"}
    assert frozen["prompts"]["multiple_choice"]["hash"] and frozen["prompts"]["multiple_choice"]["version"] == 1
    assert frozen["judge"] == {"name": "judge", "base_url": judge_server, "model_name": "judge-72b"}
    assert frozen["response_format"]["json_schema"] is False
    assert frozen["response_format"]["kind"] == "direct_judgment"
    assert frozen["parser"]["version"] and frozen["parser"]["parse_retries"] == scoring.PARSE_RETRIES
    assert frozen["inference_run"] | {"id": None} == {"id": None, "mode": "direct", "total": 2, "ok": 1,
                                                     "failed": 1, "pending": 0}  # fmt: skip
    assert scoring_run.job.kind == "inference.score" and scoring_run.job.queue == "io"
    assert scoring_run.job.params == {"scoring_run_id": scoring_run.pk}


TRAINED_TEMPLATE = "题目：\n${question}\n\n学生解答：\n${model_answer}"


def test_a_trained_judge_scores_steps_with_its_own_prompt_and_no_other_judge_does(judge_server, researcher):
    prompts.ensure_default_prompts()
    studio = prompts.current("judge_steps", "multiple_choice")
    own = prompts.version_with_text(kind="judge_steps_trained", name="PEM", system="你是过程评估模型。",
                                    user_template=TRAINED_TEMPLATE, user=None)  # fmt: skip
    again = prompts.version_with_text(kind="judge_steps_trained", name="PEM again", system="你是过程评估模型。",
                                      user_template=own.user_template, user=None)  # fmt: skip
    assert again == own and prompts.current("judge_steps", "multiple_choice") == studio
    trained = judge_endpoint(judge_server, name="pem", judge_prompt=own)
    other = judge_endpoint(judge_server, name="other")
    steps, direct = answered_run("step_by_step", ["步骤1：……"]), answered_run("direct", ["最终答案：B"])
    by_pem = start(steps, trained, researcher).provenance["prompts"]
    assert by_pem == dict.fromkeys(prompts.QUESTION_TYPES, {"id": own.pk, "version": own.version,
                                                            "hash": own.content_hash})  # fmt: skip
    assert start(steps, other, researcher).provenance["prompts"]["multiple_choice"]["id"] == studio.pk
    # Its prompt judges steps: a direct scoring run with it reads the studio's direct prompt.
    assert start(direct, trained, researcher).provenance["prompts"]["multiple_choice"]["id"] == prompts.current(
        "judge_direct", "multiple_choice").pk  # fmt: skip


def test_it_leaves_a_tiny_models_gibberish_unscored_never_zero(tiny_model_server, researcher):  # noqa: F811
    base_url, model_name = tiny_model_server
    run = answered_run("direct", ["最终答案：B"])
    judge = judge_endpoint(base_url, model=model_name, supports_json_schema=False,
                           default_params={"max_tokens": 8, "temperature": 0})  # fmt: skip
    scored = score_now(start(run, judge, researcher))
    judged = scored.judgments.get()
    assert (judged.status, judged.score) == ("parse_failed", None), judged.error
    assert judged.attempts == 3 and "not understood" in judged.parse_notes[-1] and judged.completion_tokens
    assert judged.raw_output.strip() and judged.parse_status == "failed"  # what it said is kept, for people to read
    assert scoring.coverage(scored)["scored"] == 0
