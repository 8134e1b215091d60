"""Scoring runs of the reference protocol against a scripted judge on real HTTP: the reference
prompts registered from ../shared/reference, the judge's message built as the reference
builds it, no JSON schema, 10 tries, replies read as the reference reads them; and a judge
answering in K12-PEM's format (lists of [step, 中文标签, 解释]) filling the leaderboard."""

import json
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.export import reference_record
from inference import scoring, services, standings
from inference.models import InferenceRun, JudgedStep, ModelEndpoint, Protocol, Response, ScoringRun
from inference.reference import register
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question
from tests.reference_code import CHECKOUT, needs_reference, prompt_tables
from tests.scripted_models import Servers, user_text

pytestmark = [needs_reference, pytest.mark.django_db]

K12_PEM_STEPS = (
    "[['步骤1：由 $x^2=4$ 得 $x=\\pm 2$', '步骤正确', '正确'], "
    "['步骤2：因为 $x>0$，所以 $x=2$', '步骤正确', '正确'], "
    "['步骤3：故选 C', '逻辑过程错误', '由 x=2 应选 B']]"
)


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 1


@pytest.fixture
def registered():
    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    return register.latest_set()


def endpoint(base_url: str, name: str, model: str, **fields) -> ModelEndpoint:
    return services.save_endpoint(endpoint=ModelEndpoint(name=name, base_url=base_url, model_name=model, **fields),
                                  user=None)  # fmt: skip


def answered_run(mode: str, answers: list[str], model: str = "student-7b", user=None) -> InferenceRun:
    answerer, _ = ModelEndpoint.objects.get_or_create(name=model, defaults={"model_name": model})
    run = InferenceRun.objects.create(name=f"{model} {mode}", endpoint=answerer, mode=mode, created_by=user)
    for answer in answers:
        Response.objects.create(run=run, question=make_question(), status="ok", raw_output=answer)
    return run


def scored(run: InferenceRun, judge: ModelEndpoint, user, protocol=Protocol.REFERENCE) -> ScoringRun:
    method = scoring.METHOD_OF_MODE[InferenceRun.Mode(run.mode)]
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        scoring_run = scoring.start_scoring_run(inference_run=run, judge=judge, method=method, user=user,
                                                protocol=protocol)  # fmt: skip
    assert scoring_run.job_id is not None and execute_job(scoring_run.job_id) == Job.Status.SUCCEEDED
    scoring_run.refresh_from_db()
    return scoring_run


