"""The inference issue's "done when": a researcher registers an endpoint, runs
a question set directly and step by step, scores both runs with a judge, and
reads the leaderboard and each run's record — all in a real browser, with a
real worker calling a scripted OpenAI-compatible server on this machine."""

import json
import re

import pytest

from inference.leaderboard import GROUPINGS, OVERALL
from inference.models import InferenceRun, Judgment, ScoringRun
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person
from tests.scripted_models import ScriptedHandler, serve

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

JOB_TIMEOUT_MS = 120_000
UNREADABLE = "嗯……这道题我觉得还行吧"


def steps(*labels: str) -> str:
    return json.dumps(
        {"steps": [{"step": f"第{i}步：……", "label": label, "reason": "理由"} for i, label in enumerate(labels, 1)]},
        ensure_ascii=False,
    )


def direct(*scores: int) -> str:
    answers = [str(n) for n in range(len(scores))]
    return json.dumps({"reference_answers": answers, "model_answers": answers, "scores": list(scores)})


# marker in the question text -> (subject, grade, type, direct judge's reply, step judge's reply)
QUESTIONS = {
    "〔题1〕": ("math", 9, "multiple_choice", direct(1), steps("CS", "CS")),
    "〔题2〕": ("physics", 11, "multiple_choice", direct(1), steps("CS", "CE")),
    "〔题3〕": ("math", 5, "fill_in_blank", direct(0), steps("CS", "CE")),
    "〔题4〕": ("chemistry", 8, "free_response", direct(1, 0), steps("CS", "CE", "CS")),
    "〔题5〕": ("biology", 12, "fill_in_blank", UNREADABLE, steps("CS", "CS")),  # direct: never parses
    "〔题6〕": ("geography", 7, "multiple_choice", direct(1), steps("CS", "LRE")),
}
DIRECT_JUDGE, STEP_JUDGE, STEP_ANSWER = "阅卷老师", "解题过程评价专家", "请一步一步地推理求解"


class Answering(ScriptedHandler):
    """An OpenAI-compatible server that answers by what it is asked: a judge
    prompt gets the scripted judgment of the question in it, any other prompt
    an answer (with numbered steps when the prompt asks for them)."""

    seen: list[str] = []

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        asked = json.dumps(body["messages"], ensure_ascii=False)
        type(self).seen.append(asked)
        marker = next((m for m in QUESTIONS if m in asked), None)
        if DIRECT_JUDGE in asked and marker:
            content = QUESTIONS[marker][3]
        elif STEP_JUDGE in asked and marker:
            content = QUESTIONS[marker][4]
        elif STEP_ANSWER in asked:
            content = "步骤1：由题意得 $x=2$。\n步骤2：检验符合条件。\n答案：B"
        else:
            content = "答案：B"
        self.send_completion(body, content, usage=(11, 7))


@pytest.fixture
def answering_server():
    Answering.seen = []
    with serve(Answering) as base_url:
        yield base_url


def make_questions():
    for marker, (subject, grade, qtype, _direct, _steps) in QUESTIONS.items():
        fields = {} if qtype == "multiple_choice" else {"options": [], "answers": ["2"]}
        make_question(
            subject=subject, grade=grade, qtype=qtype, text=f"{marker} 已知 $x^2=4$，且 $x>0$，求 $x$。", **fields
        )


