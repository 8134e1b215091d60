"""PEBench as the paper measures it: the judge gets the gold step list (the reference's PEBench
prompt, registered from ../shared/reference), answers one label per step, and labels are
compared by position; reading and metric agree with the reference's own step_check and
evaluate, and the job stores the labels beside the studio's aligned judges."""

import json
import random
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from inference import services
from inference.models import ModelEndpoint
from inference.parsing import reference as reader
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.vocabulary import STEP_LABELS
from pem import given_steps
from pem.models import ChainOfThought, StepLabel
from pem.reports import agreement_report
from tests import reference_replies
from tests.pem_factories import add_to_pebench, label_steps, make_cot
from tests.reference_code import CHECKOUT, needs_reference, pebench_evaluate, pebench_step_check, prompt_tables
from tests.scripted_models import Servers, user_text

NAMES = [label.chinese for label in STEP_LABELS]
CODES = {label.chinese: label.code for label in STEP_LABELS}


@needs_reference
def test_replies_read_as_the_references_step_check():
    step_check = pebench_step_check()
    checked = {"read": 0, "not": 0}
    for reply in reference_replies.step_corpus():
        for n in (1, 2, 3):
            theirs = step_check(reply, [None] * n)
            mine = reader.read_given_steps(reply, n)
            assert mine.usable == (theirs != ""), (reply, n, mine.error)
            if mine.usable:
                assert mine.value["labels"] == [item[1] for item in theirs]
                checked["read"] += 1
            else:
                checked["not"] += 1
    assert checked["read"] > 100 and checked["not"] > 500


@needs_reference
def test_the_metric_is_the_references(tmp_path):
    rng = random.Random(7)
    lines, pairs = [], []
    for _ in range(60):
        n = rng.randint(1, 6)
        gold = [rng.choice(NAMES[:4]) for _ in range(n)]  # some labels never occur: the reference writes 0
        predicted = [g if rng.random() < 0.6 else rng.choice([*NAMES, "计算错误"]) for g in gold]
        pairs.append((predicted, gold))
        lines.append({"infer_result": {"m_response": [[f"s{i}", p, ""] for i, p in enumerate(predicted)]},
                      "step_labels": [[f"s{i}", g, ""] for i, g in enumerate(gold)]})  # fmt: skip
    path, out = tmp_path / "m_result.jsonl", tmp_path / "m_metrix.json"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    pebench_evaluate()(mock.Mock(infer_model="m"), str(path), str(out))
    theirs = json.loads(out.read_text(encoding="utf-8"))
    mine = given_steps.positional_accuracy(pairs)
    assert {name: entry["rounded"] for name, entry in mine.items()} == theirs
    assert mine["all"]["count"] == sum(len(g) for _, g in pairs)


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


def gold_chain(steps: list[str], labels: list[str]) -> ChainOfThought:
    cot = make_cot(steps=steps, status=ChainOfThought.Status.GOLD, reference_answer="B\n5",
                   reference_solution="步骤1：…", question_text="已知 x^2=4，求 x")  # fmt: skip
    label_steps(cot, [CODES[name] for name in labels], source=StepLabel.Source.GOLD, rater="gold")
    add_to_pebench(cot)
    return cot


