from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import queues
from annotation.models import Assignment, Question
from k12vista import work
from tests.annotation_factories import make_question

pytestmark = pytest.mark.django_db
OCR = Assignment.Task.OCR_REVIEW


def test_it_hands_each_annotator_a_different_question(annotator, other_annotator):
    first, second = make_question(), make_question()
    mine = queues.next_assignment(annotator=annotator, task=OCR)
    theirs = queues.next_assignment(annotator=other_annotator, task=OCR)
    assert {mine.question, theirs.question} == {first, second}


def test_it_gives_back_the_question_already_held(annotator):
    make_question(), make_question()
    first = queues.next_assignment(annotator=annotator, task=OCR)
    assert queues.next_assignment(annotator=annotator, task=OCR) == first


def test_it_returns_nothing_when_the_queue_is_empty(annotator, other_annotator):
    make_question()
    queues.next_assignment(annotator=annotator, task=OCR)
    assert queues.next_assignment(annotator=other_annotator, task=OCR) is None


def test_it_only_offers_questions_in_the_tasks_input_status(annotator):
    question = make_question()
    assert queues.next_assignment(annotator=annotator, task=Assignment.Task.STEP_CORRECTION) is None
    question.accept_ocr(by=annotator)
    assert queues.next_assignment(annotator=annotator, task=Assignment.Task.STEP_CORRECTION).question == question


def test_it_passes_on_a_question_whose_lock_expired(annotator, other_annotator):
    make_question()
    held = queues.next_assignment(annotator=annotator, task=OCR)
    Assignment.objects.filter(pk=held.pk).update(locked_until=timezone.now() - timedelta(minutes=1))
    taken = queues.next_assignment(annotator=other_annotator, task=OCR)
    assert taken.pk == held.pk and taken.annotator == other_annotator
    assert taken.locked_until > timezone.now()


def test_it_never_lets_two_people_hold_one_question(annotator, other_annotator):
    question = make_question()
    Assignment.objects.create(question=question, annotator=annotator, task=OCR, locked_until=Assignment.lock_expiry())
    with pytest.raises(Exception):  # noqa: B017, PT011 - the database refuses it
        Assignment.objects.create(
            question=question, annotator=other_annotator, task=OCR, locked_until=Assignment.lock_expiry()
        )


def test_it_frees_a_question_for_the_next_task_once_done(annotator):
    question = make_question()
    held = queues.next_assignment(annotator=annotator, task=OCR)
    held.complete()
    question.accept_ocr(by=annotator)
    assert Question.objects.get().status == "ocr_reviewed"
    assert queues.next_assignment(annotator=annotator, task=OCR) is None


def test_it_reports_progress_per_annotator(annotator, other_annotator):
    make_question(), make_question()
    queues.next_assignment(annotator=annotator, task=OCR).complete()
    queues.next_assignment(annotator=other_annotator, task=OCR)
    rows = {row["person"]: row for row in work.progress_by_person() if row["kind"] == OCR}
    assert (rows["alice"]["done"], rows["alice"]["held"], rows["alice"]["done_today"]) == (1, 0, 1)
    assert (rows["amy"]["done"], rows["amy"]["held"], rows["amy"]["done_today"]) == (0, 1, 0)
