"""A judge panel with a real majority: four scripted judges over HTTP, a threshold, and what it leaves undecided."""

import io
import json
from unittest import mock

import pytest
from django.core.management import call_command
from django.urls import reverse

from inference import services
from inference.models import Judgment, ModelEndpoint
from inference.reference.register import register_checkout
from k12vista.vocabulary import LABELS_BY_CODE
from pem import panel
from pem.models import ChainOfThought, PanelRun, PanelVote, StepLabel
from tests import reference_code
from tests.annotation_factories import make_question
from tests.job_runs import run_with_parts
from tests.pem_factories import answer, make_run
from tests.scripted_models import Servers, user_text

THREE = "步骤1：甲。\n步骤2：乙。\n步骤3：丙。"
TWO = "步骤1：丁。\n步骤2：戊。"
# Each judge's labels for the steps of each chain; None: the judge answers garbage for that chain.
LABELS = {
    "j1": {THREE: ["CS", "CS", "CE"], TWO: ["CS", "CS"]},
    "j2": {THREE: ["CS", "CS", "KAE"], TWO: ["CS", "CS"]},
    "j3": {THREE: ["CS", "KAE", "CE"], TWO: ["CS", "CS"]},
    "j4": {THREE: None, TWO: ["CS", "CS"]},
}
STEPS = {THREE: ["甲。", "乙。", "丙。"], TWO: ["丁。", "戊。"]}


def judge_reply(name):
    def reply(body):
        text = user_text(body)
        chain = THREE if "甲。" in text else TWO
        labels = LABELS[name][chain]
        if labels is None:
            return 200, "这个解答我看不太懂。"
        steps = [{"step": s, "label": label, "reason": f"{name} on {s}"}
                 for s, label in zip(STEPS[chain], labels, strict=True)]  # fmt: skip
        return 200, json.dumps({"steps": steps}, ensure_ascii=False)

    return reply


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 0


@pytest.fixture
def judges(db):
    servers = Servers()
    url = servers.start({name: judge_reply(name) for name in LABELS})
    yield [
        services.save_endpoint(
            endpoint=ModelEndpoint(name=name, base_url=url, model_name=name, max_concurrency=2), user=None
        )  # fmt: skip
        for name in LABELS
    ]
    servers.stop()


@pytest.fixture
def sent():
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


def answered_run(owner=None):
    run = make_run()
    run.created_by = owner
    run.save()
    answer(run, make_question(), THREE)
    answer(run, make_question(), TWO)
    return run


@pytest.mark.django_db
def test_four_judges_decide_by_a_three_vote_majority_and_count_what_they_cannot_decide(judges, researcher, sent):
    run = answered_run()
    started = panel.start_panel(name="四人组", inference_runs=[run], judges=judges, user=researcher, explainer="j2")
    assert started.threshold == 3 and started.scoring_runs.count() == 4  # a strict majority of four
    run_with_parts(started.job_id)
    started.refresh_from_db()
    counts = started.counts
    assert (counts["steps"], counts["decided"], counts["no_majority"]) == (5, 3, 2)
    assert (counts["chains_fully_decided"], counts["chains_with_no_majority"]) == (1, 1)
    # j4's garbage for the three-step chain is three missing votes, never a guessed label.
    assert counts["missing_votes"] == {"j1": 0, "j2": 0, "j3": 0, "j4": 3}
    assert Judgment.objects.filter(scoring_run__judge__name="j4", status="parse_failed").count() == 1
    three = ChainOfThought.objects.get(response_text=THREE)
    votes = {v.step.position: v for v in PanelVote.objects.filter(panel_run=started, step__cot=three)}
    assert (votes[1].outcome, votes[1].label, votes[1].explained_by) == ("majority", "CS", "j2")
    # Step 2: CS from j1 and j2, KAE from j3: a plurality (or the listing order) says CS; 2 of 4 is no majority.
    assert (votes[2].outcome, votes[2].label) == ("no_majority", "")
    assert votes[2].votes == {"j1": "CS", "j2": "CS", "j3": "KAE", "j4": None}
    panel_labels = StepLabel.objects.filter(source=StepLabel.Source.PANEL, rater="四人组")
    assert panel_labels.count() == 3 and not panel_labels.filter(step__cot=three, step__position__in=[2, 3]).exists()
    assert panel_labels.get(step=votes[1].step).explanation == "j2 on 甲。"
    assert list(ChainOfThought.objects.fully_decided_by(started)) == [ChainOfThought.objects.get(response_text=TWO)]
    assert list(ChainOfThought.objects.with_no_majority(started)) == [three]
    # Run again: the same votes, none duplicated.
    assert panel.vote(started) == counts
    assert PanelVote.objects.filter(panel_run=started).count() == 5
    # Each judge's scoring run is finished for the leaderboard too: its slices stored, never "succeeded" and waiting.
    assert all(hasattr(run, "board_snapshot") for run in started.scoring_runs.select_related("board_snapshot"))


