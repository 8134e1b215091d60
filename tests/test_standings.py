"""The leaderboard from the database: stored slices give what the item-by-item computation gives,
only finished scoring runs fill an entry, and a page after a restart reads the stored slices only."""

import math
import random
from collections import Counter, defaultdict

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Question
from inference import leaderboard, standings
from inference.leaderboard.core import groups_of
from inference.models import (
    BoardSlice,
    BoardSnapshot,
    InferenceRun,
    JudgedStep,
    Judgment,
    ModelEndpoint,
    PublishedResult,
    Response,
    ScoringRun,
)
from k12vista.models import Job
from k12vista.vocabulary import CORRECT, LABEL_CODES, QuestionType, Subject, stage_of_grade

pytestmark = pytest.mark.django_db

METHOD = {"direct": ScoringRun.Method.JUDGE_DIRECT, "step_by_step": ScoringRun.Method.JUDGE_STEPS}


@pytest.mark.django_db
def test_it_shows_the_newest_published_number_when_sources_disagree():
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.51, source="paper v1")
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.53, source="paper v2")
    board = standings.standings()
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


def finish(job_kind: str = "inference.score", status=Job.Status.SUCCEEDED) -> Job:
    return Job.objects.create(kind=job_kind, status=status, finished_at=timezone.now())


def scored_run(
    model: ModelEndpoint, mode: str, bank: list[Question], seed: int, *, snapshot: bool = True, filters=None
) -> ScoringRun:
    """A run over the bank: some questions never answered (absent), some calls
    failed, some judgments unparsed or missing, scores and step labels at
    random; its scoring job finished and stored its slices, unless ``snapshot`` is False."""
    rng = random.Random(seed)
    run = InferenceRun.objects.create(name=f"{model.name} {mode}", endpoint=model, mode=mode, filters=filters or {})
    scoring_run = ScoringRun.objects.create(
        name=f"s{seed}", inference_run=run, judge=model, method=METHOD[mode], job=finish()
    )
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
    if snapshot:
        standings.take_snapshot(scoring_run)
    return scoring_run


def reference(runs: list[ScoringRun]) -> tuple[leaderboard.Leaderboard, dict]:
    """The item-by-item computation the SQL replaced: one ScoredItem per response;
    and, per entry and group, the questions of the bank the run has no row for."""
    items, absent = [], defaultdict(Counter)
    keys = standings.entry_keys(runs)
    for run in runs:
        judgments = {j.response_id: j for j in Judgment.objects.filter(scoring_run=run)}
        answered = set()
        for response in Response.objects.filter(run=run.inference_run).select_related("question"):
            judgment = judgments.get(response.pk)
            ok = judgment is not None and judgment.status == Judgment.Status.OK
            question = response.question
            answered.add(question.pk)
            items.append(
                leaderboard.ScoredItem(
                    model=keys[run.pk][0], mode=standings.MODE_OF_METHOD[run.method],
                    question_id=question.pk, subject=question.subject, grade=question.grade, qtype=question.qtype,
                    score=judgment.score if ok else None,
                    step_labels=tuple(judgment.steps.order_by("position").values_list("label", flat=True))
                    if ok else (),
                )
            )  # fmt: skip
        for question in Question.objects.matching(run.inference_run.filters).exclude(pk__in=answered):
            for group in groups_of(question.subject, question.stage, question.qtype):
                absent[keys[run.pk]][group] += 1
    return leaderboard.build_leaderboard(items), absent


def assert_same_board(got: leaderboard.Leaderboard, want: leaderboard.Leaderboard, absent=None) -> None:
    assert [e.key for e in got.entries] == [e.key for e in want.entries]
    for ours, theirs in zip(got.entries, want.entries, strict=True):
        assert list(ours.cells) == list(theirs.cells)
        for group, cell in ours.cells.items():
            expected = theirs.cells[group]
            want_absent = absent[ours.key][group] if absent is not None else expected.absent
            assert (cell.n, cell.unscored, cell.absent) == (expected.n, expected.unscored, want_absent), group
            for name in ("mean", "ci_low", "ci_high"):
                value, wanted = getattr(cell, name), getattr(expected, name)
                assert (value is None) == (wanted is None), (group, name)
                if value is not None:
                    assert value == pytest.approx(wanted, abs=1e-12), (group, name)
        assert ours.errors == theirs.errors


