"""Step splitting by a model, with the rule split as the recorded fallback."""

import json
from unittest import mock

import pytest
from django.urls import reverse

from inference import services
from inference.models import ModelEndpoint
from k12vista.jobs import execute_job
from pem import splitting
from pem.chains import cots_from_run
from pem.models import ChainOfThought, SplitResult, SplitRun
from tests.annotation_factories import make_question
from tests.pem_factories import answer, label_steps, make_run
from tests.scripted_models import Servers, user_text

GOOD = "首先，由题意得 $x=2$，所以 $y=4$。最终答案：4"
GOOD_SPLIT = ["首先，由题意得 $x=2$，", "所以 $y=4$。", "最终答案：4"]
ALTERED = "由题意 $a=1$。\n\n所以 $b=2$。"
GARBLED = "设 $t=5$。\n\n则 $2t=10$。"
LABELLED = "步骤1：甲。\n步骤2：乙。"


def splitter_reply(body: dict) -> tuple[int, str]:
    text = user_text(body)
    if GOOD in text:
        return 200, json.dumps({"steps": GOOD_SPLIT}, ensure_ascii=False)
    if "$a=1$" in text:  # rewrites the chain: a split that does not reproduce the text
        return 200, json.dumps({"steps": ["由题意 $a=3$。", "所以 $b=2$。"]}, ensure_ascii=False)
    if "$t=5$" in text:
        return 200, "我认为应该这样拆分：第一步……"
    return 200, json.dumps({"steps": ["甲。", "乙。"]}, ensure_ascii=False)


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 0


@pytest.fixture
def splitter(db):
    servers = Servers()
    url = servers.start({"splitter": splitter_reply})
    yield services.save_endpoint(endpoint=ModelEndpoint(name="splitter", base_url=url, model_name="splitter"),
                                 user=None)  # fmt: skip
    servers.stop()


@pytest.fixture
def sent():
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


def chains_of(run, *texts):
    for text in texts:
        answer(run, make_question(), text)


@pytest.mark.django_db
def test_it_keeps_a_model_split_that_reproduces_the_text_and_falls_back_where_it_does_not(
    splitter, researcher, sent, english
):
    run = make_run()
    chains_of(run, GOOD, ALTERED, GARBLED, LABELLED)
    cots_from_run(inference_run=run)
    labelled = ChainOfThought.objects.get(response_text=LABELLED)
    label_steps(labelled, ["CS", "CS"])  # a person's work: its steps must stay
    split_run = splitting.start_split_run(splitter=splitter, inference_runs=[run], user=researcher)
    execute_job(split_run.job_id)
    outcome = {r.cot.response_text: (r.outcome, r.error) for r in split_run.results.select_related("cot")}
    assert outcome[GOOD] == ("model", "")
    assert outcome[ALTERED][0] == "fallback" and "step 1 is not in the chain's text" in outcome[ALTERED][1]
    assert outcome[GARBLED][0] == "fallback" and "could not be read" in outcome[GARBLED][1]
    assert outcome[LABELLED][0] == "conflict"
    good = ChainOfThought.objects.get(response_text=GOOD)
    assert list(good.steps.values_list("text", flat=True)) == GOOD_SPLIT
    assert (good.splitter, good.split_run) == ("model:splitter", split_run)
    altered = ChainOfThought.objects.get(response_text=ALTERED)
    assert list(altered.steps.values_list("text", flat=True)) == ["由题意 $a=1$。", "所以 $b=2$。"]  # the rule split
    assert (altered.splitter, altered.split_run) == ("rule", split_run)
    # Each chain says which split made its steps (issue 29: fallbacks were listed as "split by a model").
    assert (good.step_source, altered.step_source) == (ChainOfThought.StepSource.MODEL, ChainOfThought.StepSource.RULE)
    assert altered.get_step_source_display() == "Split by the rule"
    assert labelled.steps.count() == 2 and ChainOfThought.objects.get(pk=labelled.pk).splitter == "rule"
    # Structured output was asked for, with the split_steps prompt.
    from tests.scripted_models import Models

    assert {body["response_format"]["json_schema"]["name"] for body in Models.seen} == {"step_split"}
    assert splitting.counts(split_run) | {} == {"pending": 0, "model": 1, "fallback": 2, "conflict": 1,
                                                 "skipped": 0, "total": 4}  # fmt: skip