@pytest.mark.django_db
def test_without_an_explainer_the_first_majority_judge_explains(judges, researcher, sent):
    started = panel.start_panel(name="p", inference_runs=[answered_run()], judges=judges, user=researcher)
    run_with_parts(started.job_id)
    assert set(PanelVote.objects.decided().filter(panel_run=started).values_list("explained_by", flat=True)) == {"j1"}


@pytest.mark.django_db
def test_a_panel_refreshes_the_stored_agreement_report_once(judges, researcher, sent, settings):
    from k12vista.models import Job
    from pem import agreement_store

    settings.AGREEMENT_INLINE_LABELS = 0  # "large": the report is only ever computed by its job
    started = panel.start_panel(name="p", inference_runs=[answered_run()], judges=judges, user=researcher)
    run_with_parts(started.job_id)
    refreshes = Job.objects.filter(kind=agreement_store.KIND)
    assert sorted(refreshes.values_list("params__scope", "started_by")) == [("all", None), ("pebench", None)]
    started.refresh_from_db()
    started.job.refresh_from_db()
    again = panel.restart_panel(panel=started, user=researcher)
    run_with_parts(again.pk)
    assert refreshes.count() == 2  # the first ones are still queued: they will read these labels too


@pytest.mark.django_db
def test_it_refuses_a_panel_that_cannot_reach_its_threshold_or_is_no_majority(judges, researcher, sent, english):
    run = answered_run()
    with pytest.raises(panel.PanelError, match="needs at least 3 judges"):
        panel.start_panel(name="p", inference_runs=[run], judges=judges[:2], user=researcher, threshold=3)
    with pytest.raises(panel.PanelError, match="not a majority"):
        panel.start_panel(name="p", inference_runs=[run], judges=judges, user=researcher, threshold=2)
    with pytest.raises(panel.PanelError, match="explainer"):
        panel.start_panel(name="p", inference_runs=[run], judges=judges[:3], user=researcher, explainer="j4")
    assert not PanelRun.objects.exists()


@pytest.mark.parametrize(
    ("votes", "threshold", "label"),
    [
        ({"a": "CS", "b": "CS", "c": "CE", "d": "CE"}, 3, ""),  # a tie is no majority, whoever is listed first
        ({"a": "CS", "b": "CS", "c": "CS", "d": None}, 3, "CS"),
        ({"a": "CS", "b": "CS", "c": None, "d": None}, 3, ""),  # two missing votes cannot be made up
        ({"a": "CE", "b": "CE", "c": "CS"}, 2, "CE"),
    ],
)
def test_it_decides_only_with_enough_votes(votes, threshold, label):
    assert panel.decide(votes, threshold=threshold) == label


