"""Audits decide: an accepted lot moves to audited (its failed samples go to
rework first), a rejected lot goes back for rework as a whole and is audited again."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Assignment, Question, QuestionEdit
from review import decisions, services
from review.models import LotDecision
from tests.review_factories import audit_of, bulk_questions, rate_everything, three_inspectors

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _english(english):
    """Audit refusals are written in the reader's language; these tests read them in English."""


@pytest.fixture
def lot(inspector, annotator):
    """One lot of 30 math questions under a plan: n=8, Ac 1, Re 2."""
    questions = bulk_questions(30, subjects=["math"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=None, aql=6.5)
    return audit, questions


def test_an_accepted_lot_moves_to_audited_and_the_history_names_the_audit(lot, inspector):
    audit, questions = lot
    rate_everything(audit)
    [decision] = decisions.apply_decision(audit=audit, by=inspector)
    assert (decision.decision, decision.moved) == ("accept", 30)
    assert Question.objects.filter(status="audited").count() == 30
    edit = QuestionEdit.objects.get(question=questions[0], field="status", new="audited")
    assert f"audit #{audit.pk}" in edit.note and edit.user == inspector
    # Applying again moves nothing and records nothing more.
    decisions.apply_decision(audit=audit, by=inspector)
    assert QuestionEdit.objects.filter(field="status", new="audited").count() == 30


def test_a_failed_sample_of_an_accepted_lot_goes_to_rework_first(lot, inspector, annotator):
    audit, _questions = lot
    failed = audit.items.order_by("position").first()
    rate_everything(audit, fail_items={failed.pk}, fail=("solution",))
    [decision] = decisions.apply_decision(audit=audit, by=inspector)
    assert decision.decision == "accept" and decision.reworked == 1 and decision.moved == 29
    assert Question.objects.get(pk=failed.question_id).status == "ocr_reviewed"
    assert Assignment.objects.open().get(question_id=failed.question_id).annotator == annotator


def test_a_rejected_lot_goes_back_as_a_whole_and_is_audited_again(lot, inspector, annotator):
    audit, questions = lot
    first_two = set(audit.items.order_by("position").values_list("pk", flat=True)[:2])
    rate_everything(audit, fail_items=first_two, fail=("solution",))
    [decision] = decisions.apply_decision(audit=audit, by=inspector)
    assert (decision.decision, decision.reworked) == ("reject", 30)
    assert not Question.objects.filter(status="audited").exists()
    assert Question.objects.filter(status="ocr_reviewed").count() == 30
    with pytest.raises(services.AuditError, match="still being reworked"):
        decisions.reaudit_lot(lot=decision, by=inspector)
    Question.objects.update(status="solution_corrected")  # the annotators' rework, done
    again = decisions.reaudit_lot(lot=decision, by=inspector)
    assert again.population_count == 30 and again.aql == audit.aql
    rate_everything(again)
    decisions.apply_decision(audit=again, by=inspector)
    assert Question.objects.filter(status="audited").count() == 30


def test_an_audit_still_being_rated_decides_nothing(lot, inspector):
    audit, _questions = lot
    assert decisions.apply_decision(audit=audit, by=inspector) == []
    assert not LotDecision.objects.exists()


def test_the_inspector_applies_the_decision_from_the_audit_page(lot, inspector, login):
    audit, _questions = lot
    rate_everything(audit)
    response = login(inspector).post(reverse("review:audit_decide", args=[audit.pk]))
    assert response.status_code == 302
    assert Question.objects.filter(status="audited").count() == 30
    page = login(inspector).get(reverse("review:audit", args=[audit.pk])).content.decode()
    assert 'id="lot-decisions"' in page and 'data-decision="accept"' in page


def test_the_api_and_the_command_apply_it_too(lot, inspector, researcher, client):
    audit, _questions = lot
    rate_everything(audit)
    client.force_login(researcher)
    assert client.post(reverse("review_api:audit_decide", args=[audit.pk])).status_code == 403
    client.force_login(inspector)
    body = client.post(reverse("review_api:audit_decide", args=[audit.pk])).json()
    assert body["lots"][0]["decision"] == "accept" and body["lots"][0]["moved"] == 30
    call_command("apply_audit_decision", str(audit.pk), "--by", inspector.username)
    assert Question.objects.filter(status="audited").count() == 30


def test_a_release_records_the_audit_that_moved_its_questions(lot, inspector, researcher, settings, tmp_path):
    from annotation import releases
    from annotation.models import CandidateSet
    from k12vista.jobs import execute_job

    settings.MEDIA_ROOT = tmp_path
    audit, questions = lot
    rate_everything(audit)
    decisions.apply_decision(audit=audit, by=inspector)
    candidate = CandidateSet.objects.create(name="all", seed=1, bank_fingerprint="x")
    candidate.questions.set(questions)
    release = releases.start_release(candidate_set=candidate, by=researcher)
    execute_job(release.job_id)
    release.refresh_from_db()
    [summary] = release.summary["audits"]
    assert summary["id"] == audit.pk and summary["decision"] == "accept"
    assert summary["rates"]["all"]["value"] == 1.0 and summary["rates"]["all"]["ci95"][0] < 1.0
    assert f"audit #{audit.pk}" in release.items.first().provenance["audits"][0]


def test_an_inspector_audits_a_candidate_set_from_the_form(inspector, annotator, login):
    from annotation.models import CandidateSet

    questions = bulk_questions(12, subjects=["math"], worker=annotator)
    bulk_questions(5, subjects=["math"], worker=annotator)  # in the bank, not in the set
    candidate = CandidateSet.objects.create(name="draw", seed=1, bank_fingerprint="x")
    candidate.questions.set(questions)
    client = login(inspector)
    form = client.get(reverse("review:audit_create"), {"population": "candidate_set", "candidate_set": candidate.pk})
    assert f'<option value="{candidate.pk}" selected>' in form.content.decode()
    response = client.post(reverse("review:audit_create"), {
        "name": "set audit", "population": "candidate_set", "candidate_set": candidate.pk, "strata": ["subject"],
        "size_rule": "plan", "aql": "6.5", "inspectors": [inspector.pk], "inspectors_per_item": 1,
    })  # fmt: skip
    assert response.status_code == 302
    from review.models import Audit

    audit = Audit.objects.get(name="set audit")
    assert audit.population == {"kind": "candidate_set", "candidate_set": candidate.pk}
    assert audit.population_count == 12
    rate_everything(audit)
    decisions.apply_decision(audit=audit, by=inspector)
    assert set(Question.objects.filter(status="audited").values_list("pk", flat=True)) == {q.pk for q in questions}


def test_an_audit_without_a_plan_decides_nothing(inspector, annotator):
    bulk_questions(5, subjects=["math"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=2)
    rate_everything(audit)
    with pytest.raises(services.AuditError, match="no sampling plan"):
        decisions.apply_decision(audit=audit, by=inspector)
    assert not Question.objects.filter(status="audited").exists()


def test_an_inspector_decides_each_lot_of_an_audit_without_a_plan(inspector, annotator):
    bulk_questions(5, subjects=["math", "physics"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=2)
    with pytest.raises(services.AuditError, match="still being rated"):
        decisions.decide_lot(audit=audit, stratum="math", decision="accept", by=inspector)
    rate_everything(audit)
    accepted = decisions.decide_lot(audit=audit, stratum="math", decision="accept", by=inspector)
    rejected = decisions.decide_lot(audit=audit, stratum="physics", decision="reject", by=inspector)
    assert (accepted.moved, accepted.reworked, rejected.moved, rejected.reworked) == (5, 0, 0, 5)
    assert Question.objects.filter(subject="math", status="audited").count() == 5
    physics = Question.objects.filter(subject="physics")
    assert Assignment.objects.open().filter(question__in=physics, annotator=annotator).count() == 5
    assert decisions.left_behind(accepted) == {} and decisions.left_behind(rejected) == {}


def test_a_decision_on_imported_questions_says_what_it_left_where_it_was(inspector):
    bulk_questions(30, subjects=["math"], status=Question.Status.IMPORTED)
    imported = {"kind": "status", "status": "imported"}
    audit = audit_of(imported, inspectors=three_inspectors(inspector), per_stratum=None, aql=6.5)
    first_two = set(audit.items.order_by("position").values_list("pk", flat=True)[:2])
    rate_everything(audit, fail_items=first_two, fail=("solution",))
    [decision] = decisions.apply_decision(audit=audit, by=inspector)
    assert (decision.decision, decision.moved, decision.reworked) == ("reject", 0, 0)
    assert decisions.left_behind(decision) == {"imported": 30}
