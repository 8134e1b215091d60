"""The annotator's daily flow: narrowing the queue, accept-and-next, locks renewed only by POSTs
(opening a page changes nothing), and step correction autosaving with its conflicts."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import queues
from annotation.models import Assignment
from tests.annotation_factories import make_question
from tests.test_annotation_views import review_post

OCR = Assignment.Task.OCR_REVIEW
STEPS = Assignment.Task.STEP_CORRECTION


@pytest.fixture
def mixed_bank(db):
    return {
        "math": [make_question(subject="math") for _ in range(2)],
        "physics": [make_question(subject="physics", text="一物体做匀速直线运动，其速度为") for _ in range(2)],
    }


def test_it_counts_and_claims_within_the_annotators_choices(mixed_bank, annotator, login):
    client = login(annotator)
    body = client.get("/annotate/", {"subject": "physics"}).content.decode()
    assert "(2)" in body  # two physics questions wait, not four
    response = client.post("/annotate/claim/", {"task": OCR, "subject": "physics", "qtype": "", "document": ""})
    held = Assignment.objects.get(annotator=annotator)
    assert response.url == f"/annotate/review/{held.pk}/" and held.question.subject == "physics"


def test_it_ignores_choices_that_are_not_choices(mixed_bank, annotator, login):
    client = login(annotator)
    assert client.get("/annotate/", {"subject": "alchemy", "document": "x"}).status_code == 200
    client.post("/annotate/claim/", {"task": OCR, "subject": "alchemy", "document": "x"})
    assert Assignment.objects.filter(annotator=annotator).count() == 1


def test_it_opens_the_next_question_within_the_choices_after_accepting(mixed_bank, annotator, login):
    client = login(annotator)
    client.post("/annotate/claim/", {"task": OCR, "subject": "physics"})
    first = Assignment.objects.get(annotator=annotator)
    response = client.post(f"/annotate/review/{first.pk}/", review_post(first.question, action="accept"))
    second = Assignment.objects.get(annotator=annotator, done_at__isnull=True)
    assert response.url == f"/annotate/review/{second.pk}/"
    assert second.question.subject == "physics" and second.question != first.question
    # The last physics question accepted: back to the queue, with the math questions left alone.
    response = client.post(f"/annotate/review/{second.pk}/", review_post(second.question, action="accept"))
    assert response.url == "/annotate/"
    assert not Assignment.objects.filter(question__subject="math").exists()


def test_it_opens_the_next_question_after_submitting_steps(annotator, login):

    for _ in range(2):
        make_question().accept_ocr(by=annotator)
    first = queues.next_assignment(annotator=annotator, task=STEPS)
    data = {"version": first.question.version, "step": ["只有一步"], "action": "submit"}
    response = login(annotator).post(f"/annotate/steps/{first.pk}/", data)
    second = Assignment.objects.get(annotator=annotator, task=STEPS, done_at__isnull=True)
    assert response.url == f"/annotate/steps/{second.pk}/"


@pytest.mark.parametrize("page", ["review", "steps"])
def test_opening_a_work_page_does_not_renew_its_lock(annotator, login, page):

    question = make_question()
    task = OCR
    if page == "steps":
        question.accept_ocr(by=annotator)
        task = STEPS
    held = queues.next_assignment(annotator=annotator, task=task)
    soon = timezone.now() + timedelta(minutes=5)
    Assignment.objects.filter(pk=held.pk).update(locked_until=soon)
    assert login(annotator).get(f"/annotate/{page}/{held.pk}/").status_code == 200
    held.refresh_from_db()
    assert held.locked_until == soon


def test_the_heartbeat_renews_the_holders_lock_only(annotator, other_annotator, login, client):
    make_question()
    held = queues.next_assignment(annotator=annotator, task=OCR)
    soon = timezone.now() + timedelta(minutes=5)
    Assignment.objects.filter(pk=held.pk).update(locked_until=soon)
    assert login(other_annotator).post(f"/annotate/work/{held.pk}/heartbeat/").status_code == 404
    client.logout()
    own = login(annotator)
    assert own.get(f"/annotate/work/{held.pk}/heartbeat/").status_code == 405
    assert own.post(f"/annotate/work/{held.pk}/heartbeat/").status_code == 204
    held.refresh_from_db()
    assert held.locked_until > soon + timedelta(minutes=30)


@pytest.fixture
def steps_held(annotator):

    make_question().accept_ocr(by=annotator)
    return queues.next_assignment(annotator=annotator, task=STEPS)


def test_step_correction_autosaves_through_htmx(steps_held, annotator, login):
    data = {"version": steps_held.question.version, "step": ["第一步", "第二步"], "action": "autosave"}
    response = login(annotator).post(f"/annotate/steps/{steps_held.pk}/", data, headers={"HX-Request": "true"})
    body = response.content.decode()
    steps_held.question.refresh_from_db()
    assert response.status_code == 200 and steps_held.question.solution_steps == ["第一步", "第二步"]
    assert f'value="{steps_held.question.version}"' in body and 'hx-swap-oob="true"' in body


def test_step_correction_autosave_shows_a_conflict_at_once(steps_held, annotator, login):
    from annotation import services

    stale = steps_held.question.version
    services.edit_question(
        question=steps_held.question, changes={"solution_steps": ["别人的步骤"]}, user=annotator, expected_version=stale
    )
    data = {"version": stale, "step": ["我的步骤"], "action": "autosave"}
    response = login(annotator).post(f"/annotate/steps/{steps_held.pk}/", data, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 409
    assert 'id="conflict" hx-swap-oob="true"' in body and "别人的步骤" in body


def test_the_waiting_counts_stop_at_a_cap(mixed_bank, annotator, login, monkeypatch):
    """Counted with a LIMIT: cheap however many questions wait, shown as "N+" past the cap."""
    from annotation import views

    monkeypatch.setattr(views, "WAITING_CAP", 3)
    client = login(annotator)
    body = client.get("/annotate/").content.decode()
    assert "(3+)" in body  # four wait for OCR review
    assert "(2)" in client.get("/annotate/", {"subject": "physics"}).content.decode()
