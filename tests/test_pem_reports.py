"""The agreement report and the checkers report over the database; every expected
number is worked out by hand in the comments."""

import json

import pytest

from inference.models import InferenceRun, Judgment, ModelEndpoint, Response, ScoringRun
from k12vista.roles import Role
from pem.alignment import align
from pem.models import Alignment, ChainOfThought, ExpertScore, PEBenchItem, Step, StepLabel
from pem.reports import agreement_report, checker_report
from tests.annotation_factories import make_question
from tests.conftest import make_person

pytestmark = pytest.mark.django_db
PERSON, GOLD, MODEL, IMPORTED = "person", "gold", "model", "imported"


def chain(key: str, n_steps: int) -> ChainOfThought:
    cot = ChainOfThought.objects.create(key=key, origin=ChainOfThought.Origin.IMPORTED)
    Step.objects.bulk_create(Step(cot=cot, position=p, text=f"{key} step {p}") for p in range(1, n_steps + 1))
    return cot


def labels(cot, source, rater, codes, scoring_run=None):
    steps = list(cot.steps.order_by("position"))
    StepLabel.objects.bulk_create(
        StepLabel(step=step, source=source, rater=rater, label=code, scoring_run=scoring_run)
        for step, code in zip(steps, codes, strict=True)
        if code is not None
    )


def scoring_run(name: str, method=ScoringRun.Method.JUDGE_STEPS, mode=InferenceRun.Mode.STEP_BY_STEP) -> ScoringRun:
    endpoint = ModelEndpoint.objects.create(name=name, model_name=name)
    run = InferenceRun.objects.create(name=f"run {name}", endpoint=endpoint, mode=mode)
    return ScoringRun.objects.create(name=f"scoring {name}", inference_run=run, judge=endpoint, method=method)


@pytest.fixture
def world():
    """Three chains of thought:
    c1 (3 steps): alice CS CE CS, amy CS KAE CS, gold CS CE CS; judge-a CS CE -, judge-b CS CS CS;
                  the release's imported labels CS CE CS.
    c2 (2 steps): alice CS CS, amy CS CS, gold CS CS; judge-a CS IAE.
    c3 (2 steps): alice HE CS only; gold on step 1 only (HE); judge-a HE CS.
    """
    run_a, run_b = scoring_run("judge-a"), scoring_run("judge-b")
    c1, c2, c3 = chain("c1", 3), chain("c2", 2), chain("c3", 2)
    labels(c1, PERSON, "alice", ["CS", "CE", "CS"])
    labels(c1, PERSON, "amy", ["CS", "KAE", "CS"])
    labels(c1, GOLD, "gold", ["CS", "CE", "CS"])
    labels(c1, MODEL, "judge-a", ["CS", "CE", None], run_a)
    labels(c1, MODEL, "judge-b", ["CS", "CS", "CS"], run_b)
    labels(c1, IMPORTED, "release", ["CS", "CE", "CS"])
    labels(c2, PERSON, "alice", ["CS", "CS"])
    labels(c2, PERSON, "amy", ["CS", "CS"])
    labels(c2, GOLD, "gold", ["CS", "CS"])
    labels(c2, MODEL, "judge-a", ["CS", "IAE"], run_a)
    labels(c3, PERSON, "alice", ["HE", "CS"])
    labels(c3, GOLD, "gold", ["HE", None])
    labels(c3, MODEL, "judge-a", ["HE", "CS"], run_a)
    return {"c1": c1, "c2": c2, "c3": c3, "run_a": run_a, "run_b": run_b}


def judge_named(report, rater):
    return next(j for j in report["judges"] if j["rater"] == rater)


def test_it_counts_items_steps_and_gold(world):
    report = agreement_report()
    assert (report["items"], report["steps"]) == (3, 7)
    assert report["categories"][0] == "CS" and report["ac1_categories"] == 9
    # Gold on 6 steps; c3 is not fully adjudicated, so 2 gold items.
    assert report["gold"]["steps"] == 6 and report["gold"]["items"] == 2
    assert report["gold"]["distribution"]["CS"] == 4 and report["gold"]["distribution"]["HE"] == 1
    json.dumps(report, allow_nan=False)