def start_run(page, name: str, mode: str) -> int:
    page.goto("/research/runs/new/")
    page.fill("#run-form #id_name", name)
    page.select_option("#run-form #id_endpoint", label="scripted-vl")
    page.select_option("#run-form #id_mode", mode)
    page.click("#run-form button[type=submit]")
    page.wait_for_url(re.compile(r"/research/runs/\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def wait_for_job(page, card: str) -> None:
    """The progress fragment polls itself (htmx, every second) until the job is finished."""
    page.wait_for_selector(f"{card} .job-progress[data-status=succeeded]", timeout=JOB_TIMEOUT_MS)
    bar = page.locator(f"{card} .job-progress [role=progressbar]")
    assert bar.get_attribute("aria-valuenow") == "100"


def score_run(page, run_id: int) -> int:
    page.goto(f"/research/runs/{run_id}/")
    page.select_option("#score-form #id_judge", label="scripted-vl")
    page.click("#score-form button[type=submit]")
    page.wait_for_url(re.compile(r"/research/scoring/\d+/$"))
    wait_for_job(page, "#scoring-status")
    page.reload()
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def cell_texts(page, table: str) -> dict[str, str]:
    """Group key (leaderboard.GROUPINGS) -> the one model row's cell text, of one score table."""
    groups = [OVERALL] if table == "overall" else [group for group, _title in GROUPINGS[table]]
    cells = page.locator(f"#scores-{table} tbody tr").first.locator("td").all_inner_texts()
    return {group: " ".join(text.split()) for group, text in zip(groups, cells, strict=True)}


def test_a_researcher_runs_scores_and_ranks_a_model(page, worker, answering_server):
    make_questions()
    make_person("rita", Role.RESEARCHER)
    log_in(page, "rita", PASSWORD)
    page.wait_for_url("**/research/")

    # Registers the endpoint through the form; the judge is the same server.
    page.goto("/research/endpoints/new/")
    page.fill("#id_name", "scripted-vl")
    page.fill("#id_base_url", answering_server)
    page.fill("#id_model_name", "scripted-vl-7b")
    page.fill("#id_max_concurrency", "4")
    page.fill("#id_default_params", '{"temperature": 0}')
    page.click("#endpoint-form button[type=submit]")
    page.wait_for_url("**/research/endpoints/")
    assert "scripted-vl" in page.inner_text("body")

    # Starts both runs over the whole question set; the worker answers them.
    direct_id = start_run(page, "直接作答", "direct")
    steps_id = start_run(page, "分步作答", "step_by_step")
    for run_id in (direct_id, steps_id):
        page.goto(f"/research/runs/{run_id}/")
        wait_for_job(page, "#run-status")
        page.reload()
        assert page.inner_text("#run-counts [data-count=ok]").endswith(" 6")
        assert page.inner_text("#run-counts [data-count=failed]").endswith(" 0")
        assert page.locator("#response-rows tr[data-status=ok]").count() == 6

    # The run record: endpoint, question count and a hash per prompt.
    page.goto(f"/research/runs/{steps_id}/")
    provenance = page.inner_text("#provenance")
    assert "scripted-vl-7b" in provenance and answering_server in provenance
    lines = page.locator("#provenance p").all_inner_texts()
    assert any(re.match(r"\S+: 6 \(", line) for line in lines), provenance  # questions: 6
    run = InferenceRun.objects.get(pk=steps_id)
    rows = page.locator("#prompt-provenance tbody tr")
    assert rows.count() == 3
    shown = {rows.nth(i).locator("td").first.inner_text(): rows.nth(i).locator("code").inner_text() for i in range(3)}
    assert shown == {qtype: p["hash"] for qtype, p in run.provenance["prompts"].items()}
    assert all(re.fullmatch(r"[0-9a-f]{16,}", h) for h in shown.values())

    # Scores both runs from their pages; the judge answers by what it is asked.
    direct_scoring = score_run(page, direct_id)
    assert page.inner_text("#coverage strong") == "5 / 6"
    assert page.inner_text("#coverage [data-count=parse_failed]").endswith(" 1")
    assert page.locator("#judgment-rows tr[data-status=parse_failed]").count() == 1
    steps_scoring = score_run(page, steps_id)
    assert page.inner_text("#coverage strong") == "6 / 6"
    assert page.locator("#judgment-rows .judged-steps li").count() == 13
    assert page.locator("#judgment-rows .label-code", has_text="CE").count() == 3
    assert ScoringRun.objects.get(pk=direct_scoring).method == ScoringRun.Method.JUDGE_DIRECT
    assert ScoringRun.objects.get(pk=steps_scoring).method == ScoringRun.Method.JUDGE_STEPS
    assert Judgment.objects.filter(scoring_run_id=steps_scoring, status="ok").count() == 6
    page.goto(f"/research/runs/{direct_id}/")
    assert page.locator("#scoring li .status-succeeded").count() == 1

    # The leaderboard: direct first, with groups by stage, subject and type.
    page.goto("/research/leaderboard/")
    tabs = page.locator("#mode-tabs a[href^='?mode=']")
    assert [tabs.nth(i).get_attribute("href") for i in range(tabs.count())] == ["?mode=step_by_step"]  # direct is on
    assert page.locator("#scores-overall tbody tr").count() == 1
    assert page.inner_text("#scores-overall tbody th") == "scripted-vl"
    overall = cell_texts(page, "overall")[OVERALL]
    assert overall.startswith("70.0") and "5/6 (83%)" in overall, overall
    stage = cell_texts(page, "stage")
    assert stage["stage:primary"].startswith("0.0") and "1/1 (100%)" in stage["stage:primary"], stage
    assert stage["stage:middle"].startswith("83.3") and "3/3 (100%)" in stage["stage:middle"], stage
    assert stage["stage:high"].startswith("100.0") and "1/2 (50%)" in stage["stage:high"], stage
    subject = cell_texts(page, "subject")
    assert subject["subject:math"].startswith("50.0") and "2/2 (100%)" in subject["subject:math"], subject
    assert subject["subject:biology"] == "— 0/1 (0%)", subject  # unscored, never a 0
    qtype = cell_texts(page, "type")
    assert qtype["type:multiple_choice"].startswith("100.0") and "3/3 (100%)" in qtype["type:multiple_choice"], qtype
    assert qtype["type:fill_in_blank"].startswith("0.0") and "1/2 (50%)" in qtype["type:fill_in_blank"], qtype
    assert qtype["type:free_response"].startswith("50.0"), qtype
    assert page.locator("#error-charts .error-chart").count() == 0  # no labelled steps in direct mode

    # The step-by-step tab swaps the board in place (htmx) and pushes its URL.
    page.click("#mode-tabs a[href='?mode=step_by_step']")
    page.wait_for_url("**/research/leaderboard/?mode=step_by_step")
    page.wait_for_selector("#mode-tabs a[href='?mode=direct']")
    overall = cell_texts(page, "overall")[OVERALL]
    assert overall.startswith("69.4") and "6/6 (100%)" in overall, overall
    stage = cell_texts(page, "stage")
    assert stage["stage:primary"].startswith("50.0") and stage["stage:middle"].startswith("72.2"), stage
    assert stage["stage:high"].startswith("75.0"), stage
    assert cell_texts(page, "subject")["subject:geography"].startswith("50.0")
    assert cell_texts(page, "type")["type:free_response"].startswith("66.7")
    chart = page.locator("#error-charts .error-chart[data-model=scripted-vl]")
    assert chart.count() == 1
    assert chart.locator("details").first.get_attribute("data-group") == OVERALL
    summary = chart.locator("details").first.locator("summary").inner_text()
    assert sorted(map(int, re.findall(r"\d+", summary))) == [4, 13], summary
    ce = chart.locator("details").first.locator("[role=listitem]", has=page.locator(".bar[data-code=CE]"))
    assert " ".join(ce.inner_text().split()).endswith("75.0% (3)"), ce.inner_text()
    assert "width: 75.00%" in ce.locator(".bar").get_attribute("style")
    lre = chart.locator("details").first.locator("[role=listitem]", has=page.locator(".bar[data-code=LRE]"))
    assert " ".join(lre.inner_text().split()).endswith("25.0% (1)")

    # What the server was asked: 12 answers, 6 step judgments, 5 + 3 direct ones.
    assert sum(STEP_JUDGE in asked for asked in Answering.seen) == 6
    assert sum(DIRECT_JUDGE in asked for asked in Answering.seen) == 8
    assert page.problems == []