def test_it_stores_slices_that_give_exactly_the_item_by_item_board():
    bank = questions(120)
    runs = [
        scored_run(endpoint("Alpha"), "direct", bank, 1),
        scored_run(endpoint("Beta"), "step_by_step", bank, 2),
        scored_run(ModelEndpoint.objects.get(name="Alpha"), "step_by_step", bank, 3),
    ]
    board = standings.standings()
    assert [e.key for e in board.entries] == [("Alpha", "direct"), ("Alpha", "step_by_step"), ("Beta", "step_by_step")]
    assert_same_board(board, *reference(runs))
    cells = board.entry("Beta", "step_by_step").cells
    assert cells["overall"].unscored > 0 and cells["overall"].n + cells["overall"].unscored == (
        runs[1].inference_run.responses.count()
    )
    assert cells["overall"].absent == len(bank) - runs[1].inference_run.responses.count() > 0
    assert any(group.startswith("cell:") and not leaderboard.in_release(group) for group in cells)


def test_the_grid_and_its_error_distributions_match_a_count_by_hand():
    """Each type x subject-grade cell, recomputed here from the rows with nothing but loops."""
    bank = questions(150, seed=7)
    run = scored_run(endpoint("Beta"), "step_by_step", bank, 5)
    entry = standings.standings().entry("Beta", "step_by_step")
    scores, counted, labels = defaultdict(list), Counter(), defaultdict(Counter)
    for judgment in Judgment.objects.filter(scoring_run=run).select_related("response__question"):
        q = judgment.response.question
        tag = f"{q.subject}-g{ {'primary': 6, 'middle': 9, 'high': 12}[q.stage] }"
        group = f"grid:{q.qtype}:{tag}"
        if judgment.status == Judgment.Status.OK:
            scores[group].append(judgment.score)
            labels[group].update(judgment.steps.values_list("label", flat=True))
    for response in Response.objects.filter(run=run.inference_run).select_related("question"):
        q = response.question
        counted[f"grid:{q.qtype}:{q.subject}-g{ {'primary': 6, 'middle': 9, 'high': 12}[q.stage] }"] += 1
    checked = 0
    for group, cell in entry.cells.items():
        if not group.startswith("grid:"):
            continue
        values = scores.get(group, [])
        assert (cell.n, cell.n + cell.unscored) == (len(values), counted[group]), group
        if values:
            assert cell.mean == pytest.approx(sum(values) / len(values), abs=1e-12)
            checked += 1
        if len(values) >= 2:
            mean = sum(values) / len(values)
            sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            half = leaderboard.t_quantile(0.975, len(values) - 1) * sd / math.sqrt(len(values))
            assert cell.ci_low == pytest.approx(max(0.0, mean - half)) and cell.ci_high == pytest.approx(
                min(1.0, mean + half)
            )
        dist = entry.errors[group]
        by_hand = labels.get(group, Counter())
        errors = sum(count for code, count in by_hand.items() if code != CORRECT)
        assert (dist.steps, dist.error_steps) == (sum(by_hand.values()), errors), group
        for code in leaderboard.ERROR_CODES:
            assert dist.counts[code] == by_hand[code]
            assert dist.shares[code] == (by_hand[code] / errors if errors else None)
    assert checked >= 10 and set(counted) <= set(entry.cells)


def test_it_takes_a_fixed_number_of_queries_whatever_the_number_of_runs(django_assert_max_num_queries):
    bank = questions(30)
    for i in range(4):
        scored_run(endpoint(f"M{i}"), "step_by_step", bank, i)
    with django_assert_max_num_queries(4):  # scoring runs, pins, slices, published numbers
        board = standings.standings()
    assert len(board.entries) == 4