def test_it_computes_agreement_between_annotators(world):
    people = agreement_report()["people"]
    # Five steps have two labels (c1, c2), two only alice's (c3). Agreement on 4 of 5.
    assert people["units"]["pairable"] == 5 and people["units"]["single_rating"] == 2
    assert (people["raw_agreement"]["successes"], people["raw_agreement"]["n"]) == (4, 5)
    # Pooled pairs (alice first): CS-CS x4, CE-KAE x1: po .8, pe .8 x .8 = .64, kappa .16/.36.
    assert people["cohen_kappa"]["value"] == pytest.approx(0.16 / 0.36)
    assert people["confusion"][0][0] == 4 and people["confusion"][7][4] == 1
    assert people["pairs"][0]["raters"] == ["alice", "amy"] and people["pairs"][0]["units"] == 5
    assert people["gwet_ac1"]["categories"] == 9
    alice = next(r for r in people["raters"] if r["rater"] == "alice")
    assert "KAE" in alice["never_used"] and "HE" not in alice["never_used"]
    assert people["binary"]["raw_agreement"]["value"] == 1.0  # CE vs KAE are both errors


def test_it_scores_each_judge_against_gold_like_table_9(world):
    judge = judge_named(agreement_report(), "judge-a")
    # Items c1, c2, c3; their gold steps: c1 x3, c2 x2, c3 step 1.
    # Right: c1s1, c1s2, c2s1, c3s1. Wrong: c1s3 (no label), c2s2 (IAE for CS).
    assert judge["source"] == "model" and judge["items"] == 3 and judge["steps"] == 6
    assert (judge["accuracy"]["successes"], judge["accuracy"]["n"]) == (4, 6)
    assert judge["accuracy"]["ci95"] is not None
    by_label = judge["accuracy_by_label"]
    assert (by_label["CS"]["successes"], by_label["CS"]["n"]) == (2, 4)
    assert by_label["CE"]["value"] == 1.0 and by_label["HE"]["value"] == 1.0
    assert by_label["KAE"]["value"] is None and by_label["KAE"]["n"] == 0
    assert judge["macro_accuracy"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert (judge["coverage"]["successes"], judge["coverage"]["n"]) == (5, 6)
    # The gold CS row: 2 CS, 1 IAE, 1 without a label (the last column).
    assert judge["confusion"][0][0] == 2 and judge["confusion"][0][8] == 1 and judge["confusion"][0][9] == 1
    assert judge["scoring_runs"] == [world["run_a"].pk]


def test_it_compares_the_first_wrong_step_on_fully_adjudicated_items(world):
    fws = judge_named(agreement_report(), "judge-a")["first_wrong_step"]
    # c1: gold and judge both first wrong at step 2. c2: gold all correct, judge says step 2.
    assert (fws["agreement"]["successes"], fws["agreement"]["n"]) == (1, 2)
    assert fws["erroneous"]["value"] == 1.0 and fws["correct"]["value"] == 0.0
    assert fws["f1"] == 0.0


def test_judges_of_other_sources_follow_the_models(world):
    report = agreement_report()
    assert [(j["source"], j["rater"]) for j in report["judges"]] == [
        ("model", "judge-a"), ("model", "judge-b"), ("imported", "release"),
    ]  # fmt: skip
    judge_b = judge_named(report, "judge-b")
    assert judge_b["items"] == 1 and (judge_b["accuracy"]["successes"], judge_b["accuracy"]["n"]) == (2, 3)
    assert judge_b["accuracy_by_label"]["CE"]["value"] == 0.0
    assert judge_named(report, "release")["accuracy"]["value"] == 1.0


def test_it_limits_the_report_to_the_given_items(world):
    PEBenchItem.objects.create(cot=world["c1"])
    report = agreement_report(ChainOfThought.objects.in_pebench())
    assert (report["items"], report["steps"]) == (1, 3)
    assert report["people"]["units"]["pairable"] == 3
    assert agreement_report([world["c2"].pk])["steps"] == 2


def test_it_summarises_how_judge_splits_were_aligned(world):
    run_a, run_b = world["run_a"], world["run_b"]
    Alignment.objects.create(
        cot=world["c1"],
        scoring_run=run_a,
        gold_steps=3,
        judge_steps=3,
        pairs=[[1, 1, 1.0, "match"], [2, 2, 1.0, "match"], [3, 3, 0.9, "match"]],
    )
    Alignment.objects.create(
        cot=world["c2"],
        scoring_run=run_a,
        gold_steps=2,
        judge_steps=3,
        pairs=[[1, 1, 1.0, "match"], [2, 3, 0.8, "match"], [None, 2, 0.0, "extra"]],
    )
    Alignment.objects.create(
        cot=world["c3"],
        scoring_run=run_a,
        gold_steps=2,
        judge_steps=1,
        pairs=[[1, 1, 0.9, "match"], [2, None, 0.1, "missing"]],
    )
    Alignment.objects.create(cot=world["c1"], scoring_run=run_b, gold_steps=3, judge_steps=2,
                             pairs=[[1, 1, 1.0, "match"], [2, 2, 0.7, "match"], [3, 2, 0.6, "merged"]])  # fmt: skip
    summary = {row["scoring_run"]: row for row in agreement_report()["alignment"]}
    a = summary[run_a.pk]
    assert (a["items"], a["same_count"], a["different_count"]) == (3, 1, 2)
    assert a["kinds"] == {"identical": 1, "realigned": 1, "partial": 1}
    assert a["unmatched_judge_steps"] == 1 and a["judge"] == "judge-a" and a["name"] == "scoring judge-a"
    assert summary[run_b.pk]["kinds"] == {"identical": 0, "realigned": 1, "partial": 0}


def test_alignment_kinds_agree_with_the_aligner(world):
    gold = ["由图可知 AB = 3, BC = 4", "根据勾股定理 AC = 5", "所以周长为 12", "答案为 12"]
    cases = {
        "c1": gold[:3],  # identical split (the first three steps)
        "c2": [gold[0] + "，" + gold[1]],  # merged
        "c3": ["完全无关的一句话"],  # no gold step covered
    }
    expected = {"identical": 0, "realigned": 0, "partial": 0}
    for key, judge_texts in cases.items():
        cot = world[key]
        gold_texts = gold[: cot.steps.count()]
        result = align(gold_texts, judge_texts)
        expected[result.kind] += 1
        Alignment.objects.create(cot=cot, scoring_run=world["run_a"], gold_steps=len(gold_texts),
                                 judge_steps=len(judge_texts), pairs=result.as_pairs())  # fmt: skip
    assert agreement_report()["alignment"][0]["kinds"] == expected
    assert expected == {"identical": 1, "realigned": 1, "partial": 1}


def test_an_empty_database_gives_an_empty_report(db):
    report = agreement_report()
    assert (report["items"], report["steps"], report["judges"], report["alignment"]) == (0, 0, [], [])
    assert report["people"]["cohen_kappa"]["value"] is None
    json.dumps(report, allow_nan=False)


# --- checking the checkers ------------------------------------------------------------------


def test_checker_report_compares_expert_means_with_judge_scores(db):
    expert_1, expert_2 = make_person("erin", Role.INSPECTOR), make_person("eric", Role.RESEARCHER)
    direct = scoring_run("qwen-72b", ScoringRun.Method.JUDGE_DIRECT, InferenceRun.Mode.DIRECT)
    steps = scoring_run("k12-pem")
    responses = [
        Response.objects.create(run=direct.inference_run, question=make_question(), status=Response.Status.OK)
        for _ in range(4)
    ]
    # Experts: r1 1 and 1; r2 .5 and 0 (mean .25); r3 0; r4 1.
    for response, scores in zip(responses, [(1, 1), (0.5, 0), (0,), (1,)], strict=True):
        for expert, score in zip((expert_1, expert_2), scores, strict=False):
            ExpertScore.objects.create(response=response, expert=expert, score=score)
    # Direct judge: 1, .5, unparsable, 1. Step judge: .8, .2, 0, .9.
    for response, score in zip(responses, [1.0, 0.5, None, 1.0], strict=True):
        Judgment.objects.create(scoring_run=direct, response=response, score=score)
    for response, score in zip(responses, [0.8, 0.2, 0.0, 0.9], strict=True):
        Judgment.objects.create(scoring_run=steps, response=response, score=score)

    report = checker_report()
    assert report["reference"] == "mean"
    assert (report["experts"]["responses"], report["experts"]["experts"], report["experts"]["scores"]) == (4, 2, 6)
    # Expert agreement, interval alpha on r1 (1, 1) and r2 (.5, 0): D_o = .5/4, D_e = 2(4 x 2.25 - 2.5^2)/12.
    assert report["experts"]["agreement"]["value"] == pytest.approx(1 - 0.125 / (5.5 / 12))
    runs = {run["mode"]: run for run in report["runs"]}
    assert (runs["direct"]["coverage"]["successes"], runs["direct"]["coverage"]["n"]) == (3, 4)
    # Direct pairs (expert mean, judge): (1, 1), (.25, .5), (1, 1): mean |difference| .25/3.
    assert runs["direct"]["mean_absolute_difference"] == pytest.approx(0.25 / 3)
    assert runs["direct"]["judge"] == "qwen-72b" and runs["direct"]["method"] == "judge_direct"
    assert runs["step"]["units"] == 4 and runs["step"]["weighted_kappa"]["value"] is not None
    assert runs["step"]["binary_kappa"]["value"] == pytest.approx(1.0)  # same side of .5 everywhere
    json.dumps(report, allow_nan=False)


def test_checker_report_without_expert_scores_is_empty(db):
    scoring_run("qwen-72b", ScoringRun.Method.JUDGE_DIRECT, InferenceRun.Mode.DIRECT)
    report = checker_report()
    assert report["runs"] == [] and report["experts"]["agreement"]["value"] is None
