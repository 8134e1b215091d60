"""Guidelines beside each task: an administrator edits them (every edit a new version), each task page
shows its own, and every label, rating and review records the version it was made under."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import queues
from annotation.models import Assignment, Question
from k12vista import guidelines
from k12vista.models import Guideline
from pem import labelling
from pem.export import streamed, studio_record
from pem.models import ChainOfThought, StepLabel
from review.models import Rating
from tests.annotation_factories import make_question
from tests.pem_factories import add_to_pebench, make_cot
from tests.review_factories import audit_of, bulk_questions, rate, three_inspectors

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]

ALL_CORRECT = {"1": {"label": "CS"}, "2": {"label": "CS"}, "3": {"label": "CS"}}
URL = "/manage/guidelines/"


def test_an_administrator_saves_each_edit_as_a_new_version(administrator, login):
    client = login(administrator)
    assert client.get(URL).status_code == 200
    client.post(URL, {"kind": "step_labels", "text": "Label each step on its own."})
    client.post(URL, {"kind": "step_labels", "text": "Label each step on its own.\r\n"})  # the same text: no version
    client.post(URL, {"kind": "step_labels", "text": "Label each step on its own. A slip is CE."})
    versions = list(Guideline.objects.of_kind("step_labels").values_list("version", "text", "updated_by"))
    assert versions == [
        (2, "Label each step on its own. A slip is CE.", administrator.pk),
        (1, "Label each step on its own.", administrator.pk),
    ]
    assert guidelines.current_version_name("step_labels") == "guideline.v2"
    page = client.get(URL).content.decode()
    assert "guideline.v2" in page and "A slip is CE." in page


def test_only_administrators_edit_and_bad_input_is_refused(annotator, inspector, administrator, login):
    for person in (annotator, inspector):
        assert login(person).post(URL, {"kind": "audit", "text": "x"}).status_code == 403
    client = login(administrator)
    for data in ({"kind": "nonsense", "text": "x"}, {"kind": "audit", "text": ""},
                 {"kind": "audit", "text": "x" * 20001}, {"kind": "audit", "text": "a\x00b"}):  # fmt: skip
        assert client.post(URL, data).status_code == 400
    assert not Guideline.objects.exists()


def test_the_labelling_page_shows_the_guideline_and_the_labels_keep_its_version(annotator, administrator, login):
    guidelines.publish(kind="step_labels", text="First version.", by=administrator)
    guidelines.publish(kind="step_labels", text="PANEL TEXT: a wrong formula is KAE.", by=administrator)
    cot = make_cot()
    add_to_pebench(cot)
    labelling.open_labelling(cot)
    task = labelling.next_task(annotator)
    client = login(annotator)
    page = client.get(reverse("pem:label_task", args=[task.pk])).content.decode()
    assert 'data-guideline="step_labels"' in page and "PANEL TEXT: a wrong formula is KAE." in page
    assert "guideline.v2" in page
    labelling.submit(labelling.save_draft(task=task, draft=ALL_CORRECT, expected_version=task.version))
    guidelines.publish(kind="step_labels", text="A later version.", by=administrator)
    assert set(StepLabel.objects.filter(step__cot=cot).values_list("guideline_version", flat=True)) == {"guideline.v2"}
    page = client.get(reverse("pem:label_task", args=[task.pk])).content.decode()
    assert '<span id="label-guideline-version">guideline.v2</span>' in page
    api = APIClient()
    api.force_authenticate(annotator)
    labels = api.get(reverse("pem_api:item_labels", args=[cot.pk])).json()
    assert {label["guideline_version"] for label in labels} == {"guideline.v2"}
    assert api.get(reverse("pem_api:task", args=[task.pk])).json()["guideline_version"] == "guideline.v2"
    record = studio_record(next(streamed(ChainOfThought.objects.filter(pk=cot.pk))))
    assert record["steps"][0]["labels"][0]["guideline_version"] == "guideline.v2"


def test_without_a_written_guideline_labels_keep_the_configured_version(annotator, settings):
    settings.PEM_GUIDELINE_VERSION = "guideline.v9"
    cot = make_cot()
    labelling.open_labelling(cot)
    task = labelling.next_task(annotator)
    labelling.submit(labelling.save_draft(task=task, draft=ALL_CORRECT, expected_version=task.version))
    assert set(StepLabel.objects.filter(step__cot=cot).values_list("guideline_version", flat=True)) == {"guideline.v9"}


def test_ocr_review_and_step_correction_show_their_rules_and_record_the_version(annotator, administrator, login):
    guidelines.publish(kind="ocr_review", text="OCR RULE: keep the exam's numbering.", by=administrator)
    guidelines.publish(kind="step_correction", text="STEP RULE: one idea per step.", by=administrator)
    make_question()
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    page = login(annotator).get(reverse("annotation:review", args=[held.pk])).content.decode()
    assert 'data-guideline="ocr_review"' in page and "OCR RULE: keep the exam&#x27;s numbering." in page
    assert "STEP RULE" not in page
    held.complete()
    held.refresh_from_db()
    assert held.guideline_version == "ocr_review.v1"
    Question.objects.filter(pk=held.question_id).update(status=Question.Status.OCR_REVIEWED)
    steps = queues.next_assignment(annotator=annotator, task=Assignment.Task.STEP_CORRECTION)
    page = login(annotator).get(reverse("annotation:steps", args=[steps.pk])).content.decode()
    assert 'data-guideline="step_correction"' in page and "STEP RULE: one idea per step." in page


def test_the_rating_page_shows_the_audit_criteria_and_the_rating_keeps_the_version(inspector, administrator, login):
    guidelines.publish(kind="audit", text="AUDIT CRITERIA: an answer must match the key.", by=administrator)
    Question.objects.filter(pk=make_question(subject="math").pk).update(status=Question.Status.SOLUTION_CORRECTED)
    bulk_questions(2, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    rating = Rating.objects.filter(item__audit=audit, inspector=inspector).first()
    page = login(inspector).get(reverse("review:rate", args=[rating.item_id])).content.decode()
    assert 'data-guideline="audit"' in page and "AUDIT CRITERIA: an answer must match the key." in page
    rate(rating)
    assert Rating.objects.get(pk=rating.pk).guideline_version == "audit.v1"