@pytest.mark.django_db
def test_the_panel_screen_api_and_command(judges, researcher, annotator, login, sent):
    run = answered_run(owner=researcher)
    client = login(researcher)
    response = client.post(reverse("pem:panel_create"), {"name": "页面", "judges": [j.pk for j in judges[:3]],
                                                          "runs": [run.pk]})  # fmt: skip
    started = PanelRun.objects.get()
    assert response.status_code == 302 and started.threshold == 2
    run_with_parts(started.job_id)
    page = client.get(reverse("pem:panel", args=[started.pk])).content.decode()
    assert 'class="progress"' in page and 'data-count="no_majority"' in page and 'id="undecided"' in page
    refused = client.post(reverse("pem:panel_create"), {"name": "太少", "judges": [judges[0].pk], "runs": [run.pk],
                                                         "threshold": 2})  # fmt: skip
    assert refused.status_code == 200 and PanelRun.objects.count() == 1
    api = client.post(reverse("pem_api:panels"), {"name": "api", "judges": [j.pk for j in judges], "runs": [run.pk]},
                      content_type="application/json")  # fmt: skip
    assert api.status_code == 201 and api.json()["threshold"] == 3
    bad = client.post(reverse("pem_api:panels"), {"name": "bad", "judges": [judges[0].pk], "runs": [run.pk],
                                                  "threshold": 3}, content_type="application/json")  # fmt: skip
    assert bad.status_code == 400
    out = io.StringIO()
    call_command("judge_panel", "--vote", "页面", stdout=out)
    assert json.loads(out.getvalue())["threshold"] == 2
    assert login(annotator).get(reverse("pem:panel", args=[started.pk])).status_code == 403


def test_a_real_model_that_answers_garbage_casts_no_votes(tiny_model_server, judges, researcher, sent):  # noqa: F811
    """The local transformers serve model as the fourth judge: its random output
    is never read as labels; the three scripted judges still decide where all agree."""
    base_url, model_name = tiny_model_server
    real = services.save_endpoint(endpoint=ModelEndpoint(name="tiny", base_url=base_url, model_name=model_name,
                                                         accepts_images=False, default_params={"max_tokens": 8}),
                                  user=None)  # fmt: skip
    started = panel.start_panel(name="真", inference_runs=[answered_run()], judges=[*judges[:3], real], user=researcher)
    run_with_parts(started.job_id)
    started.refresh_from_db()
    assert started.counts["missing_votes"]["tiny"] == 5
    assert (started.counts["decided"], started.counts["no_majority"]) == (3, 2)
    assert Judgment.objects.filter(scoring_run__judge=real).exclude(status="ok").count() == 2


@pytest.mark.django_db
def test_a_judge_that_times_out_or_answers_garbage_casts_no_vote_and_the_format_filter_counts_it(researcher, sent):
    """j3 answers garbage and j4 times out on the three-step chain: two votes of four cannot reach three,
    so its steps stay undecided (never guessed) and the format filter removes the chain, counted."""
    import time

    from pem.training import filters

    def slow_on_three(name):
        reply = judge_reply(name)

        def slow(body):
            if "甲。" in user_text(body):
                time.sleep(1.5)  # past the endpoint's 1 s timeout
            return reply(body)

        return slow

    replies = {name: judge_reply(name) for name in ("j1", "j2")}
    replies["j3"] = lambda body: (200, "乱码") if "甲。" in user_text(body) else judge_reply("j3")(body)
    replies["j4"] = slow_on_three("j4")
    servers = Servers()
    url = servers.start(replies)
    try:
        judges = [services.save_endpoint(endpoint=ModelEndpoint(name=name, base_url=url, model_name=name,
                                                                timeout_seconds=1), user=None)
                  for name in replies]  # fmt: skip
        started = panel.start_panel(name="timeouts", inference_runs=[answered_run()], judges=judges, user=researcher)
        assert run_with_parts(started.job_id) == "succeeded"
    finally:
        servers.stop()
    started.refresh_from_db()
    assert started.counts["missing_votes"] == {"j1": 0, "j2": 0, "j3": 3, "j4": 3}
    assert (started.counts["no_majority"], started.counts["chains_with_no_majority"]) == (3, 1)
    timed_out = Judgment.objects.get(scoring_run__judge__name="j4", response__raw_output=THREE)
    assert timed_out.status == "call_failed" and "tim" in timed_out.error.lower()
    one_model = {"coverage": {"min_models": 1}, "consistency": {"check_final_answer": False}}
    run = filters.start_filter_run(source=StepLabel.Source.PANEL, rater="timeouts", params=one_model, user=researcher)
    filters.run_filters(run)
    run.refresh_from_db()
    assert run.funnel["format"]["chains"] == 1 and dict(run.funnel["format"]["reasons"]) == {"unlabelled_steps": 1}
    assert run.kept == 1