def test_direct_scoring_asks_and_reads_as_the_reference(servers, registered, researcher):
    calls: dict[str, int] = {}

    def judge(body):
        text = user_text(body)
        marker = next(m for m in ("ANSWER-1", "ANSWER-2", "ANSWER-3") if m in text)
        calls[marker] = calls.get(marker, 0) + 1
        if marker == "ANSWER-1":  # the first block counts, as in the reference
            return 200, '<evaluation>[["B"],["B"],[1]]</evaluation><evaluation>[["B"],["C"],[0]]</evaluation>'
        if marker == "ANSWER-2" and calls[marker] < 5:  # four unreadable replies, then a good one
            return 200, "<evaluation>[['B'], ['C'], [0]</evaluation>"
        if marker == "ANSWER-2":
            return 200, "<evaluation>[['$\\frac{1}{2}$', 'B'], ['$\\frac{1}{2}$'], [1, 0]]</evaluation>"
        return 200, "我无法判断。"

    base = servers.start({"judge-72b": judge})
    run = answered_run("direct", ["ANSWER-1 B", "ANSWER-2 B", "ANSWER-3 D"])
    result = scored(run, endpoint(base, "judge", "judge-72b"), researcher)
    assert result.protocol == "reference" and result.provenance["protocol"] == "reference"
    assert result.provenance["prompt_set"] == registered and result.provenance["parser"]["tries"] == 10
    first, second, third = (result.judgments.get(response__raw_output__startswith=m) for m in ("ANSWER-1", "ANSWER-2",
                                                                                               "ANSWER-3"))  # fmt: skip
    assert (first.status, first.score, first.item_scores) == ("ok", 1.0, [1])
    # Unequal lengths are accepted, as the reference accepts them; five calls, not the studio's three.
    assert (second.status, second.score, second.attempts, calls["ANSWER-2"]) == ("ok", 0.5, 5, 5)
    assert second.reference_answers == ["$\\frac{1}{2}$", "B"]
    assert (third.status, third.score, calls["ANSWER-3"]) == ("parse_failed", None, 10)

    # The request: no system message, no schema, the figure as a high-detail part, and the text
    # exactly the reference's eval_prompt.format(...) of the question's reference record.
    from tests.scripted_models import Models

    body = next(b for b in Models.seen if "ANSWER-1" in user_text(b))
    assert "response_format" not in body and [m["role"] for m in body["messages"]] == ["user"]
    parts = body["messages"][0]["content"]
    # The reference record's question holds <image> (at the stem's end where its place is not
    # known): the prompt is split there, the figure between the halves.
    assert [part["type"] for part in parts] == ["text", "image_url", "text"]
    assert parts[1]["image_url"]["detail"] == "high"
    response = run.responses.get(raw_output__startswith="ANSWER-1")
    record = reference_record(response.question)
    assert parts[1]["image_url"]["url"] == "data:image/jpeg;base64," + record["img"]
    _infer, eval_prompt, _pembench = prompt_tables()
    expected = eval_prompt["directly_eval_prompt"]["选择题"].format(
        question=record["question"], answer=record["format_answer"]["ground_truth"],
        solution=record["format_answer"]["format_solution"], student_answer=response.raw_output,
    )  # fmt: skip
    before, after = expected.split("<image>", 1)
    assert (parts[0]["text"], parts[2]["text"]) == (before, after.replace("<image>", ""))


def test_a_k12_pem_format_judge_labels_steps_and_fills_the_leaderboard(servers, registered, researcher, client, login):
    def pem(body):
        text = user_text(body)
        if "GOOD" in text:
            return 200, K12_PEM_STEPS
        # A reply wrapped as K12-PEM sometimes writes it: text around, full-width commas.
        return 200, "评估如下：\n[['步骤1：x=2'，'运算处理错误'，'算错'], ['步骤2：选 B'，'步骤正确'，'对']]\n完毕"

    base = servers.start({"K12-PEM": pem})
    pem_endpoint = endpoint(base, "K12-PEM", "K12-PEM", supports_json_schema=False)
    run = answered_run("step_by_step", ["GOOD 解：…", "OTHER 解：…"], user=researcher)
    result = scored(run, pem_endpoint, researcher)
    good = result.judgments.get(response__raw_output__startswith="GOOD")
    assert good.status == "ok" and good.score == pytest.approx(2 / 3)
    assert list(good.steps.values_list("label", flat=True)) == ["CS", "CS", "LRE"]
    assert good.steps.get(position=3).reason == "由 x=2 应选 B"
    other = result.judgments.get(response__raw_output__startswith="OTHER")
    assert (other.score, list(other.steps.values_list("label", flat=True))) == (0.5, ["CE", "CS"])
    assert JudgedStep.objects.filter(judgment__scoring_run=result).count() == 5

    # The leaderboard: the run is on it, with the mean score and the error labels counted.
    board = standings.board_state("step_by_step").board
    entry = board.entry("student-7b", "step_by_step")
    assert entry is not None and entry.cells["overall"].mean == pytest.approx((2 / 3 + 0.5) / 2)
    assert entry.cells["overall"].n == 2
    login(researcher)
    page = client.get(reverse("inference:leaderboard") + "?mode=step_by_step").content.decode()
    assert "student-7b" in page
    detail = client.get(reverse("inference:scoring", args=[result.pk])).content.decode()
    assert registered in detail and 'id="scoring-protocol"' in detail


