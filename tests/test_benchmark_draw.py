"""Stratified benchmark sampling: targets per subject-grade-type cell, every core
knowledge unit covered, rejected questions (the filters' removals) excluded,
shortfalls said per cell, the same seed and bank giving the same set."""

import pytest

from annotation import draw
from annotation.models import CoreUnit, KnowledgePoint, Question
from k12vista.jobs import execute_job
from tests.review_factories import bulk_questions

pytestmark = pytest.mark.django_db


@pytest.fixture
def bank():
    """math grade 9: 30 questions, physics grade 8: 5; 3 rejected math questions."""
    math = bulk_questions(33, subjects=["math"], grade=9)
    physics = bulk_questions(5, subjects=["physics"], grade=8)
    Question.objects.filter(pk__in=[q.pk for q in math[:3]]).update(status=Question.Status.REJECTED)
    return math, physics


def test_the_preview_allocates_per_cell_and_says_where_the_bank_falls_short(bank):
    report = draw.preview(draw.Targets(per_cell=10))
    cells = {c["cell"]: c for c in report["cells"]}
    assert cells["math/9/multiple_choice"] == {**cells["math/9/multiple_choice"], "available": 30, "allocated": 10,
                                               "shortfall": 0}  # fmt: skip
    short = cells["physics/8/multiple_choice"]
    assert (short["available"], short["allocated"], short["shortfall"]) == (5, 5, 5)
    assert "5 short" in short["note"] and report["short_cells"] == 1


def test_the_same_seed_and_bank_draw_the_same_set_and_rejected_questions_never(bank):
    targets = draw.Targets(per_cell=10, cover_knowledge=False)
    first, report, fingerprint = draw.draw(targets, seed=42)
    again, _report, same = draw.draw(targets, seed=42)
    other, _r, _f = draw.draw(targets, seed=43)
    assert first == again and fingerprint == same and first != other
    assert len(first) == 15 == report["total"]
    assert not Question.objects.filter(pk__in=first, status=Question.Status.REJECTED).exists()


def test_every_core_unit_is_covered_at_least_once(bank):
    math, _physics = bank
    unit = CoreUnit.objects.create(subject="math", name="平方根")
    rare = KnowledgePoint.objects.create(subject="math", name="算术平方根", core_unit=unit)
    lonely = KnowledgePoint.objects.create(subject="math", name="孤立的知识点")
    math[10].knowledge_points.add(rare)
    math[20].knowledge_points.add(lonely)
    ids, report, _f = draw.draw(draw.Targets(per_cell=1), seed=1)
    assert {math[10].pk, math[20].pk} <= set(ids)
    assert report["coverage"]["units"] == report["coverage"]["covered"] == 2
    assert sum(c["for_coverage"] for c in report["cells"]) == report["coverage"]["added_for_coverage"]


def test_the_draw_runs_as_a_job_and_records_its_seed(bank, researcher):
    candidate = draw.start_draw(targets=draw.Targets(per_cell=4), by=researcher, seed=5)
    execute_job(candidate.job_id)
    candidate.refresh_from_db()
    assert candidate.seed == 5 and candidate.questions.count() == 8 == candidate.report["total"]
    assert candidate.bank_fingerprint
    execute_job(candidate.job_id)  # a second delivery changes nothing
    assert candidate.questions.count() == 8


def test_targets_that_mean_nothing_are_refused():
    for bad in ({"per_cell": -1}, {"per_cell": "many"}, {"subjects": ["alchemy"]}, []):
        with pytest.raises(draw.DrawError):
            draw.Targets.from_dict(bad)
