"""Builders for audit tests: many questions fast (bulk inserts), inspectors, ratings."""

import itertools

from django.utils import timezone

from annotation.models import Assignment, Question
from k12vista.roles import Role
from k12vista.vocabulary import Subject, stage_of_grade
from review import services
from review.models import Rating
from tests.conftest import make_person

_batch = itertools.count(1)


def bulk_questions(per_subject: int, *, subjects=None, status=Question.Status.SOLUTION_CORRECTED, worker=None,
                   grade: int = 9) -> list[Question]:  # fmt: skip
    """Questions straight into the table (no figures, no checks): enough to sample from.
    With ``worker``, that annotator is recorded as having done both stages of each."""
    batch = next(_batch)
    rows = [
        Question(hash_id=f"b{batch}-{subject}-{i:05d}", subject=subject, grade=grade, stage=stage_of_grade(grade),
                 qtype="multiple_choice", text=f"题目 {i}：求 $x^2={i}$ 的正根。", answers=["A"],
                 solution_steps=[f"$x=\\sqrt{{{i}}}$"], status=status)
        for subject in (subjects or Subject.values)
        for i in range(per_subject)
    ]  # fmt: skip
    questions = Question.objects.bulk_create(rows)
    if worker is not None:
        now = timezone.now()
        Assignment.objects.bulk_create(
            Assignment(question=q, annotator=worker, task=task, locked_until=now, done_at=now)
            for q in questions
            for task in (Assignment.Task.OCR_REVIEW, Assignment.Task.STEP_CORRECTION)
        )
    return questions


def three_inspectors(first):
    """The fixture's inspector and two more (the paper's three)."""
    return [first, make_person("irene", Role.INSPECTOR), make_person("igor", Role.INSPECTOR)]


def audit_of(population=None, *, inspectors, by=None, **kwargs):
    args = {"name": "test audit", "strata": ["subject"], "per_stratum": 5, "seed": 7, **kwargs}
    return services.create_audit(population=population or {"kind": "status", "status": "solution_corrected"},
                                 inspectors=inspectors, by=by or inspectors[0], **args)  # fmt: skip


def rate(rating: Rating, *, fail=(), note="wrong"):
    """Submits a rating passing every dimension except those in ``fail``."""
    names = services.dimension_names(rating.item.kind)
    return services.submit_rating(
        rating=rating,
        verdicts={name: name not in fail for name in names},
        notes=dict.fromkeys(fail, note),
        by=rating.inspector,
    )


def rate_everything(audit, *, fail_items=(), fail=("solution",)):
    """Every inspector rates every item of round 1; the items in ``fail_items`` fail ``fail``."""
    for rating in Rating.objects.filter(item__audit=audit, item__round=1).select_related("item", "inspector"):
        rate(rating, fail=fail if rating.item_id in fail_items else ())