def test_a_page_right_after_a_restart_reads_the_stored_slices_only(inspector, login):
    bank = questions(40)
    scored_run(endpoint("Alpha"), "step_by_step", bank, 1)
    scored_run(endpoint("Beta"), "step_by_step", bank, 2)
    cache.clear()  # a restart: nothing in any cache
    client = login(inspector)
    with CaptureQueriesContext(connection) as queries:
        body = client.get("/research/leaderboard/?mode=step_by_step").content.decode()
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    assert "inference_boardslice" in sql
    for heavy in ("inference_judgment", "inference_judgedstep", "inference_response", "annotation_question"):
        assert heavy not in sql, heavy
    assert "Alpha" in body and "Beta" in body


def test_a_newer_scoring_run_that_is_running_or_failed_never_replaces_a_finished_one():
    bank = questions(20)
    finished = scored_run(endpoint("Alpha"), "direct", bank, 1)
    before = standings.standings().entry("Alpha", "direct")
    for status in (Job.Status.RUNNING, Job.Status.FAILED):
        newer = ScoringRun.objects.create(
            name=f"again {status}", inference_run=finished.inference_run, judge=finished.judge,
            method=finished.method, job=finish(status=status),
        )  # fmt: skip
        for response in finished.inference_run.responses.all()[:3]:
            Judgment.objects.create(scoring_run=newer, response=response, status=Judgment.Status.OK, score=1.0)
        entry = standings.standings().entry("Alpha", "direct")
        assert entry.cells == before.cells and entry.run.scoring_run == finished.pk
        assert (newer.pk, newer.name, status) in [(n.scoring_run, n.name, n.status) for n in entry.run.not_counted]


def test_a_rescore_of_the_same_run_keeps_the_finished_numbers_while_it_runs_and_after_it_fails():
    bank = questions(20)
    run = scored_run(endpoint("Alpha"), "direct", bank, 1)
    before = standings.standings().entry("Alpha", "direct").cells
    # the rescore sends judgments back to pending and scores them again, job running
    ScoringRun.objects.filter(pk=run.pk).update(job=Job.objects.create(kind="inference.score", status="running"))
    Judgment.objects.filter(scoring_run=run).update(status=Judgment.Status.OK, score=1.0)
    entry = standings.standings().entry("Alpha", "direct")
    assert entry.cells == before and [n.status for n in entry.run.not_counted] == ["rescore running"]
    Job.objects.filter(pk=ScoringRun.objects.get(pk=run.pk).job_id).update(status=Job.Status.FAILED)
    entry = standings.standings().entry("Alpha", "direct")
    assert entry.cells == before and [n.status for n in entry.run.not_counted] == ["rescore failed"]
    # once a rescore finishes, its job stores the new slices
    standings.take_snapshot(ScoringRun.objects.get(pk=run.pk))
    assert standings.standings().entry("Alpha", "direct").cells["overall"].mean == 1.0


def test_an_edit_to_a_scored_question_changes_no_entry_under_the_snapshot_rule():
    bank = questions(30)
    runs = [scored_run(endpoint(name), "direct", bank, seed) for seed, name in enumerate(("A", "B", "C"))]
    before = standings.standings()
    moved = Response.objects.filter(run=runs[0].inference_run).first().question
    Question.objects.filter(pk=moved.pk).update(subject="geography", grade=12, stage="high", qtype="free_response",
                                                answers=["changed"])  # fmt: skip
    assert standings.standings() == before  # every model at once: none
    # the live bank would have moved it: the snapshot rule is what keeps the board still
    assert standings.live_standings([runs[0]]).entries[0].cells != before.entry("A", "direct").cells


