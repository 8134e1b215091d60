"""The rework loop: a failed item goes back to the stage that produced it, to its
annotator with the inspector's note; after the rework it is audited again and
the history shows every round."""

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation import services as bank
from annotation.models import Assignment, Question
from pem import labelling
from pem.models import LabellingTask
from review import reports, services
from review.models import AuditItem, Rating, Rework
from tests.pem_factories import add_to_pebench, make_cot
from tests.review_factories import audit_of, bulk_questions, rate, rate_everything, three_inspectors

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_item(inspector, annotator):
    bulk_questions(3, subjects=["math"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    item = audit.items.order_by("position").first()
    rate_everything(audit, fail_items={item.pk}, fail=("solution",))
    return item


def finish_rework(assignment: Assignment, annotator) -> None:
    """The annotator corrects the steps and submits them, as the steps screen does."""
    question = assignment.question
    bank.edit_question(question=question, changes={"solution_steps": ["改正后的第一步", "$x=2$"]}, user=annotator,
                       expected_version=question.version)  # fmt: skip
    question.refresh_from_db()
    bank.submit_steps(question=question, user=annotator)
    assignment.complete()


def test_a_failed_question_returns_to_its_annotator_with_the_note(failed_item, inspector, annotator):
    rework = services.send_for_rework(item=failed_item, stage="step_correction", note="第二步缺少推导", by=inspector)
    assert rework.annotator == annotator
    question = Question.objects.get(pk=failed_item.question_id)
    assert question.status == Question.Status.OCR_REVIEWED
    assignment = Assignment.objects.open().get(question=question)
    assert (assignment.annotator, assignment.task, assignment.rework_note) == (annotator, "step_correction",
                                                                               "第二步缺少推导")  # fmt: skip
    assert rework.work_ref == assignment.pk
    assert question.edits.filter(field="status", new="ocr_reviewed", note__startswith="rework").exists()


def test_the_annotator_sees_the_note_in_the_queue_and_on_the_work_screen(failed_item, inspector, annotator, login):
    services.send_for_rework(item=failed_item, stage="step_correction", note="第二步缺少推导", by=inspector)
    assignment = Assignment.objects.open().get()
    client = login(annotator)
    queue = client.get(reverse("annotation:queue")).content.decode()
    assert f'data-rework="{assignment.pk}"' in queue and "第二步缺少推导" in queue
    steps = client.get(reverse("annotation:steps", args=[assignment.pk])).content.decode()
    assert 'id="rework-note"' in steps and "第二步缺少推导" in steps


def test_the_item_page_prefills_the_note_and_sends_it_back(failed_item, inspector, login):
    client = login(inspector)
    page = client.get(reverse("review:item", args=[failed_item.pk]))
    assert page.context["form"].initial == {"stage": "step_correction", "note": "参考解析: wrong"}  # by its name
    assert "annotator" not in page.context["form"].fields  # only admins choose someone else
    url = reverse("review:item", args=[failed_item.pk])
    response = client.post(url, {"stage": "step_correction", "note": "再看看"})
    assert response.status_code == 302
    assert Rework.objects.get().note == "再看看"
    again = client.post(reverse("review:item", args=[failed_item.pk]), {"stage": "step_correction", "note": "x"})
    assert again.status_code == 302 and Rework.objects.count() == 1


def test_an_admin_sends_the_rework_to_another_annotator(failed_item, administrator, other_annotator, login):
    client = login(administrator)
    client.post(reverse("review:item", args=[failed_item.pk]),
                {"stage": "step_correction", "note": "换人处理", "annotator": other_annotator.pk})  # fmt: skip
    assert Assignment.objects.open().get().annotator == other_annotator
    assert Rework.objects.get().annotator == other_annotator


def test_it_refuses_to_send_back_what_did_not_fail(failed_item, inspector, english):
    with pytest.raises(services.AuditError, match="did not fail anything this stage produced"):
        services.send_for_rework(item=failed_item, stage="ocr_review", note="x", by=inspector)
    passed = failed_item.audit.items.exclude(pk=failed_item.pk).first()
    with pytest.raises(services.AuditError, match="did not fail"):
        services.send_for_rework(item=passed, stage="step_correction", note="x", by=inspector)
    with pytest.raises(services.AuditError, match="needs a note"):
        services.send_for_rework(item=failed_item, stage="step_correction", note="  ", by=inspector)
    assert not Rework.objects.exists() and not Assignment.objects.open().exists()


def test_the_question_bank_refuses_a_rework_of_a_stage_not_yet_done(annotator, inspector):
    question = bulk_questions(1, subjects=["math"], status=Question.Status.IMPORTED)[0]
    with pytest.raises(bank.LifecycleError, match="has not been through ocr_review"):
        bank.return_for_rework(question=question, task="ocr_review", annotator=annotator, note="x", by=inspector)
    assert not Assignment.objects.exists()


def test_it_re_audits_after_the_rework_and_keeps_the_history(failed_item, inspector, annotator, login, english):
    rework = services.send_for_rework(item=failed_item, stage="step_correction", note="第二步缺少推导", by=inspector)
    with pytest.raises(services.AuditError, match="not finished"):
        services.reaudit(item=failed_item, by=inspector)
    finish_rework(Assignment.objects.get(pk=rework.work_ref), annotator)
    second = services.reaudit(item=failed_item, by=inspector)
    assert (second.round, second.question_id, second.stratum) == (2, failed_item.question_id, failed_item.stratum)
    assert set(second.ratings.values_list("inspector_id", flat=True)) == set(
        failed_item.ratings.values_list("inspector_id", flat=True)
    )
    with pytest.raises(services.AuditError, match="already being audited again"):
        services.reaudit(item=failed_item, by=inspector)
    for rating in second.ratings.select_related("item", "inspector"):
        rate(rating)
    rounds = services.history(second)
    assert [r["item"].round for r in rounds] == [1, 2]
    assert rounds[0]["verdict"]["solution"] is False and rounds[1]["verdict"]["solution"] is True
    assert rounds[0]["reworks"][0]["done"] is True
    summary = reports.build_report(failed_item.audit)
    assert summary["rework"] == {"sent": 1, "reaudited": 1, "passed_after_rework": 1}
    # Round 1 still counts as delivered: the fix does not change the audit's rates.
    math = next(s for s in summary["strata"] if s["stratum"] == "math")
    assert math["rates"]["solution"]["successes"] == 2
    page = login(inspector).get(reverse("review:item", args=[failed_item.pk])).content.decode()
    assert 'data-round="1"' in page and 'data-round="2"' in page and "第二步缺少推导" in page


def test_the_item_page_offers_the_re_audit_once_the_work_is_done(failed_item, inspector, annotator, login):
    rework = services.send_for_rework(item=failed_item, stage="step_correction", note="补全", by=inspector)
    client = login(inspector)
    assert b'id="reaudit-form"' not in client.get(reverse("review:item", args=[failed_item.pk])).content
    refused = client.post(reverse("review:reaudit", args=[failed_item.pk]))
    assert refused.status_code == 302 and not AuditItem.objects.filter(round=2).exists()
    finish_rework(Assignment.objects.get(pk=rework.work_ref), annotator)
    assert b'id="reaudit-form"' in client.get(reverse("review:item", args=[failed_item.pk])).content
    response = client.post(reverse("review:reaudit", args=[failed_item.pk]))
    second = AuditItem.objects.get(round=2)
    assert response["Location"] == reverse("review:item", args=[second.pk])
    assert Rating.objects.filter(item=second, inspector=inspector, submitted=None).exists()  # back in the queue


def test_a_failed_pebench_item_goes_back_to_its_labeller(inspector, annotator, english):
    cot = make_cot()
    add_to_pebench(cot)
    task = LabellingTask.objects.create(cot=cot, annotator=annotator, submitted=timezone.now(),
                                        draft={str(p): {"label": "CS", "reason": ""} for p in (1, 2, 3)})  # fmt: skip
    audit = audit_of({"kind": "pebench"}, inspectors=three_inspectors(inspector), per_stratum=1)
    item = audit.items.get()
    rate_everything(audit, fail_items={item.pk}, fail=("step_labels",))
    rework = services.send_for_rework(item=item, stage="pebench_labelling", note="第二步应为 CE", by=inspector)
    task.refresh_from_db()
    assert task.submitted is None and task.rework_note == "第二步应为 CE" and rework.work_ref == task.pk
    with pytest.raises(services.AuditError, match="not finished"):
        services.reaudit(item=item, by=inspector)
    labelling.submit(task)
    assert services.reaudit(item=item, by=inspector).round == 2