@pytest.mark.django_db
def test_a_second_run_changes_nothing_and_a_failed_call_falls_back(splitter, researcher, sent, settings):
    run = make_run()
    chains_of(run, GOOD)
    first = splitting.start_split_run(splitter=splitter, inference_runs=[run], user=researcher)
    execute_job(first.job_id)
    cot = ChainOfThought.objects.get()
    step_ids = list(cot.steps.values_list("id", flat=True))
    again = splitting.start_split_run(splitter=splitter, inference_runs=[run], user=researcher)
    execute_job(again.job_id)
    assert list(cot.steps.values_list("id", flat=True)) == step_ids  # same split: the same rows, labels kept
    splitter.base_url = "http://127.0.0.1:9/v1"  # nothing listens there
    splitter.save()
    down = splitting.start_split_run(splitter=splitter, inference_runs=[run], user=researcher)
    execute_job(down.job_id)
    result = down.results.get()
    assert result.outcome == "fallback" and result.error.startswith("the call failed")
    cot.refresh_from_db()
    assert cot.splitter == "rule" and cot.steps.count() == 1  # back to the rule split, recorded


@pytest.mark.parametrize(
    ("steps", "ok"),
    [
        (["首先，由题意得 $x=2$，", "所以 $y=4$。", "最终答案：4"], True),
        (["首先，由题意得  $x=2$，所以", " $y=4$。最终答案：4"], True),  # whitespace aside
        (["所以 $y=4$。", "首先，由题意得 $x=2$，"], False),  # out of order
        (["首先，由题意得 $x=2$，"], False),  # leaves most of the text out
    ],
)
def test_it_checks_that_a_split_reproduces_the_text(steps, ok):
    assert (splitting.check_reproduces(steps, GOOD, min_coverage=0.9) == "") is ok


@pytest.mark.django_db
def test_the_splitting_screen_api_and_command_start_the_same_run(splitter, researcher, annotator, login, sent):
    run = make_run()
    run.created_by = researcher  # runs are their owner's: another person's cannot be chosen
    run.save()
    chains_of(run, GOOD)
    page = login(researcher).post(reverse("pem:split_create"), {"splitter": splitter.pk, "runs": [run.pk]})
    split_run = SplitRun.objects.get()
    assert page.status_code == 302 and page.url == reverse("pem:split", args=[split_run.pk])
    execute_job(split_run.job_id)
    detail = login(researcher).get(reverse("pem:split", args=[split_run.pk]))
    assert detail.status_code == 200 and 'class="progress"' in detail.content.decode()
    api = login(researcher).post(reverse("pem_api:splits"), {"splitter": splitter.pk, "runs": [run.pk]},
                                 content_type="application/json")  # fmt: skip
    assert api.status_code == 201 and api.json()["counts"]["total"] == 0
    from django.core.management import call_command

    call_command("split_steps", "--splitter", "splitter", "--run", str(run.pk), stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert SplitRun.objects.count() == 3
    assert login(annotator).get(reverse("pem:split", args=[split_run.pk])).status_code == 403
    assert SplitResult.objects.filter(split_run=split_run, outcome="model").count() == 1


def test_a_real_model_whose_split_cannot_be_read_leaves_the_rule_split(tiny_model_server, splitter, researcher,  # noqa: F811
                                                                       sent):  # fmt: skip
    base_url, model_name = tiny_model_server
    real = services.save_endpoint(endpoint=ModelEndpoint(name="tiny", base_url=base_url, model_name=model_name,
                                                         accepts_images=False, default_params={"max_tokens": 8}),
                                  user=None)  # fmt: skip
    run = make_run()
    chains_of(run, ALTERED)
    split_run = splitting.start_split_run(splitter=real, inference_runs=[run], user=researcher)
    execute_job(split_run.job_id)
    result = split_run.results.get()
    assert result.outcome == "fallback" and result.raw_output and result.attempts == 1
    cot = ChainOfThought.objects.get()
    assert cot.splitter == "rule" and list(cot.steps.values_list("text", flat=True)) == [
        "由题意 $a=1$。",
        "所以 $b=2$。",
    ]
