"""The leaderboard from the database: SQL aggregation gives what the item-by-item computation gives."""

import random
from unittest import mock

import pytest
from django.utils import timezone

from annotation.models import Question
from inference import leaderboard, standings
from inference.models import InferenceRun, JudgedStep, Judgment, ModelEndpoint, PublishedResult, Response, ScoringRun
from k12vista.models import Job
from k12vista.vocabulary import LABEL_CODES, QuestionType, Subject, stage_of_grade

pytestmark = pytest.mark.django_db

METHOD = {"direct": ScoringRun.Method.JUDGE_DIRECT, "step_by_step": ScoringRun.Method.JUDGE_STEPS}


@pytest.mark.django_db
def test_it_shows_the_newest_published_number_when_sources_disagree():
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.51, source="paper v1")
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.53, source="paper v2")
    board = standings.standings([])
    published = board.entry("GPT-4o", "direct").published["overall"]
    assert (published.score, published.source) == (0.53, "paper v2")


def questions(count: int, seed: int = 0) -> list[Question]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        grade = rng.randint(1, 12)
        subject = "math" if grade <= 6 and i % 5 else rng.choice(list(Subject))  # a few primary physics etc.
        rows.append(
            Question(
                hash_id=f"s{seed}-{i}",
                subject=subject,
                grade=grade,
                stage=stage_of_grade(grade),
                qtype=rng.choice(list(QuestionType)),
                text="x",
            )  # fmt: skip
        )
    return Question.objects.bulk_create(rows)


def endpoint(name: str) -> ModelEndpoint:
    return ModelEndpoint.objects.create(name=name, base_url="http://127.0.0.1:8000/v1", model_name=name)


def scored_run(model: ModelEndpoint, mode: str, bank: list[Question], seed: int) -> ScoringRun:
    """A run over the bank: some questions never answered, some calls failed, some
    judgments unparsed or missing, scores and step labels at random."""
    rng = random.Random(seed)
    run = InferenceRun.objects.create(name=f"{model.name} {mode}", endpoint=model, mode=mode)
    scoring_run = ScoringRun.objects.create(name="s", inference_run=run, judge=model, method=METHOD[mode])
    for question in bank:
        if rng.random() < 0.1:
            continue  # not in this run's question set
        status = rng.choice([Response.Status.OK] * 8 + [Response.Status.FAILED, Response.Status.PENDING])
        response = Response.objects.create(run=run, question=question, status=status)
        if rng.random() < 0.1:
            continue  # no judgment row yet
        state = rng.choice([Judgment.Status.OK] * 6 + [Judgment.Status.PARSE_FAILED, Judgment.Status.CALL_FAILED])
        score = rng.choice([0.0, 1.0, 0.5, 1 / 3, rng.random()]) if state == Judgment.Status.OK else None
        judgment = Judgment.objects.create(scoring_run=scoring_run, response=response, status=state, score=score)
        if mode == "step_by_step" and rng.random() < 0.9:
            for position in range(rng.randint(1, 5)):
                JudgedStep.objects.create(judgment=judgment, position=position, text="s",
                                          label=rng.choice(["CS", "CS", *LABEL_CODES]))  # fmt: skip
    return scoring_run


def reference(runs: list[ScoringRun]) -> leaderboard.Leaderboard:
    """The item-by-item computation the SQL replaced: one ScoredItem per response."""
    items = []
    for run in runs:
        judgments = {j.response_id: j for j in Judgment.objects.filter(scoring_run=run)}
        for response in Response.objects.filter(run=run.inference_run).select_related("question"):
            judgment = judgments.get(response.pk)
            ok = judgment is not None and judgment.status == Judgment.Status.OK
            question = response.question
            items.append(
                leaderboard.ScoredItem(
                    model=standings.model_label(run), mode=standings.MODE_OF_METHOD[run.method],
                    question_id=question.pk, subject=question.subject, grade=question.grade, qtype=question.qtype,
                    score=judgment.score if ok else None,
                    step_labels=tuple(judgment.steps.order_by("position").values_list("label", flat=True))
                    if ok else (),
                )
            )  # fmt: skip
    return leaderboard.build_leaderboard(items)


def assert_same_board(got: leaderboard.Leaderboard, want: leaderboard.Leaderboard) -> None:
    assert [e.key for e in got.entries] == [e.key for e in want.entries]
    for ours, theirs in zip(got.entries, want.entries, strict=True):
        assert list(ours.cells) == list(theirs.cells)
        for group, cell in ours.cells.items():
            expected = theirs.cells[group]
            assert (cell.n, cell.unscored, cell.absent) == (expected.n, expected.unscored, expected.absent), group
            for name in ("mean", "ci_low", "ci_high"):
                value, wanted = getattr(cell, name), getattr(expected, name)
                assert (value is None) == (wanted is None), (group, name)
                if value is not None:
                    assert value == pytest.approx(wanted, abs=1e-12), (group, name)
        assert ours.errors == theirs.errors


def test_it_aggregates_in_the_database_exactly_as_item_by_item():
    bank = questions(120)
    runs = [
        scored_run(endpoint("Alpha"), "direct", bank, 1),
        scored_run(endpoint("Beta"), "step_by_step", bank, 2),
        scored_run(ModelEndpoint.objects.get(name="Alpha"), "step_by_step", bank, 3),
    ]
    board = standings.standings()
    assert [e.key for e in board.entries] == [("Alpha", "direct"), ("Alpha", "step_by_step"), ("Beta", "step_by_step")]
    assert_same_board(board, reference(runs))
    cells = board.entry("Beta", "step_by_step").cells
    assert cells["overall"].unscored > 0 and cells["overall"].items == runs[1].inference_run.responses.count()
    assert any(group.startswith("cell:") and group not in leaderboard.SCORE_GROUPS for group in cells)


