"""Active time per item: every save of a label, review, rating or adjudication may bring the seconds the
page counted; they are stored clamped, summed per item, shown on the team page and exported."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import export as question_export
from annotation import queues
from annotation.models import Assignment, Question
from k12vista import guidelines, work
from k12vista.models import MAX_ACTIVE_SECONDS
from pem import labelling
from pem.export import streamed, studio_record
from pem.models import Adjudication, ChainOfThought, StepLabel
from review.models import Rating
from tests.annotation_factories import make_question
from tests.pem_factories import add_to_pebench, make_cot
from tests.review_factories import audit_of, bulk_questions, three_inspectors
from tests.test_annotation_views import review_post

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]

ALL_CORRECT = {"1": {"label": "CS"}, "2": {"label": "CS"}, "3": {"label": "CS"}}


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.parametrize(
    ("sent", "stored"),
    [(12.6, 12), ("40", 40), (-5, 0), (1e12, MAX_ACTIVE_SECONDS), ("inf", MAX_ACTIVE_SECONDS), ("nan", None),
     ("soon", None), (None, None), ([3], None)],
)  # fmt: skip
def test_what_a_page_sends_is_read_as_whole_seconds_within_bounds(sent, stored):
    assert guidelines.active_seconds(sent) == stored


def test_autosaves_add_up_and_the_labels_carry_the_items_time(annotator):
    cot = make_cot()
    add_to_pebench(cot)
    labelling.open_labelling(cot)
    task = labelling.next_task(annotator)
    api = api_as(annotator)
    url = reverse("pem_api:task_draft", args=[task.pk])
    first = api.put(url, {"version": 0, "draft": {"1": {"label": "CS"}}, "active_seconds": 30}, format="json")
    assert first.status_code == 200 and first.json()["active_seconds"] == 30
    refused = api.put(url, {"version": 0, "draft": {"1": {"label": "CE"}}, "active_seconds": 50}, format="json")
    assert refused.status_code == 409  # a save that lost counts nothing: its page sends the seconds again
    hostile = api.put(url, {"version": 1, "draft": ALL_CORRECT, "active_seconds": "many"}, format="json")
    assert hostile.status_code == 400
    negative = api.put(url, {"version": 1, "draft": ALL_CORRECT, "active_seconds": -100}, format="json")
    assert negative.status_code == 200 and negative.json()["active_seconds"] == 30
    done = api.post(reverse("pem_api:task_submit", args=[task.pk]), {"active_seconds": 15}, format="json")
    assert done.status_code == 200 and done.json()["active_seconds"] == 45
    assert set(StepLabel.objects.filter(step__cot=cot).values_list("active_seconds", flat=True)) == {45}
    labels = api.get(reverse("pem_api:item_labels", args=[cot.pk])).json()
    assert {label["active_seconds"] for label in labels} == {45}
    record = studio_record(next(streamed(ChainOfThought.objects.filter(pk=cot.pk))))
    assert [label["active_seconds"] for label in record["steps"][0]["labels"]] == [45]


def test_the_labelling_form_and_adjudication_record_their_time(annotator, other_annotator, inspector, login):
    cot = make_cot()
    labelling.open_labelling(cot)
    for person, label in ((annotator, "CS"), (other_annotator, "CE")):
        task = labelling.next_task(person)
        form = {"version": task.version, "action": "submit", "active_seconds": "20", "label-1": "CS", "label-2": label,
                "reason-2": "wrong", "label-3": "CS"}  # fmt: skip
        assert login(person).post(reverse("pem:label_task", args=[task.pk]), form).status_code == 302
    assert sorted(cot.labelling_tasks.values_list("active_seconds", flat=True)) == [20, 20]
    gold = {"gold-1": "CS", "gold-2": "CE", "reason-2": "3+4 is 7", "gold-3": "CS", "active_seconds": "70"}
    assert login(inspector).post(reverse("pem:adjudicate", args=[cot.pk]), gold).status_code == 302
    assert Adjudication.objects.get(cot=cot).active_seconds == 70


def test_ocr_review_saves_and_ratings_record_their_time(annotator, inspector, login):
    make_question()
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    client = login(annotator)
    url = reverse("annotation:review", args=[held.pk])
    client.post(url, review_post(held.question, active_seconds="25"), HTTP_HX_REQUEST="true")
    client.post(url, review_post(Question.objects.get(pk=held.question_id), action="accept", active_seconds="x"))
    held.refresh_from_db()
    assert held.done_at is not None and held.active_seconds == 25
    Question.objects.filter(pk=make_question(subject="math").pk).update(status=Question.Status.SOLUTION_CORRECTED)
    bulk_questions(2, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    rating = Rating.objects.filter(item__audit=audit, inspector=inspector).first()
    form = {"question": "pass", "answer": "pass", "solution": "pass", "active_seconds": "9"}
    assert login(inspector).post(reverse("review:rate", args=[rating.item_id]), form).status_code == 302
    assert Rating.objects.get(pk=rating.pk).active_seconds == 9


def test_the_team_page_shows_done_today_and_the_median_time_per_person(annotator, other_annotator, inspector, login):
    for seconds in (10, 30, 200):
        make_question()
        held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
        held.count_active_time(seconds)
        held.complete()
    cot = make_cot()
    labelling.open_labelling(cot)
    task = labelling.next_task(other_annotator)
    labelling.submit(labelling.save_draft(task=task, draft=ALL_CORRECT, expected_version=0, active_seconds=95))
    rows = {(row["person"], row["kind"]): row for row in work.progress_by_person()}
    assert rows[("alice", "ocr_review")]["median_seconds"] == 30
    assert rows[("alice", "ocr_review")]["done_today"] == 3
    assert rows[("amy", "pebench_labels")]["done_today"] == 1
    assert rows[("amy", "pebench_labels")]["median_seconds"] == 95
    page = login(inspector).get(reverse("annotation:team")).content.decode()
    assert 'data-person="amy" data-kind="pebench_labels"' in page
    assert 'data-median-seconds="30">0:30<' in page and 'data-median-seconds="95">1:35<' in page


def test_the_audit_report_exports_the_rating_time_and_criteria_versions(inspector, administrator, login):
    guidelines.publish(kind="audit", text="criteria", by=administrator)
    Question.objects.filter(pk=make_question(subject="math").pk).update(status=Question.Status.SOLUTION_CORRECTED)
    bulk_questions(2, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    client = login(inspector)
    for rating, seconds in zip(
        Rating.objects.filter(item__audit=audit, inspector=inspector), (10, 20, 60), strict=True
    ):
        form = {"question": "pass", "answer": "pass", "solution": "pass", "active_seconds": str(seconds)}
        client.post(reverse("review:rate", args=[rating.item_id]), form)
    report = client.get(reverse("review:report_export", args=[audit.pk, "json"])).json()
    assert report["active_time"] == {
        "median_seconds": 20,
        "by_inspector": {inspector.username: {"ratings_timed": 3, "median_seconds": 20}},
        "guideline_versions": ["audit.v1"],
    }


def test_the_question_export_carries_who_reviewed_it_for_how_long_under_which_rules(annotator, administrator):
    guidelines.publish(kind="ocr_review", text="rules", by=administrator)
    make_question()
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    held.count_active_time(42)
    held.complete()
    (question,) = question_export.streamed(Question.objects.filter(pk=held.question_id))
    work = question_export.studio_record(question, [])["work"]
    assert work == [{"task": "ocr_review", "by": "alice", "done": held.done_at.isoformat(), "active_seconds": 42,
                     "guideline_version": "ocr_review.v1"}]  # fmt: skip


def test_step_correction_records_its_time_and_rules_on_submit(annotator, administrator, login):
    guidelines.publish(kind="step_correction", text="one idea per step", by=administrator)
    Question.objects.filter(pk=make_question().pk).update(status=Question.Status.OCR_REVIEWED)
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.STEP_CORRECTION)
    client = login(annotator)
    url = reverse("annotation:steps", args=[held.pk])
    version = Question.objects.get(pk=held.question_id).version
    client.post(url, {"version": version, "step": ["第一步"], "action": "autosave", "active_seconds": "33"},
                HTTP_HX_REQUEST="true")  # fmt: skip
    version = Question.objects.get(pk=held.question_id).version
    done = client.post(url, {"version": version, "step": ["第一步"], "action": "submit", "active_seconds": "7"})
    assert done.status_code == 302
    held.refresh_from_db()
    assert (held.done_at is not None, held.active_seconds, held.guideline_version) == (True, 40, "step_correction.v1")


def test_the_team_page_shows_where_pebench_stands(annotator, inspector, login):
    labelled, waiting = make_cot(), make_cot()
    make_cot()  # not in PEBench: not counted
    add_to_pebench(labelled, waiting)
    labelling.open_labelling(labelled)
    page = login(inspector).get(reverse("annotation:team")).content.decode()
    assert 'id="overall-pebench"' in page
    assert "New: <strong data-count>1</strong>" in page and "Being labelled: <strong data-count>1</strong>" in page


def test_an_ocr_review_save_that_lost_or_was_invalid_counts_no_time(annotator, login):
    make_question()
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    client = login(annotator)
    url = reverse("annotation:review", args=[held.pk])
    question = Question.objects.get(pk=held.question_id)
    saved = client.post(url, review_post(question, text="改过", active_seconds="25"), HTTP_HX_REQUEST="true")
    assert saved.status_code == 200
    stale = review_post(question, text="另一个版本", active_seconds="25")  # the version the page had: now stale
    assert client.post(url, stale, HTTP_HX_REQUEST="true").status_code == 409
    invalid = client.post(url, review_post(Question.objects.get(pk=held.question_id), options="nonsense",
                                           active_seconds="25"), HTTP_HX_REQUEST="true")  # fmt: skip
    assert invalid.status_code == 422  # refused, so the page gives the seconds back to send with the next save
    held.refresh_from_db()
    assert held.active_seconds == 25


def test_a_step_correction_save_that_lost_counts_no_time(annotator, login):
    Question.objects.filter(pk=make_question().pk).update(status=Question.Status.OCR_REVIEWED)
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.STEP_CORRECTION)
    client = login(annotator)
    url = reverse("annotation:steps", args=[held.pk])
    version = Question.objects.get(pk=held.question_id).version
    first = {"version": version, "step": ["第一步"], "action": "autosave", "active_seconds": "25"}
    assert client.post(url, first, HTTP_HX_REQUEST="true").status_code == 200
    stale = {**first, "step": ["另一步"]}
    assert client.post(url, stale, HTTP_HX_REQUEST="true").status_code == 409
    empty = {**first, "version": version + 1, "step": [" "]}
    assert client.post(url, empty, HTTP_HX_REQUEST="true").status_code == 422
    held.refresh_from_db()
    assert held.active_seconds == 25