def test_the_reference_protocol_needs_registered_prompts(servers, researcher, english):
    base = servers.start({"judge-72b": lambda body: (200, "")})
    run = answered_run("direct", ["ANSWER"])
    with pytest.raises(scoring.ScoringError, match="register"):
        scoring.create_scoring_run(inference_run=run, judge=endpoint(base, "judge", "judge-72b"), method="judge_direct",
                                   user=researcher, protocol="reference")  # fmt: skip
    with pytest.raises(scoring.ScoringError, match="paper"):
        scoring.create_scoring_run(inference_run=run, judge=endpoint(base, "judge2", "judge-72b"),
                                   method="judge_direct", user=researcher, protocol="paper")  # fmt: skip


def test_the_studio_protocol_is_the_default_and_unchanged(servers, registered, researcher):
    reply = json.dumps({"reference_answers": ["B"], "model_answers": ["B"], "scores": [1]})
    base = servers.start({"judge-72b": lambda body: (200, reply)})
    run = answered_run("direct", ["ANSWER"])
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        scoring_run = scoring.start_scoring_run(inference_run=run, judge=endpoint(base, "judge", "judge-72b"),
                                                method="judge_direct", user=researcher)  # fmt: skip
    assert execute_job(scoring_run.job_id) == Job.Status.SUCCEEDED
    scoring_run.refresh_from_db()
    assert scoring_run.protocol == "studio" and "prompt_set" not in scoring_run.provenance
    assert scoring_run.judgments.get().score == 1.0
    prompt_ids = {p["id"] for p in scoring_run.provenance["prompts"].values()}
    from inference.models import PromptTemplate

    assert not PromptTemplate.objects.filter(pk__in=prompt_ids).exclude(prompt_set="").exists()


def test_the_run_page_starts_a_reference_scoring_run(servers, registered, researcher, client, login):
    base = servers.start({"judge-72b": lambda body: (200, "")})
    judge = endpoint(base, "judge", "judge-72b")
    run = answered_run("direct", ["ANSWER"], user=researcher)
    login(researcher)
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        response = client.post(reverse("inference:run_score", args=[run.pk]),
                               {"judge": judge.pk, "method": "judge_direct", "protocol": "reference"})  # fmt: skip
    assert response.status_code == 302
    assert ScoringRun.objects.get().protocol == "reference"
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        api = client.post(f"/api/runs/{run.pk}/scoring/", {"judge": judge.pk, "protocol": "reference"},
                          content_type="application/json")  # fmt: skip
    assert api.status_code == 201, api.content
    assert api.json()["protocol"] == "reference" and api.json()["provenance"]["prompt_set"] == registered
    bad = client.post(f"/api/runs/{run.pk}/scoring/", {"judge": judge.pk, "protocol": "paper"},
                      content_type="application/json")  # fmt: skip
    assert bad.status_code == 400


def test_a_local_pem_scores_in_the_reference_protocol_with_its_tries(registered, researcher):
    from inference import client, engines

    pem = ModelEndpoint.objects.create(name="K12-PEM local", kind=ModelEndpoint.Kind.TRANSFORMERS,
                                       model_name="/models/k12-pem", accepts_images=False)  # fmt: skip
    run = answered_run("step_by_step", ["GOOD 解：…"])
    replies = iter(
        ["我先想一想", "[['步骤1', '计算错误', '?']]", "[['步骤1', '步骤正确', '对'], ['步骤2', '幻觉错误', '编造']]"]
    )
    seen: list[list[dict]] = []

    def engine(endpoint, conversations, params, *, engine_defaults=False):
        assert engine_defaults  # length and sampling left to the model, as the reference leaves them
        seen.extend(conversations)
        return [client.Completion(next(replies), 5, 1, 1, "stop", 1) for _ in conversations]

    with mock.patch.object(engines, "local_chat_batch", engine):
        result = scored(run, pem, researcher)
    judgment = result.judgments.get()
    assert (judgment.status, judgment.score, judgment.attempts) == ("ok", 0.5, 3)
    assert list(judgment.steps.values_list("label", flat=True)) == ["CS", "HE"]
    assert len(seen) == 3 and all(c[0]["role"] == "user" and len(c) == 1 for c in seen)  # no system message