def reference_reply(name):
    """The judge answering as K12-PEM does: a Python-style list of [step, 中文标签, 解释]."""

    def reply(body):
        assert body["messages"][0]["role"] == "user" and "response_format" not in body  # the reference's message
        text = user_text(body)
        chain = THREE if "甲。" in text else TWO
        labels = LABELS[name][chain] or LABELS["j1"][chain]
        items = [[s, LABELS_BY_CODE[label].chinese, f"{name} 评 {s}"] for s, label in zip(STEPS[chain], labels,
                                                                                          strict=True)]  # fmt: skip
        return 200, f"分析如下：\n{items!r}"

    return reply


@pytest.mark.django_db
@reference_code.needs_reference
def test_a_panel_in_the_reference_protocol_asks_and_reads_every_judge_as_the_reference(researcher, login, sent):
    """The protocol is chosen per panel (function, screen, API, command) and given to each judge's
    scoring run; its judges' Chinese-labelled lists are read and voted on."""
    register_checkout(reference_code.CHECKOUT)
    servers = Servers()
    url = servers.start({name: reference_reply(name) for name in ("j1", "j2", "j3")})
    try:
        judges = [services.save_endpoint(endpoint=ModelEndpoint(name=name, base_url=url, model_name=name), user=None)
                  for name in ("j1", "j2", "j3")]  # fmt: skip
        run = answered_run(owner=researcher)
        started = panel.start_panel(name="参考", inference_runs=[run], judges=judges, user=researcher,
                                    protocol="reference")  # fmt: skip
        assert set(started.scoring_runs.values_list("protocol", flat=True)) == {"reference"}
        assert run_with_parts(started.job_id) == "succeeded"
    finally:
        servers.stop()
    started.refresh_from_db()
    assert started.protocol == "reference"
    # Step 3 of THREE: CE, KAE, CE; step 2: CS, CS, KAE: a majority of two everywhere.
    assert (started.counts["steps"], started.counts["decided"], started.counts["no_majority"]) == (5, 5, 0)
    assert started.counts["missing_votes"] == {"j1": 0, "j2": 0, "j3": 0}
    decided = {
        (v.step.cot.response_text, v.step.position): v.label for v in PanelVote.objects.filter(panel_run=started)
    }
    assert decided[(THREE, 3)] == "CE" and decided[(THREE, 2)] == "CS"

    client = login(researcher)
    page = client.get(reverse("pem:panel", args=[started.pk])).content.decode()
    assert 'id="panel-protocol"' in page and "K12Vista" in page
    with_form = client.post(reverse("pem:panel_create"), {"name": "表单", "judges": [j.pk for j in judges],
                                                          "runs": [run.pk], "protocol": "reference"})  # fmt: skip
    assert with_form.status_code == 302 and PanelRun.objects.get(name="表单").protocol == "reference"
    body = {"name": "api", "judges": [j.pk for j in judges], "runs": [run.pk], "protocol": "reference"}
    api = client.post(reverse("pem_api:panels"), body, content_type="application/json")
    assert api.status_code == 201 and api.json()["protocol"] == "reference"
    assert client.post(reverse("pem_api:panels"), {"name": "x", "judges": [j.pk for j in judges], "runs": [run.pk],
                                                   "protocol": "paper"},
                       content_type="application/json").status_code == 400  # fmt: skip
    assert client.post(reverse("pem_api:panels"), {"name": "默认", "judges": [j.pk for j in judges],
                                                   "runs": [run.pk]},
                       content_type="application/json").json()["protocol"] == "studio"  # fmt: skip
    out = io.StringIO()
    call_command("judge_panel", "命令", "--judge", "j1", "--judge", "j2", "--judge", "j3", "--run", str(run.pk),
                 "--protocol", "reference", stdout=out)  # fmt: skip
    assert json.loads(out.getvalue())["protocol"] == "reference"
    assert PanelRun.objects.get(name="命令").protocol == "reference"
