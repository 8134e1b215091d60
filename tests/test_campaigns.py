"""Campaigns: one run per endpoint over one question set, watched together."""

from unittest import mock

import pytest
from django.urls import reverse

from inference import campaigns, services
from inference.models import Campaign, InferenceRun, ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.model_server import tiny_model_server  # noqa: F401 (session fixture)
from tests.scripted_models import Servers

ANSWER = "步骤1：由题意 $x=2$。\n最终答案：B"


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 0


@pytest.fixture
def scripted_models():
    servers = Servers()
    yield servers.start
    servers.stop()


@pytest.fixture
def sent():
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


def make_endpoint(name, base_url, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=name, base_url=base_url, model_name=fields.pop("model", name),
                               accepts_images=False, **fields),
        user=None,
    )  # fmt: skip


def run_all(campaign: Campaign) -> None:
    for run in campaign.runs.all():
        execute_job(run.job_id)


def test_it_runs_a_campaign_over_three_endpoints_one_real(
    tiny_model_server,  # noqa: F811
    scripted_models,
    researcher,
    sent,
    login,  # noqa: F811
):
    base_url, model_name = tiny_model_server
    scripted = scripted_models({"good": lambda body: (200, ANSWER), "broken": lambda body: (400, "bad request")})
    for _ in range(2):
        make_question(subject="math")
    make_question(subject="physics")
    endpoints = [
        make_endpoint("tiny", base_url, model=model_name, default_params={"max_tokens": 6, "temperature": 0}),
        make_endpoint("good", scripted),
        make_endpoint("broken", scripted),
    ]
    campaign = campaigns.start_campaign(name="c1", endpoints=endpoints, mode="step_by_step",
                                        filters={"subject": "math"}, user=researcher, seed=3)  # fmt: skip
    assert campaign.runs.count() == 3 and sent.call_count == 0  # queued when the transaction commits
    run_all(campaign)
    summary = campaigns.summary(campaign)
    by_endpoint = {row.run.endpoint.name: row for row in summary.rows}
    assert {name: (r.ok, r.failed, r.total) for name, r in by_endpoint.items()} == {
        "broken": (0, 2, 2), "good": (2, 0, 2), "tiny": (2, 0, 2),
    }  # fmt: skip
    assert by_endpoint["tiny"].completion_tokens > 0 and by_endpoint["good"].prompt_tokens == 20
    assert summary.finished and summary.percent == 100 and summary.failed == 2
    # Every run answered the same frozen question set with the same seed.
    runs = list(campaign.runs.all())
    assert len({r.provenance["questions"]["content_hash"] for r in runs}) == 1
    assert {r.seed for r in runs} == {3}
    page = login(researcher).get(reverse("inference:campaign", args=[campaign.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('data-endpoint="') == 3 and 'id="campaign-retry"' in html
    data = login(researcher).get(reverse("inference_api:campaign", args=[campaign.pk])).json()
    assert data["summary"]["failed"] == 2 and len(data["summary"]["runs"]) == 3


@pytest.mark.django_db
def test_it_refuses_the_whole_campaign_when_one_endpoint_cannot_run(scripted_models, researcher, sent):
    url = scripted_models({})
    good, off = make_endpoint("good", url), make_endpoint("off", url, active=False)
    with pytest.raises(services.EndpointError):
        campaigns.start_campaign(name="c", endpoints=[good, off], mode="direct", filters={}, user=researcher)
    assert not Campaign.objects.exists() and not InferenceRun.objects.exists()
    with pytest.raises(campaigns.CampaignError):
        campaigns.start_campaign(name="c", endpoints=[good, good], mode="direct", filters={}, user=researcher)


@pytest.mark.django_db
def test_it_asks_the_failed_questions_again_for_every_run(scripted_models, researcher, sent, login):
    script = {"flaky": [400]}
    url = scripted_models({"flaky": lambda body: (script["flaky"].pop(0), "x") if script["flaky"] else (200, ANSWER)})
    make_question()
    campaign = campaigns.start_campaign(name="c", endpoints=[make_endpoint("flaky", url)], mode="direct",
                                        filters={}, user=researcher)  # fmt: skip
    run_all(campaign)
    assert campaigns.summary(campaign).failed == 1
    response = login(researcher).post(reverse("inference:campaign_retry", args=[campaign.pk]))
    assert response.status_code == 302
    run_all(campaign)
    assert (campaigns.summary(campaign).ok, campaigns.summary(campaign).failed) == (1, 0)


@pytest.mark.django_db
def test_the_campaign_screens_start_one_and_keep_others_out(scripted_models, researcher, administrator, annotator,
                                                            sent, login, client):  # fmt: skip
    url = scripted_models({})
    a, b = make_endpoint("a", url), make_endpoint("b", url)
    make_question()
    response = login(researcher).post(reverse("inference:campaign_create"), {
        "name": "来自页面", "endpoints": [a.pk, b.pk], "mode": "direct", "input_form": "images",
    })  # fmt: skip
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and campaign.runs.count() == 2
    # The progress region polls itself while runs are going, and comes alone for htmx.
    partial = client.get(reverse("inference:campaign", args=[campaign.pk]), headers={"HX-Request": "true"})
    assert partial.status_code == 200
    assert partial.content.decode().lstrip().startswith('<div class="card" id="campaign-progress"')
    assert 'hx-trigger="every 2s"' in partial.content.decode()
    stranger = make_person("rob", Role.RESEARCHER)
    assert login(stranger).get(reverse("inference:campaign", args=[campaign.pk])).status_code == 404
    assert login(administrator).get(reverse("inference:campaign", args=[campaign.pk])).status_code == 200
    assert login(annotator).get(reverse("inference:campaign", args=[campaign.pk])).status_code == 403
    assert login(annotator).get(reverse("inference:campaigns")).status_code == 403
    assert login(researcher).post(reverse("inference:campaign", args=[campaign.pk])).status_code == 405


@pytest.mark.django_db
def test_the_api_starts_a_campaign_and_refuses_bad_input(scripted_models, researcher, sent, login):
    url = scripted_models({})
    a = make_endpoint("a", url)
    client = login(researcher)
    created = client.post(reverse("inference_api:campaigns"), {"name": "api", "endpoints": [a.pk], "mode": "direct"},
                          content_type="application/json")  # fmt: skip
    assert created.status_code == 201 and created.json()["summary"]["runs"][0]["endpoint"] == "a"
    bad = client.post(reverse("inference_api:campaigns"), {"name": "api", "endpoints": [], "mode": "direct"},
                      content_type="application/json")  # fmt: skip
    assert bad.status_code == 400
    listed = client.get(reverse("inference_api:campaigns")).json()
    assert [c["name"] for c in listed["results"]] == ["api"]