@needs_reference
@pytest.mark.django_db
def test_a_judge_labels_the_given_steps_and_is_scored_by_position(servers, researcher, settings):
    settings.MODEL_CALL_RETRIES = 1
    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    first = gold_chain(["甲一", "甲二", "甲三"], ["步骤正确", "步骤正确", "运算处理错误"])
    gold_chain(["乙一", "乙二"], ["步骤正确", "幻觉错误"])
    third = gold_chain(["丙一"], ["步骤正确"])
    asked = []

    def judge(body):
        text = user_text(body)
        asked.append(text)
        if "甲一" in text:  # right, right, wrong
            return 200, "[['甲一','步骤正确','对']，['甲二','步骤正确','对']，['甲三','步骤正确','对']]"
        if "乙一" in text:  # one label outside the nine: counted wrong
            return 200, '[["乙一", "步骤正确", "对"], ["乙二", "编造错误", "错"]]'
        return 200, '[["丙一", "步骤正确", "对"], ["多出来的", "步骤正确", "对"]]'  # never the right count

    base = servers.start({"pem": judge})
    endpoint = services.save_endpoint(endpoint=ModelEndpoint(name="K12-PEM", base_url=base, model_name="pem"),
                                      user=None)  # fmt: skip
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        out = StringIO()
        call_command("pebench_given_steps", "K12-PEM", stdout=out)
    job_id = json.loads(out.getvalue())["job"]
    assert execute_job(job_id) == Job.Status.SUCCEEDED
    result = Job.objects.get(pk=job_id).result
    assert (result["asked"], result["read"], result["not_read"]) == (3, 2, 1)
    assert sum("丙一" in text for text in asked) == given_steps.TRIES

    # The prompt is the reference's own, with the gold steps as the student's step list.
    _infer, _judge, pembench = prompt_tables()
    expected = pembench["step_by_step_infer"].format(
        question=first.question_text, solution="步骤1：…", answer=["B", "5"], student_answer=["甲一", "甲二", "甲三"]
    )
    assert expected in asked

    rater = given_steps.rater_for(endpoint)
    stored = dict(StepLabel.objects.filter(rater=rater).values_list("step__text", "label"))
    assert stored == {"甲一": "CS", "甲二": "CS", "甲三": "CS", "乙一": "CS", "乙二": ""}
    metric = result["report"]["metric"]
    assert (metric["all"]["correct"], metric["all"]["count"]) == (3, 5)  # the third item is left out
    assert metric["步骤正确"]["accuracy"] == 1.0 and metric["运算处理错误"]["accuracy"] == 0.0
    assert metric["幻觉错误"]["accuracy"] == 0.0 and result["report"]["items"] == 2

    # Beside the aligned judges on the agreement report: the same per-label and overall accuracy.
    judges = {j["rater"]: j for j in agreement_report(ChainOfThought.objects.in_pebench())["judges"]}
    assert judges[rater]["accuracy"]["value"] == pytest.approx(3 / 5)
    assert judges[rater]["accuracy_by_label"]["CS"]["value"] == 1.0

    # A rerun asks only for the item still without labels.
    asked.clear()
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        job = given_steps.start(judge=endpoint, user=None)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    assert asked and all("丙一" in text for text in asked)
    assert third.pk not in set(StepLabel.objects.filter(rater=rater).values_list("step__cot_id", flat=True))


@pytest.mark.django_db
def test_it_needs_the_registered_prompt(servers):
    endpoint = services.save_endpoint(endpoint=ModelEndpoint(name="j", base_url=servers.start({}), model_name="j"),
                                      user=None)  # fmt: skip
    with pytest.raises(given_steps.GivenStepsError, match="register"):
        given_steps.start(judge=endpoint, user=None)


@needs_reference
@pytest.mark.django_db
def test_the_api_starts_it_reads_its_metric_and_the_agreement_page_shows_it(servers, researcher, annotator, login,
                                                                            settings):  # fmt: skip
    settings.MODEL_CALL_RETRIES = 1
    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    gold_chain(["甲一", "甲二", "甲三"], ["步骤正确", "运算处理错误", "步骤正确"])
    reply = "[['甲一','步骤正确','对'],['甲二','运算处理错误','错'],['甲三','幻觉错误','错']]"
    base = servers.start({"pem": lambda body: (200, reply)})
    endpoint = services.save_endpoint(endpoint=ModelEndpoint(name="K12-PEM", base_url=base, model_name="pem"),
                                      user=None)  # fmt: skip
    api = APIClient()
    api.force_authenticate(researcher)
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        started = api.post("/api/pem/pebench/given-steps/", {"judge": endpoint.pk}, format="json")
    assert started.status_code == 202, started.content
    assert started.json()["rater"] == given_steps.rater_for(endpoint)
    assert execute_job(started.json()["job"]["id"]) == Job.Status.SUCCEEDED

    read = api.get("/api/pem/pebench/given-steps/", {"judge": endpoint.pk})
    assert read.status_code == 200
    metric = read.json()["metric"]
    assert (read.json()["items"], metric["all"]["correct"], metric["all"]["count"]) == (1, 2, 3)
    assert metric["运算处理错误"]["accuracy"] == 1.0 and metric["步骤正确"]["accuracy"] == 0.5
    assert metric["all"]["rounded"] == 0.6667

    with mock.patch("k12vista.tasks.run_job.apply_async"):
        refused = api.post("/api/pem/pebench/given-steps/", {"judge": endpoint.pk, "prompt_set": "K12Vista@nope"},
                           format="json")  # fmt: skip
        assert refused.status_code == 400 and "judge" in refused.json()
        assert api.post("/api/pem/pebench/given-steps/", {"judge": endpoint.pk, "mode": "x"},
                        format="json").status_code == 400  # fmt: skip
    assert api.get("/api/pem/pebench/given-steps/").status_code == 400
    other = APIClient()
    other.force_authenticate(annotator)
    assert other.get("/api/pem/pebench/given-steps/", {"judge": endpoint.pk}).status_code == 403

    page = login(researcher).get(reverse("pem:agreement")).content.decode()
    row = page[page.index('id="given-steps-table"') :]
    assert f'data-rater="{given_steps.rater_for(endpoint)}"' in row
    assert 'data-stat="overall" data-value="0.6667"' in row
    assert 'data-label="CS" data-value="0.5000"' in row
