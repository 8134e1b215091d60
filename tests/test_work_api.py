"""The annotator's work through the API with a token (issue 29): claim within the queue's filters, read, save
against a version (409 when someone saved first, nothing written), accept, reject with a reason; only annotators,
and only their own assignments; a hostile body is a 400, never a 5xx."""

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Assignment, Question, QuestionEdit, StepProposal
from tests.review_factories import bulk_questions

pytestmark = pytest.mark.django_db


def client_of(person) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=person).key}")
    return api


@pytest.fixture
def imported():
    return bulk_questions(1, subjects=["math", "physics"], status=Question.Status.IMPORTED)


def test_an_annotator_claims_within_filters_edits_meets_a_conflict_and_accepts(annotator, other_annotator, imported):
    api = client_of(annotator)
    claimed = api.post("/api/work/claim/", {"task": "ocr_review", "subject": "physics"}, format="json")
    assert claimed.status_code == 200, claimed.content
    work = claimed.json()
    physics = Question.objects.get(subject="physics")
    assert work["question"]["hash_id"] == physics.hash_id and work["task"] == "ocr_review"
    assert Assignment.objects.get(pk=work["id"]).annotator == annotator
    # Claiming again gives back the question held, not a second one.
    assert api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").json()["id"] == work["id"]
    assert api.get(f"/api/work/{work['id']}/").json()["question"]["version"] == physics.version
    assert [row["id"] for row in api.get("/api/work/").json()] == [work["id"]]

    version = work["question"]["version"]
    saved = api.post(f"/api/work/{work['id']}/save/", {"version": version, "changes": {"text": "更正后的题干"}},
                     format="json")  # fmt: skip
    assert saved.status_code == 200, saved.content
    assert saved.json()["question"]["version"] == version + 1
    assert QuestionEdit.objects.filter(question=physics, field="text", user=annotator, note="ocr review").exists()

    # A save from the version read before: 409 with what changed, and nothing written.
    stale = api.post(f"/api/work/{work['id']}/save/", {"version": version, "changes": {"text": "另一个"}},
                     format="json")  # fmt: skip
    assert stale.status_code == 409
    assert stale.json()["version"] == version + 1 and stale.json()["changed"]["text"]["after"] == "更正后的题干"
    physics.refresh_from_db()
    assert physics.text == "更正后的题干"

    accepted = api.post(f"/api/work/{work['id']}/accept/", {"version": version + 1}, format="json")
    assert accepted.status_code == 200, accepted.content
    physics.refresh_from_db()
    assert physics.status == Question.Status.OCR_REVIEWED and accepted.json()["done"] is True
    assert Assignment.objects.get(pk=work["id"]).done_at is not None
    # Closed: no longer the caller's to read or save; and nobody else's to begin with.
    assert api.get(f"/api/work/{work['id']}/").status_code == 404
    math = api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").json()
    assert client_of(other_annotator).get(f"/api/work/{math['id']}/").status_code == 404


def test_a_step_correction_submits_the_proposal_or_the_steps_given_and_a_reject_needs_a_reason(annotator, imported):
    first, second = imported
    Question.objects.filter(pk__in=[first.pk, second.pk]).update(status=Question.Status.OCR_REVIEWED,
                                                                  solution_steps=[])  # fmt: skip
    services.add_step_proposal(question=first, steps=["第一步", "第二步"])
    api = client_of(annotator)
    work = api.post("/api/work/claim/", {"task": "step_correction"}, format="json").json()
    assert work["question"]["hash_id"] == first.hash_id and work["proposal"] == ["第一步", "第二步"]
    refused = api.post(f"/api/work/{work['id']}/save/", {"version": work["question"]["version"],
                                                         "changes": {"text": "x"}}, format="json")  # fmt: skip
    assert refused.status_code == 400 and "solution_steps" in refused.content.decode()
    accepted = api.post(f"/api/work/{work['id']}/accept/", {"version": work["question"]["version"]}, format="json")
    assert accepted.status_code == 200, accepted.content
    first.refresh_from_db()
    assert first.solution_steps == ["第一步", "第二步"] and first.status == Question.Status.SOLUTION_CORRECTED
    assert first.step_proposals.get().status == StepProposal.Status.USED

    work = api.post("/api/work/claim/", {"task": "step_correction"}, format="json").json()
    assert api.post(f"/api/work/{work['id']}/reject/", {"reason": "  "}, format="json").status_code == 400
    rejected = api.post(f"/api/work/{work['id']}/reject/", {"reason": "题目不完整"}, format="json")
    assert rejected.status_code == 200, rejected.content
    second.refresh_from_db()
    assert second.status == Question.Status.REJECTED and second.reject_reason == "题目不完整"
    assert api.post("/api/work/claim/", {"task": "step_correction"}, format="json").status_code == 204


def test_other_roles_are_refused(inspector, researcher, imported):
    for person in (inspector, researcher):
        api = client_of(person)
        assert api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").status_code == 403
        assert api.get("/api/work/").status_code == 403
    assert not Assignment.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"task": "ocr_review", "zz": 1},
        {"task": "nonsense"},
        {"task": ["ocr_review"]},
        {"task": "ocr_review", "document": 99999},
        {"task": "ocr_review", "document": "x"},
        [1, 2],
        "just text",
    ],
)
def test_a_hostile_claim_is_a_400(annotator, imported, body):
    response = client_of(annotator).post("/api/work/claim/", body, format="json")
    assert response.status_code == 400, response.content
    assert not Assignment.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"version": "x"},
        {"version": -1},
        {"version": 1, "changes": {"grade": 99}},
        {"version": 1, "changes": {"status": "released"}},
        {"version": 1, "changes": {"options": [{"label": "A"}]}},
        {"version": 1, "changes": {"text": None}},
        {"version": 1, "changes": "text"},
        {"version": 1, "changes": {"answers": "A", "knowledge_points": {"a": 1}}},
        {"version": 10**30},
    ],
)
def test_a_hostile_save_is_a_400_or_a_conflict_and_writes_nothing(annotator, imported, body):
    api = client_of(annotator)
    work = api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").json()
    before = Question.objects.get(hash_id=work["question"]["hash_id"])
    response = api.post(f"/api/work/{work['id']}/save/", body, format="json")
    assert response.status_code in (400, 409), response.content
    after = Question.objects.get(pk=before.pk)
    assert (after.version, after.text, after.status) == (before.version, before.text, before.status)


def test_an_absurd_active_time_is_refused_by_name(annotator, imported):
    api = client_of(annotator)
    work = api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").json()
    body = {"version": work["question"]["version"], "active_seconds": 10**15}
    response = api.post(f"/api/work/{work['id']}/save/", body, format="json")
    assert response.status_code == 400 and "active_seconds" in response.json()


def test_a_conflict_is_worded_in_the_readers_language(annotator, imported):
    api = client_of(annotator)
    work = api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").json()
    version = work["question"]["version"]
    api.post(f"/api/work/{work['id']}/save/", {"version": version, "changes": {"text": "甲"}}, format="json")
    stale = {"version": version, "changes": {"text": "乙"}}
    response = api.post(f"/api/work/{work['id']}/save/", stale, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 409 and "已有人保存过它" in response.json()["detail"]
    # Accepting from the stale version is refused the same way, and the question stays where it was.
    response = api.post(f"/api/work/{work['id']}/accept/", {"version": version}, format="json")
    assert response.status_code == 409 and response.json()["changed"]["text"]["after"] == "甲"
    assert Question.objects.get(hash_id=work["question"]["hash_id"]).status == Question.Status.IMPORTED
