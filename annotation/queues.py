"""Annotator queues: who holds which question, for how long.

Annotators pull work: ``next_assignment`` gives back the question they already
hold, or claims the oldest question nobody holds. Pulling spreads work evenly
across however many people are working, and a lock that expires returns an
abandoned question to the pool. The partial unique constraint on Assignment
(one open assignment per question and task) is what makes two people never
hold the same question, even when they press "next" at the same moment.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from annotation.models import Assignment, Question
from k12vista.roles import Role, people_with_role

# The status a question must be in to be worked on by each task (keyed by text: a task arrives as text).
TASK_INPUT: dict[str, str] = {
    Assignment.Task.OCR_REVIEW: Question.Status.IMPORTED,
    Assignment.Task.STEP_CORRECTION: Question.Status.OCR_REVIEWED,
}


# What an annotator may narrow their queue to (the queue form's fields -> Question fields).
QUEUE_FILTERS = {"subject": "subject", "qtype": "qtype", "document": "source_document_id"}


def queue_filter(choices: dict | None) -> Q:
    """The questions an annotator's choices allow; unknown keys and empty values are ignored."""
    choices = choices or {}
    return Q(**{field: choices[key] for key, field in QUEUE_FILTERS.items() if choices.get(key)})


def within_choices(assignment: Assignment, choices: dict | None) -> bool:
    """Whether the assignment's question is one the annotator's choices allow (a question held from before the
    choices changed is returned first all the same, and the page says so)."""
    return Question.objects.filter(queue_filter(choices), pk=assignment.question_id).exists()


def waiting_counts(within: Q, *, cap: int) -> dict[str, int]:
    """Questions waiting per task within the annotator's choices, counted up to ``cap`` + 1:
    a LIMITed count on the status index, cheap at any size, even right after a bulk load
    (bench/bulk_pages.py)."""
    return {
        task: Question.objects.filter(within, status=status).values("id")[: cap + 1].count()
        for task, status in TASK_INPUT.items()
    }


def next_assignment(*, annotator: Any, task: str, choices: dict | None = None) -> Assignment | None:
    """The question the annotator already holds for this task (the oldest first: work
    taken is finished before new work), else a claimed one within their choices."""
    held = Assignment.objects.for_annotator(annotator).open().filter(task=task).order_by("created").first()
    if held is not None:
        held.renew()
        return held
    for _attempt in range(5):  # lose a race, try the next question
        assignment = _claim_one(annotator=annotator, task=task, within=queue_filter(choices))
        if assignment is not False:
            return assignment
    return None


def _claim_one(*, annotator: Any, task: str, within: Q) -> Assignment | None | Literal[False]:
    """Claims one question within the annotator's choices: a free one, or one whose
    holder's lock expired. Returns False when someone else won the race for it."""
    now = timezone.now()
    expired = (
        Assignment.objects.open()
        .filter(task=task, locked_until__lt=now, question__in=Question.objects.filter(within).values("id"))
        .order_by("locked_until")
        .first()
    )
    if expired is not None:
        taken = Assignment.objects.filter(pk=expired.pk, done_at__isnull=True, locked_until__lt=now).update(
            annotator=annotator, locked_until=Assignment.lock_expiry(), created=now
        )
        if not taken:
            return False
        expired.refresh_from_db()
        return expired
    held = Assignment.objects.filter(question=OuterRef("pk"), task=task, done_at__isnull=True)
    question = (
        Question.objects.filter(within, status=TASK_INPUT[task]).exclude(Exists(held)).order_by("id").only("id").first()
    )
    if question is None:
        return None
    try:
        with transaction.atomic():
            return Assignment.objects.create(
                question=question, annotator=annotator, task=task, locked_until=Assignment.lock_expiry()
            )
    except IntegrityError:
        return False


def get_assignment_for_user(user: Any, pk: int) -> Assignment:
    """The user's own open assignment; 404 for anyone else's (the queue is private)."""
    from django.shortcuts import get_object_or_404

    return get_object_or_404(
        Assignment.objects.for_annotator(user).open().select_related("question", "question__source_page"), pk=pk
    )


def reassign(*, assignment: Assignment, to: Any) -> Assignment:
    """Admins move a held question to another annotator (a new lock starts)."""
    Assignment.objects.filter(pk=assignment.pk, done_at__isnull=True).update(
        annotator=to, locked_until=Assignment.lock_expiry()
    )
    assignment.refresh_from_db()
    return assignment


def annotators():
    """Active people holding the annotator role."""
    return people_with_role(Role.ANNOTATOR)


def mergeable_in_document(question: Question) -> set[int]:
    """Ids of the questions of its document that may be merged into this one: detected after it,
    still only imported, and held by nobody."""
    if question.source_document_id is None:
        return set()
    held = Assignment.objects.filter(question=OuterRef("pk"), done_at__isnull=True)
    free = Question.objects.filter(source_document_id=question.source_document_id, id__gt=question.id,
                                   status=Question.Status.IMPORTED).exclude(Exists(held))  # fmt: skip
    return set(free.values_list("id", flat=True))


def next_in_document(question: Question) -> Question | None:
    """The question detected right after this one in its document, if nobody holds it."""
    if question.source_document_id is None:
        return None
    held = Assignment.objects.filter(question=OuterRef("pk"), done_at__isnull=True)
    return (
        Question.objects.filter(
            source_document_id=question.source_document_id, id__gt=question.id, status=Question.Status.IMPORTED
        )  # fmt: skip
        .exclude(Exists(held))
        .order_by("id")
        .first()
    )
