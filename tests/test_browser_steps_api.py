"""Browser steps that had no API operation (issue 29), each through a token client under the page's own
role rule and the same service as the page: deciding an audit without a sampling plan and closing an audit,
PEBench adjudication and expert scores, editing and switching off an endpoint, retrying a campaign and
restarting a judge panel."""

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from annotation.models import Assignment, Question
from inference import campaigns
from inference.models import Judgment, ModelEndpoint
from k12vista.roles import Role
from pem import panel
from pem.models import ExpertScore, StepLabel
from review.models import Audit
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.job_runs import run_with_parts
from tests.review_factories import audit_of, bulk_questions, rate_everything, three_inspectors
from tests.test_campaigns import ANSWER, make_endpoint, run_all, scripted_models, sent  # noqa: F401 - fixtures
from tests.test_pem_adjudication import disputed  # noqa: F401 - a fixture
from tests.test_pem_labelling import scored_run
from tests.test_pem_panel import answered_run, judges  # noqa: F401 - a fixture

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


# --- PEBench adjudication and expert scores (pem/adjudication_api.py) ------------------------------


def test_an_inspector_decides_a_disagreement_through_the_api(disputed, inspector, annotator, english):
    api = token_client(inspector)
    assert token_client(annotator).get("/api/pem/adjudication/").status_code == 403
    queue = api.get("/api/pem/adjudication/", {"subject": "math"}).json()
    assert [(row["id"], row["steps"], row["may_decide"]) for row in queue] == [(disputed.pk, 3, True)]
    assert api.get("/api/pem/adjudication/", {"subject": "physics"}).json() == []
    url = f"/api/pem/adjudication/{disputed.pk}/"
    shown = api.get(url).json()
    assert shown["status"] == "adjudication" and [s["position"] for s in shown["item"]["steps"]] == [1, 2, 3]
    assert {label["rater"] for label in shown["labels"]} >= {annotator.username, "judge-a"}
    incomplete = post(api, url, {"gold": {"1": {"label": "CS"}, "2": {"label": "KAE"}}})
    assert incomplete.status_code == 400 and set(incomplete.json()["problems"]) == {"2", "3"}
    assert "verdict" in post(api, url, {"gold": {}, "verdict": "x"}).json()
    gold = {"1": {"label": "CS"}, "2": {"label": "CE", "reason": "3+4=7"}, "3": {"label": "CS"}}
    decided = post(api, url, {"gold": gold, "note": "checked"})
    assert decided.status_code == 200 and decided.json()["decided_by"] == inspector.username
    assert decided.json()["status"] == "gold"
    assert list(StepLabel.objects.gold().order_by("step__position").values_list("label", flat=True)) == [
        "CS", "CE", "CS"
    ]  # fmt: skip
    again = post(api, url, {"gold": gold})
    assert again.status_code == 400 and "not waiting for adjudication" in again.json()["detail"]
    assert api.get("/api/pem/adjudication/").json() == []


def test_an_expert_scores_a_runs_sample_through_the_api(inspector, researcher, annotator):
    run, responses = scored_run(3)
    api = token_client(inspector)
    assert token_client(annotator).get(f"/api/pem/expert/runs/{run.pk}/").status_code == 403
    sample = api.get(f"/api/pem/expert/runs/{run.pk}/", {"n": 2}).json()
    assert len(sample) == 2 and all(row["score"] is None for row in sample)
    assert api.get(f"/api/pem/expert/runs/{run.pk}/", {"n": 0}).status_code == 400
    target = sample[0]["response"]
    saved = post(api, sample[0]["score_url"], {"score": 0.75, "note": "mostly"})
    assert saved.status_code == 200 and saved.json()["score"] == 0.75
    assert ExpertScore.objects.get(response_id=target, expert=inspector).score == 0.75
    assert post(api, sample[0]["score_url"], {"score": 1.5}).status_code == 400
    assert "mark" in post(api, sample[0]["score_url"], {"score": 1, "mark": 2}).json()
    assert api.get(f"/api/pem/expert/runs/{run.pk}/", {"n": 2}).json()[0]["score"]["score"] == 0.75
    # A researcher scores only the answers of their own runs, as on the page.
    assert post(token_client(researcher), sample[0]["score_url"], {"score": 0}).status_code == 404


