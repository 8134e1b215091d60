"""An inspector's audit items through the API (issue 29): their own list instead of guessed ids, rework
and re-audit with a token, the same services and access rules as the item page."""

import pytest
from rest_framework.test import APIClient

from annotation.models import Assignment
from review import services
from review.models import Rework
from tests.review_factories import audit_of, bulk_questions, rate_everything, three_inspectors
from tests.test_review_rework import finish_rework

pytestmark = pytest.mark.django_db


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_an_inspector_lists_their_own_items_pending_or_all_and_rates_by_them(inspector, annotator, researcher):
    bulk_questions(3, subjects=["math"], worker=annotator)
    inspectors = three_inspectors(inspector)
    audit = audit_of(inspectors=inspectors, per_stratum=3)
    api = api_for(inspector)
    listed = api.get("/api/inspect/my-items/", {"pending": "true"}).json()["results"]
    mine = set(audit.items.filter(ratings__inspector=inspector).values_list("pk", flat=True))
    assert {row["item"] for row in listed} == mine and len(mine) == 3
    first = listed[0]
    assert first["audit"] == audit.pk and first["rated"] is False and first["name"]
    assert first["dimensions"] == list(services.dimension_names(first["kind"]))
    verdicts = dict.fromkeys(first["dimensions"], True)
    assert api.post(first["rating_url"], {"verdicts": verdicts}, format="json").status_code == 200
    pending = api.get("/api/inspect/my-items/", {"pending": "1", "audit": audit.pk}).json()["results"]
    assert first["item"] not in {row["item"] for row in pending} and len(pending) == 2
    everything = api.get("/api/inspect/my-items/").json()["results"]
    assert [row["rated"] for row in everything if row["item"] == first["item"]] == [True]
    assert api_for(researcher).get("/api/inspect/my-items/").status_code == 403
    assert api.get("/api/inspect/my-items/", {"audit": "x"}).status_code == 400


def test_rework_and_re_audit_through_the_api(inspector, annotator):
    bulk_questions(3, subjects=["math"], worker=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    item = audit.items.order_by("position").first()
    rate_everything(audit, fail_items={item.pk}, fail=("solution",))
    api = api_for(inspector)
    bad = api.post(f"/api/inspect/items/{item.pk}/rework/", {"stage": "ocr_review", "note": "x"}, format="json")
    assert bad.status_code == 400  # not a stage that failed
    chosen = api.post(f"/api/inspect/items/{item.pk}/rework/",
                      {"stage": "step_correction", "note": "第二步缺少推导", "annotator": annotator.username},
                      format="json")  # fmt: skip
    assert chosen.status_code == 400 and "annotator" in chosen.json()  # only an administrator chooses
    sent = api.post(f"/api/inspect/items/{item.pk}/rework/", {"stage": "step_correction", "note": "第二步缺少推导"},
                    format="json")  # fmt: skip
    assert sent.status_code == 201 and sent.json()["annotator"] == annotator.username
    early = api.post(f"/api/inspect/items/{item.pk}/reaudit/")
    assert early.status_code == 400  # the rework is not finished
    finish_rework(Assignment.objects.get(pk=Rework.objects.get().work_ref), annotator)
    again = api.post(f"/api/inspect/items/{item.pk}/reaudit/")
    assert again.status_code == 201 and again.json()["round"] == 2
    listed = api.get("/api/inspect/my-items/", {"pending": "1"}).json()["results"]
    assert again.json()["item"] in {row["item"] for row in listed}
    assert api.post("/api/inspect/lots/999999/reaudit/").status_code == 404
