"""Browser steps that had no API operation (issue 29), each through a token client under the page's own
role rule and the same service as the page: deciding an audit without a sampling plan and closing an audit."""

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from annotation.models import Assignment, Question
from review.models import Audit
from tests.review_factories import audit_of, bulk_questions, rate_everything, three_inspectors

pytestmark = pytest.mark.django_db


def token_client(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")


def post(client: Client, url: str, data=None):
    return client.post(url, data or {}, content_type="application/json")


def test_an_inspector_decides_each_lot_of_an_audit_without_a_plan_through_the_api(
    inspector, annotator, researcher, english
):
    bulk_questions(5, subjects=["math", "physics"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=2)
    url = f"/api/inspect/audits/{audit.pk}/decide/"
    api = token_client(inspector)
    assert post(token_client(researcher), url, {"stratum": "math", "decision": "accept"}).status_code == 403
    early = post(api, url, {"stratum": "math", "decision": "accept"})
    assert early.status_code == 400 and "still being rated" in early.json()["detail"]
    rate_everything(audit)
    assert "colour" in post(api, url, {"stratum": "math", "decision": "accept", "colour": 1}).json()
    assert post(api, url, {"stratum": "math", "decision": "maybe"}).status_code == 400
    assert "no such lot" in post(api, url, {"stratum": "chemistry", "decision": "accept"}).json()["detail"]
    accepted = post(api, url, {"stratum": "math", "decision": "accept"})
    assert accepted.status_code == 200
    [lot] = accepted.json()["lots"]
    assert (lot["stratum"], lot["decision"], lot["moved"], lot["left_behind"]) == ("math", "accept", 5, {})
    assert Question.objects.filter(subject="math", status="audited").count() == 5
    turned = post(api, url, {"stratum": "math", "decision": "reject"})
    assert turned.status_code == 409 and "already decided" in turned.json()["detail"]
    assert not Assignment.objects.filter(question__subject="math").open().exists()
    rejected = post(api, url, {"stratum": "physics", "decision": "reject"}).json()["lots"][0]
    assert (rejected["decision"], rejected["reworked"]) == ("reject", 5)


def test_a_plan_audit_decides_with_no_body_and_refuses_a_lot_named(inspector, annotator, english):
    bulk_questions(30, subjects=["math"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=None, aql=6.5)
    rate_everything(audit)
    api = token_client(inspector)
    url = f"/api/inspect/audits/{audit.pk}/decide/"
    named = post(api, url, {"stratum": "math", "decision": "reject"})
    assert named.status_code == 400 and "sampling plan decides" in named.json()["detail"]
    [lot] = post(api, url).json()["lots"]
    assert (lot["decision"], lot["moved"]) == ("accept", 30)


def test_closing_an_audit_through_the_api(inspector, annotator, researcher):
    bulk_questions(3, subjects=["math"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    url = f"/api/inspect/audits/{audit.pk}/close/"
    assert post(token_client(researcher), url).status_code == 403
    assert post(token_client(inspector), "/api/inspect/audits/999999/close/").status_code == 404
    closed = post(token_client(inspector), url)
    assert closed.status_code == 200 and closed.json()["closed"]
    first = Audit.objects.get(pk=audit.pk).closed
    assert first is not None
    again = post(token_client(inspector), url)
    assert again.status_code == 200 and Audit.objects.get(pk=audit.pk).closed == first
    listed = token_client(inspector).get("/api/inspect/my-items/", {"pending": "1"}).json()["results"]
    assert listed == []  # a closed audit's ratings have ended
