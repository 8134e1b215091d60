"""Campaigns: one run per endpoint over one question set, watched together."""

from unittest import mock

import pytest
from django.urls import reverse

from inference import campaigns, services
from inference.models import Campaign, InferenceRun, ModelEndpoint
from k12vista.jobs import cancel_job, execute_job
from k12vista.models import Job
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.scripted_models import Models, Servers

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
    """The campaign's one job, then the engine runs' jobs it started."""
    campaign.refresh_from_db()
    execute_job(campaign.job_id)
    for run in campaign.runs.exclude(job=campaign.job).exclude(job=None):
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
    # One job for the campaign; its HTTP runs follow it.
    assert set(campaign.runs.values_list("job", flat=True)) == {campaign.job_id}
    run_all(campaign)
    campaign.job.refresh_from_db()
    assert (campaign.job.status, campaign.job.done, campaign.job.total) == (Job.Status.SUCCEEDED, 6, 6)
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


@pytest.mark.django_db
def test_the_campaign_job_starts_engine_runs_once_resumes_and_shows_on_the_job_page(
    scripted_models, researcher, sent, login, settings
):
    url = scripted_models({"good": lambda body: (200, ANSWER)})
    make_question()
    make_question()
    good = make_endpoint("good", url)
    local = services.save_endpoint(endpoint=ModelEndpoint(name="local", kind=ModelEndpoint.Kind.TRANSFORMERS,
                                                           model_name="/nowhere"), user=None)  # fmt: skip
    campaign = campaigns.start_campaign(name="mixed", endpoints=[good, local], mode="direct", filters={},
                                        user=researcher)  # fmt: skip
    engine_run = campaign.runs.get(endpoint=local)
    assert engine_run.job is None  # the campaign's job starts it, on its own queue
    # Half answered before a crash: the job, run again, asks only the rest.
    http_run = campaign.runs.get(endpoint=good)
    services.create_missing_responses(http_run)
    first = http_run.responses.order_by("id").first()
    services.save_answer(first, completion=None, error="earlier")
    assert execute_job(campaign.job_id) == Job.Status.SUCCEEDED
    engine_run.refresh_from_db()
    assert engine_run.job.kind == "inference.run_local" and engine_run.job.queue == Job.Queue.CPU
    first.refresh_from_db()
    assert first.error == "earlier" and http_run.counts()["ok"] == 1
    # Run once more (a second delivery after a takeover): no second engine job, nothing asked again.
    Job.objects.filter(pk=campaign.job_id).update(status=Job.Status.QUEUED)
    asked = len(Models.seen)
    execute_job(campaign.job_id)
    engine_run.refresh_from_db()
    assert Job.objects.filter(kind="inference.run_local").count() == 1
    assert len(Models.seen) == asked
    page = login(researcher).get(reverse("k12vista:job_detail", args=[campaign.job_id]))
    assert page.status_code == 200 and "Campaign mixed" in page.content.decode()
    detail = login(researcher).get(reverse("inference:campaign", args=[campaign.pk])).content.decode()
    assert f'id="job-{campaign.job_id}"' in detail


@pytest.mark.django_db
def test_cancelling_the_campaign_job_stops_its_runs_and_cancels_the_engine_runs(scripted_models, researcher, sent):
    url = scripted_models({"good": lambda body: (200, ANSWER)})
    for _ in range(3):
        make_question()
    good = make_endpoint("good", url, max_concurrency=1)
    local = services.save_endpoint(endpoint=ModelEndpoint(name="local", kind=ModelEndpoint.Kind.TRANSFORMERS,
                                                           model_name="/nowhere"), user=None)  # fmt: skip
    campaign = campaigns.start_campaign(name="c", endpoints=[good, local], mode="direct", filters={},
                                        user=researcher)  # fmt: skip
    real_save = services.save_answers

    def save_then_cancel(batch):
        real_save(batch)
        cancel_job(job=Job.objects.get(pk=campaign.job_id))  # someone presses Cancel mid-campaign

    with mock.patch.object(services, "save_answers", save_then_cancel), \
            mock.patch("inference.calls.SAVE_SECONDS", 0):  # fmt: skip
        assert execute_job(campaign.job_id) == Job.Status.CANCELLED
    engine_run = campaign.runs.get(endpoint=local)
    assert engine_run.job.status == Job.Status.CANCELLED
    http_run = campaign.runs.get(endpoint=good)
    assert 1 <= http_run.counts()["ok"] < 3  # stopped, what was answered kept