def test_a_researcher_pins_which_finished_scoring_run_represents_a_model(researcher):
    bank = questions(20)
    old = scored_run(endpoint("Alpha"), "direct", bank, 1)
    newer = ScoringRun.objects.create(name="newer", inference_run=old.inference_run, judge=old.judge,
                                      method=old.method, job=finish())  # fmt: skip
    for response in old.inference_run.responses.all():
        Judgment.objects.create(scoring_run=newer, response=response, status=Judgment.Status.OK, score=1.0)
    standings.take_snapshot(newer)
    assert standings.standings().entry("Alpha", "direct").run.scoring_run == newer.pk  # the newest finished
    standings.pin_scoring_run(scoring_run=old, user=researcher)
    entry = standings.standings().entry("Alpha", "direct")
    assert (entry.run.scoring_run, entry.run.pinned) == (old.pk, True)
    assert entry.cells["overall"].mean != 1.0
    unfinished = ScoringRun.objects.create(name="going", inference_run=old.inference_run, judge=old.judge,
                                           method=old.method, job=finish(status=Job.Status.RUNNING))  # fmt: skip
    with pytest.raises(standings.BoardError, match="finished"):
        standings.pin_scoring_run(scoring_run=unfinished, user=researcher)
    assert standings.unpin(inference_run_id=old.inference_run_id)
    assert standings.standings().entry("Alpha", "direct").run.scoring_run == newer.pk


def test_an_inference_run_with_no_finished_scoring_run_waits_off_the_board():
    bank = questions(10)
    run = scored_run(endpoint("Alpha"), "direct", bank, 1, snapshot=False)
    ScoringRun.objects.filter(pk=run.pk).update(job=finish(status=Job.Status.RUNNING))
    state = standings.board_state()
    board, waiting = state.board, state.waiting
    assert board.entries == () and [(w.model, w.mode) for w in waiting] == [("Alpha", "direct")]
    assert waiting[0].not_counted[0].status == "running"


def test_each_entry_names_its_runs_and_a_run_over_another_question_set_is_marked():
    bank = questions(20)
    a = scored_run(endpoint("A"), "direct", bank, 1)
    scored_run(endpoint("B"), "direct", bank, 2)
    c = scored_run(endpoint("C"), "direct", bank, 3, filters={"subject": "math"})
    board = standings.standings()
    assert board.question_set == "all questions"
    entry_a, entry_c = board.entry("A", "direct"), board.entry("C", "direct")
    assert (entry_a.run.inference_run, entry_a.run.scoring_run) == (a.inference_run_id, a.pk)
    assert entry_a.run.snapshot_at == BoardSnapshot.objects.get(scoring_run=a).taken_at.isoformat()
    assert (entry_a.run.question_set, entry_a.run.other_question_set) == ("all questions", False)
    assert (entry_c.run.question_set, entry_c.run.other_question_set) == ("subject=math", True)
    assert entry_c.run.scoring_run == c.pk


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
    scoring_run = ScoringRun.objects.create(name="s", inference_run=run, judge=run.endpoint,
                                            method=ScoringRun.Method.JUDGE_DIRECT, job=finish())  # fmt: skip
    standings.take_snapshot(scoring_run)
    overall = standings.standings().entry("Alpha", "direct").cells["overall"]
    assert (overall.n, overall.items, overall.coverage, overall.mean) == (0, 10, 0.0, None)


def test_a_new_snapshot_replaces_the_old_one_whole():
    bank = questions(30)
    run = scored_run(endpoint("Alpha"), "step_by_step", bank, 1)
    first = BoardSnapshot.objects.get(scoring_run=run)
    standings.take_snapshot(run)
    assert not BoardSnapshot.objects.filter(pk=first.pk).exists()
    assert BoardSlice.objects.filter(snapshot__scoring_run=run).count() == BoardSlice.objects.count() > 0


def test_the_command_stores_slices_of_finished_runs_scored_before(capsys):
    from django.core.management import call_command

    bank = questions(10)
    run = scored_run(endpoint("Alpha"), "direct", bank, 1, snapshot=False)
    assert standings.standings().entries == ()
    call_command("leaderboard_snapshots")
    assert standings.standings().entry("Alpha", "direct").run.scoring_run == run.pk
    assert "1 snapshot(s) taken" in capsys.readouterr().out
