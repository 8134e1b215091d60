"""The guideline version a piece of work was done under is visible where the work is shown (issue 25): beside
the guideline panel of the OCR review and step pages, on the adjudication table's label cells (only the labels
the blind rule already shows), and on the audit item's rating rows with the viewer's own active time."""

import pytest
from django.urls import reverse

from annotation import queues
from annotation.models import Assignment, Question
from k12vista import guidelines
from pem import labelling
from review.models import Rating
from tests.annotation_factories import make_question
from tests.pem_factories import add_to_pebench, label_steps, make_cot
from tests.review_factories import audit_of, bulk_questions, three_inspectors

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]


def test_the_ocr_review_and_step_pages_show_the_version_of_their_rules(annotator, administrator, login):
    guidelines.publish(kind="ocr_review", text="read every line", by=administrator)
    guidelines.publish(kind="step_correction", text="one idea per step", by=administrator)
    guidelines.publish(kind="step_correction", text="one idea per step, numbered", by=administrator)
    make_question()
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    client = login(annotator)
    page = client.get(reverse("annotation:review", args=[held.pk])).content.decode()
    assert 'data-guideline-version="ocr_review.v1"' in page
    Question.objects.filter(pk=make_question().pk).update(status=Question.Status.OCR_REVIEWED)
    steps = queues.next_assignment(annotator=annotator, task=Assignment.Task.STEP_CORRECTION)
    page = client.get(reverse("annotation:steps", args=[steps.pk])).content.decode()
    assert 'data-guideline-version="step_correction.v2"' in page


def test_the_adjudication_table_shows_each_labels_guideline_version(annotator, other_annotator, inspector,
                                                                   administrator, login):  # fmt: skip
    guidelines.publish(kind="step_labels", text="label each step", by=administrator)
    cot = make_cot()
    labelling.open_labelling(cot)
    for person, label in ((annotator, "CS"), (other_annotator, "CE")):
        task = labelling.next_task(person)
        form = {"version": task.version, "action": "submit", "active_seconds": "20", "label-1": "CS", "label-2": label,
                "reason-2": "wrong", "label-3": "CS"}  # fmt: skip
        assert login(person).post(reverse("pem:label_task", args=[task.pk]), form).status_code == 302
    page = login(inspector).get(reverse("pem:adjudicate", args=[cot.pk])).content.decode()
    cells = page.count('<div class="muted" data-guideline-version="guideline.v1">under guideline guideline.v1</div>')
    assert cells == 6  # two people, three steps each (the step-label guideline's versions are guideline.vN)


def test_the_audit_item_shows_each_ratings_version_and_the_viewers_own_time(inspector, administrator, login):
    guidelines.publish(kind="audit", text="criteria", by=administrator)
    Question.objects.filter(pk=make_question(subject="math").pk).update(status=Question.Status.SOLUTION_CORRECTED)
    bulk_questions(2, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    rating = Rating.objects.filter(item__audit=audit, inspector=inspector).first()
    form = {"question": "pass", "answer": "pass", "solution": "pass", "active_seconds": "95"}
    client = login(inspector)
    assert client.post(reverse("review:rate", args=[rating.item_id]), form).status_code == 302
    page = client.get(reverse("review:item", args=[rating.item_id])).content.decode()
    assert 'data-guideline-version="audit.v1"' in page
    assert 'data-active-seconds="95">1:35<' in page


def test_a_chain_audit_shows_the_guideline_version_of_each_label(inspector, login):
    cot = make_cot()
    label_steps(cot, ["CS", "CE", "CS"], source="gold", rater="gold", guideline_version="guideline.v3")
    add_to_pebench(cot)
    audit = audit_of({"kind": "pebench"}, inspectors=three_inspectors(inspector), per_stratum=5)
    rating = Rating.objects.get(item__audit=audit, inspector=inspector)
    page = login(inspector).get(reverse("review:rate", args=[rating.item_id])).content.decode()
    assert page.count('data-guideline-version="guideline.v3">· under guideline guideline.v3</span>') == 3