# --- endpoints and campaigns (inference/endpoint_api.py, inference/campaign_api.py) -----------------


def test_an_endpoint_is_edited_and_switched_off_through_the_api(researcher, annotator):
    api = token_client(researcher)
    made = post(api, "/api/endpoints/", {"name": "qwen", "base_url": "http://127.0.0.1:8000/v1", "model_name": "q"})
    url = f"/api/endpoints/{made.json()['id']}/"
    assert token_client(annotator).get(url).status_code == 403
    assert api.get(url).json()["name"] == "qwen"

    def patch(data):
        return api.patch(url, data, content_type="application/json")

    edited = patch({"max_concurrency": 3, "model_name": "qwen-vl"})
    assert edited.status_code == 200
    assert (edited.json()["max_concurrency"], edited.json()["model_name"]) == (3, "qwen-vl")
    outside = patch({"base_url": "http://10.0.0.5:8000/v1"})
    assert outside.status_code == 400 and "MODEL_URL_ALLOWLIST" in outside.json()["base_url"][0]
    assert "colour" in patch({"colour": "red"}).json()
    assert "base_url" in patch({"kind": "vllm_offline"}).json()  # an engine has no base URL
    endpoint = ModelEndpoint.objects.get()
    assert (endpoint.base_url, endpoint.kind, endpoint.max_concurrency) == ("http://127.0.0.1:8000/v1", "openai", 3)
    off = post(api, f"{url}deactivate/")
    assert off.status_code == 200 and off.json()["active"] is False
    assert ModelEndpoint.objects.get().active is False
    assert patch({"active": True}).json()["active"] is True


def test_a_campaign_asks_its_failed_questions_again_through_the_api(
    scripted_models, researcher, sent, annotator, settings
):
    settings.MODEL_CALL_RETRIES = 0
    script = {"flaky": [400]}
    url = scripted_models({"flaky": lambda body: (script["flaky"].pop(0), "x") if script["flaky"] else (200, ANSWER)})
    make_question()
    campaign = campaigns.start_campaign(name="c", endpoints=[make_endpoint("flaky", url)], mode="direct",
                                        filters={}, user=researcher)  # fmt: skip
    retry = f"/api/campaigns/{campaign.pk}/retry/"
    assert post(token_client(researcher), retry).status_code == 400  # still running
    run_all(campaign)
    assert campaigns.summary(campaign).failed == 1
    assert post(token_client(annotator), retry).status_code == 403
    retried = post(token_client(researcher), retry)
    assert retried.status_code == 202 and retried.json()["restarted"] == 1 and retried.json()["job"]["id"]
    run_all(campaign)
    assert (campaigns.summary(campaign).ok, campaigns.summary(campaign).failed) == (1, 0)
    nothing = post(token_client(researcher), retry)
    assert nothing.status_code == 200 and nothing.json()["restarted"] == 0


def test_a_judge_panel_restarts_through_the_api(judges, researcher, annotator, sent, settings, english):
    settings.MODEL_CALL_RETRIES = 0
    started = panel.start_panel(name="p", inference_runs=[answered_run(researcher)], judges=judges, user=researcher)
    url = f"/api/pem/panels/{started.pk}/restart/"
    early = post(token_client(researcher), url)
    assert early.status_code == 400 and "still running" in str(early.json()["detail"])
    run_with_parts(started.job_id)
    failed = Judgment.objects.filter(scoring_run__in=started.scoring_runs.all()).exclude(status="ok")
    assert failed.exists()  # j4 cannot read the three-step chain
    assert post(token_client(annotator), url).status_code == 403
    assert post(token_client(make_person("rosa", Role.RESEARCHER)), url).status_code == 404
    again = post(token_client(researcher), url)
    assert again.status_code == 202 and again.json()["job"]["id"] != started.job_id
    assert set(failed.values_list("status", flat=True)) == {"pending"}