def test_it_takes_a_fixed_number_of_queries_whatever_the_number_of_runs(django_assert_max_num_queries):
    bank = questions(30)
    for i in range(4):
        scored_run(endpoint(f"M{i}"), "step_by_step", bank, i)
    with django_assert_max_num_queries(6):
        board = standings.standings()
    assert len(board.entries) == 4


def test_it_uses_the_newest_scoring_run_of_each_inference_run():
    bank = questions(20)
    old = scored_run(endpoint("Alpha"), "direct", bank, 1)
    newer = ScoringRun.objects.create(name="again", inference_run=old.inference_run, judge=old.judge,
                                      method=old.method)  # fmt: skip
    for response in old.inference_run.responses.all():
        Judgment.objects.create(scoring_run=newer, response=response, status=Judgment.Status.OK, score=1.0)
    overall = standings.standings().entry("Alpha", "direct").cells["overall"]
    assert (overall.mean, overall.n, overall.unscored) == (1.0, old.inference_run.responses.count(), 0)


def test_it_computes_one_mode_only_when_asked():
    bank = questions(20)
    scored_run(endpoint("Alpha"), "direct", bank, 1)
    scored_run(ModelEndpoint.objects.get(name="Alpha"), "step_by_step", bank, 2)
    PublishedResult.objects.create(model="GPT-4o", mode="step_by_step", group="overall", score=0.5, source="p")
    board = standings.standings(mode="direct")
    assert [e.key for e in board.entries] == [("Alpha", "direct")]
    assert [e.key for e in standings.standings(mode="step_by_step").entries] == [
        ("Alpha", "step_by_step"),
        ("GPT-4o", "step_by_step"),
    ]
    with pytest.raises(ValueError, match="mode"):
        standings.standings(mode="sideways")


def test_it_keeps_two_runs_of_one_model_and_mode_apart():
    bank = questions(20)
    model = endpoint("Alpha")
    first, second = scored_run(model, "direct", bank, 1), scored_run(model, "direct", bank, 2)
    keys = [e.key for e in standings.standings().entries]
    assert keys == [
        (f"Alpha (run {first.inference_run_id})", "direct"),
        (f"Alpha (run {second.inference_run_id})", "direct"),
    ]


def test_it_gives_an_unscored_run_full_items_and_zero_coverage():
    bank = questions(10)
    run = InferenceRun.objects.create(name="r", endpoint=endpoint("Alpha"), mode="direct")
    for question in bank:
        Response.objects.create(run=run, question=question, status=Response.Status.FAILED)
    ScoringRun.objects.create(name="s", inference_run=run, judge=run.endpoint, method=ScoringRun.Method.JUDGE_DIRECT)
    overall = standings.standings().entry("Alpha", "direct").cells["overall"]
    assert (overall.n, overall.items, overall.coverage, overall.mean) == (0, 10, 0.0, None)


def finish(job_kind: str) -> Job:
    return Job.objects.create(kind=job_kind, status=Job.Status.SUCCEEDED, finished_at=timezone.now())


def test_it_caches_a_finished_runs_slices_until_a_new_job_writes_to_it(django_assert_max_num_queries):
    bank = questions(30)
    run = scored_run(endpoint("Alpha"), "step_by_step", bank, 1)
    first = standings.standings()
    assert standings.cache_key(run) is None  # rows written without a job are never cached
    InferenceRun.objects.filter(pk=run.inference_run_id).update(job=finish("inference.run"))
    ScoringRun.objects.filter(pk=run.pk).update(job=finish("inference.score"))
    assert_same_board(standings.standings(), first)  # computed and stored
    with django_assert_max_num_queries(3):  # newest runs (2) and published numbers; no aggregation
        assert_same_board(standings.standings(), first)

    # a rescore is a new job: its judgments count at once
    Judgment.objects.filter(scoring_run=run).update(status=Judgment.Status.OK, score=1.0)
    ScoringRun.objects.filter(pk=run.pk).update(job=finish("inference.score"))
    overall = standings.standings().entry("Alpha", "step_by_step").cells["overall"]
    assert overall.mean == 1.0 and overall.n == Judgment.objects.filter(scoring_run=run).count()


def test_it_never_caches_a_run_whose_job_is_still_going():
    bank = questions(10)
    run = scored_run(endpoint("Alpha"), "direct", bank, 1)
    InferenceRun.objects.filter(pk=run.inference_run_id).update(job=finish("inference.run"))
    going = Job.objects.create(kind="inference.score", status=Job.Status.RUNNING)
    ScoringRun.objects.filter(pk=run.pk).update(job=going)
    before = standings.standings().entry("Alpha", "direct").cells["overall"]
    Judgment.objects.filter(scoring_run=run).update(status=Judgment.Status.OK, score=0.0)
    after = standings.standings().entry("Alpha", "direct").cells["overall"]
    assert after.mean == 0.0 and after.n > before.n


def test_a_cache_that_is_down_makes_the_board_slow_not_broken():
    bank = questions(10)
    run = scored_run(endpoint("Alpha"), "direct", bank, 1)
    InferenceRun.objects.filter(pk=run.inference_run_id).update(job=finish("inference.run"))
    ScoringRun.objects.filter(pk=run.pk).update(job=finish("inference.score"))
    down = mock.Mock(side_effect=ConnectionError("redis down"))
    with mock.patch.object(standings.cache, "get_many", down), mock.patch.object(standings.cache, "set", down):
        board = standings.standings()
    assert_same_board(board, reference([ScoringRun.objects.get(pk=run.pk)]))
