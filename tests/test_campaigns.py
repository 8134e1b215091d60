"""Campaigns: one run per endpoint over one question set, watched together."""

from datetime import timedelta
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone

from inference import campaigns, engines, services
from inference.client import Completion
from inference.models import Campaign, InferenceRun, ModelEndpoint
from k12vista import jobs
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
def commits(django_capture_on_commit_callbacks):
    """Runs what waits for the test's transaction to commit (a wake-up's message) as a commit would."""
    return django_capture_on_commit_callbacks


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
    """The campaign's one job, the engine runs' jobs it started, then the campaign's
    job again, as their ends wake it (a worker would, on the message they send)."""
    campaign.refresh_from_db()
    execute_job(campaign.job_id)
    for run in campaign.runs.exclude(job=campaign.job).exclude(job=None):
        execute_job(run.job_id)
    execute_job(campaign.job_id)


def local_endpoint(name="local") -> ModelEndpoint:
    return services.save_endpoint(endpoint=ModelEndpoint(name=name, kind=ModelEndpoint.Kind.TRANSFORMERS,
                                                         model_name="/nowhere"), user=None)  # fmt: skip


def engine_answers(endpoint, conversations, params, seed=None):
    """transformers on the worker's CPU, as the engine answers: one completion per conversation."""
    return [Completion(text=ANSWER, latency_ms=5, prompt_tokens=7, completion_tokens=3, finish_reason="stop",
                       attempts=1) for _ in conversations]  # fmt: skip


def woken(sent, job_id: int) -> bool:
    return any(call.args[0] == (job_id,) for call in sent.call_args_list)


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
    make_question()
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
    local = local_endpoint()
    campaign = campaigns.start_campaign(name="mixed", endpoints=[good, local], mode="direct", filters={},
                                        user=researcher)  # fmt: skip
    engine_run = campaign.runs.get(endpoint=local)
    assert engine_run.job is None  # the campaign's job starts it, on its own queue
    # Half answered before a crash: the job, run again, asks only the rest.
    http_run = campaign.runs.get(endpoint=good)
    services.create_missing_responses(http_run)
    first = http_run.responses.order_by("id").first()
    services.save_answer(first, completion=None, error="earlier")
    assert execute_job(campaign.job_id) == "parked"  # waiting for the engine run, on no worker
    engine_run.refresh_from_db()
    assert engine_run.job.kind == "inference.run_local" and engine_run.job.queue == Job.Queue.CPU
    assert engine_run.job.params["part_of"] == campaign.job_id
    first.refresh_from_db()
    assert first.error == "earlier" and http_run.counts()["ok"] == 1
    # Run once more (a second delivery, or a takeover): no second engine job, nothing asked again.
    Job.objects.filter(pk=campaign.job_id).update(status=Job.Status.QUEUED)
    asked = len(Models.seen)
    assert execute_job(campaign.job_id) == "parked"
    engine_run.refresh_from_db()
    assert Job.objects.filter(kind="inference.run_local").count() == 1
    assert len(Models.seen) == asked
    page = login(researcher).get(reverse("k12vista:job_detail", args=[campaign.job_id]))
    assert page.status_code == 200 and "评测批次 mixed" in page.content.decode()  # the title in the reader's language
    detail = login(researcher).get(reverse("inference:campaign", args=[campaign.pk])).content.decode()
    assert f'id="job-{campaign.job_id}"' in detail


@pytest.mark.django_db
def test_cancelling_the_campaign_job_stops_its_runs_and_cancels_the_engine_runs(scripted_models, researcher, sent):
    url = scripted_models({"good": lambda body: (200, ANSWER)})
    for _ in range(3):
        make_question()
    good = make_endpoint("good", url, max_concurrency=1)
    local = local_endpoint()
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


def mixed_campaign(url, researcher, name="mixed") -> tuple[Campaign, InferenceRun, InferenceRun]:
    """Two questions; an HTTP run the campaign's job answers and an engine run with a job of its own."""
    good, local = make_endpoint(f"{name}-good", url), local_endpoint(f"{name}-local")
    campaign = campaigns.start_campaign(name=name, endpoints=[good, local], mode="direct", filters={},
                                        user=researcher)  # fmt: skip
    return campaign, campaign.runs.get(endpoint=good), campaign.runs.get(endpoint=local)


@pytest.mark.django_db
def test_a_campaign_runs_until_its_engine_run_ends_then_is_done(scripted_models, researcher, sent, login, commits):
    url = scripted_models({"mixed-good": lambda body: (200, ANSWER)})
    make_question()
    make_question()
    campaign, http_run, engine_run = mixed_campaign(url, researcher)
    # The HTTP run answered, the engine run not started on its worker: the campaign is not done.
    assert execute_job(campaign.job_id) == "parked"
    job = Job.objects.get(pk=campaign.job_id)
    assert job.status == Job.Status.RUNNING and (job.done, job.total) == (2, 4)  # its bar covers both runs
    assert http_run.counts()["ok"] == 2 and not campaigns.summary(campaign).finished
    client = login(researcher)
    data = client.get(reverse("inference_api:campaign", args=[campaign.pk])).json()
    assert data["summary"]["finished"] is False and data["summary"]["pending"] == 2
    assert client.get(reverse("api:api_job", args=[campaign.job_id])).json()["status"] == "running"
    partial = client.get(reverse("inference:campaign", args=[campaign.pk]), headers={"HX-Request": "true"})
    assert 'data-finished="false"' in partial.content.decode() and 'hx-trigger="every 2s"' in partial.content.decode()
    jobs_page = client.get(reverse("k12vista:job_list")).content.decode()
    assert "评测批次 mixed" in jobs_page
    engine_run.refresh_from_db()
    sent.reset_mock()
    with mock.patch.object(engines, "local_chat_batch", engine_answers), commits(execute=True):
        assert execute_job(engine_run.job_id) == Job.Status.SUCCEEDED
    # Its end woke the campaign's job (a message for it); its answers already moved the campaign's bar.
    assert woken(sent, campaign.job_id)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING and (job.done, job.total) == (4, 4)
    # Woken up, it finishes without reading its answered HTTP run's questions again.
    with mock.patch.object(services, "prepare_answering", side_effect=AssertionError("prepared again")):
        assert execute_job(campaign.job_id) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    summary = campaigns.summary(campaign)
    assert summary.finished and summary.percent == 100 and summary.ok == 4
    assert job.attempts == 1  # woken up, not retried
    assert job.result["prompt_tokens"] == summary.prompt_tokens and summary.rows[1].prompt_tokens == 14
    assert job.result["engine_runs"] == 1 and job.result["answered"] == 4
    data = client.get(reverse("inference_api:campaign", args=[campaign.pk])).json()
    assert data["summary"]["finished"] is True


@pytest.mark.django_db
def test_an_engine_run_that_ends_before_the_campaign_parks_still_ends_it(scripted_models, researcher, sent, commits):
    url = scripted_models({"one-good": lambda body: (200, ANSWER), "two-good": lambda body: (200, ANSWER)})
    make_question()

    def engine_run_ends(run):
        run.refresh_from_db()
        with mock.patch.object(engines, "local_chat_batch", engine_answers):
            assert execute_job(run.job_id) == Job.Status.SUCCEEDED  # on another worker

    # While the HTTP runs are answered: the campaign's job sees it done, and ends at once.
    one, _http_run, engine_run = mixed_campaign(url, researcher, name="one")
    real_save = services.save_answers

    def save_then_the_engine_run_ends(batch):
        real_save(batch)
        engine_run_ends(engine_run)

    with mock.patch.object(services, "save_answers", save_then_the_engine_run_ends):
        assert execute_job(one.job_id) == Job.Status.SUCCEEDED
    assert campaigns.summary(one).ok == 2
    # Just as the campaign's job parks: its end woke nobody (the job was still held), so the
    # campaign's job, looking again once parked, wakes itself.
    two, _http_run, engine_run = mixed_campaign(url, researcher, name="two")
    real_park = Job.park

    def park_as_the_engine_run_ends(job, token):
        engine_run_ends(engine_run)
        return real_park(job, token)

    with mock.patch.object(Job, "park", park_as_the_engine_run_ends), commits(execute=True):
        assert execute_job(two.job_id) == "parked"
    assert woken(sent, two.job_id)
    assert execute_job(two.job_id) == Job.Status.SUCCEEDED
    assert campaigns.summary(two).ok == 2


def with_a_failed_engine_run(scripted_models, researcher):
    """A mixed campaign, parked, whose engine run's job has failed (its weights are missing)."""
    url = scripted_models({"mixed-good": lambda body: (200, ANSWER)})
    make_question()
    campaign, _http_run, engine_run = mixed_campaign(url, researcher)
    assert execute_job(campaign.job_id) == "parked"
    engine_run.refresh_from_db()
    with mock.patch.object(engines, "local_chat_batch", side_effect=RuntimeError("no weights at /nowhere")):
        assert execute_job(engine_run.job_id) == Job.Status.FAILED
    return campaign, engine_run


@pytest.mark.django_db
def test_a_failed_engine_run_fails_the_campaign_once_it_ends_and_retry_restarts_it(
    scripted_models, researcher, sent, english, login
):
    campaign, engine_run = with_a_failed_engine_run(scripted_models, researcher)
    assert Job.objects.get(pk=campaign.job_id).status == Job.Status.RUNNING  # told, not yet done
    assert execute_job(campaign.job_id) == Job.Status.FAILED
    job = Job.objects.get(pk=campaign.job_id)
    assert "1 of the campaign's 2 runs failed: mixed-local (RuntimeError: no weights at /nowhere)" in job.error_message
    assert campaigns.summary(campaign).finished
    # Retry (its questions were left unasked, none failed): the engine run again, in a job of its
    # own that is part of the campaign's new job.
    client = login(researcher)
    assert 'id="campaign-retry"' in client.get(reverse("inference:campaign", args=[campaign.pk])).content.decode()
    retried = client.post(reverse("inference:campaign_retry", args=[campaign.pk]), follow=True)
    assert "2 runs ask their failed questions again." in retried.content.decode()
    campaign.refresh_from_db()
    engine_run.refresh_from_db()
    assert engine_run.job.params["part_of"] == campaign.job_id != job.pk
    with mock.patch.object(engines, "local_chat_batch", engine_answers):
        run_all(campaign)
    campaign.refresh_from_db()
    assert campaign.job.status == Job.Status.SUCCEEDED and campaigns.summary(campaign).ok == 2


@pytest.mark.django_db
def test_cancelling_an_engine_run_or_a_waiting_campaign_ends_the_campaign(scripted_models, researcher, sent, commits):
    url = scripted_models({"one-good": lambda body: (200, ANSWER), "two-good": lambda body: (200, ANSWER)})
    make_question()
    one, _http, engine_run = mixed_campaign(url, researcher, name="one")
    assert execute_job(one.job_id) == "parked"
    engine_run.refresh_from_db()
    sent.reset_mock()
    with commits(execute=True):
        cancel_job(job=engine_run.job)  # someone cancels the engine run alone, while it waits for its worker
    assert engine_run.job.status == Job.Status.CANCELLED and woken(sent, one.job_id)
    assert execute_job(one.job_id) == Job.Status.CANCELLED
    # Cancelling a campaign waiting on its engine run: both end at once (no worker holds the campaign's job).
    two, _http, engine_run = mixed_campaign(url, researcher, name="two")
    assert execute_job(two.job_id) == "parked"
    cancel_job(job=Job.objects.get(pk=two.job_id))
    engine_run.refresh_from_db()
    assert Job.objects.get(pk=two.job_id).status == Job.Status.CANCELLED
    assert engine_run.job.status == Job.Status.CANCELLED and campaigns.summary(two).finished
    assert execute_job(two.job_id) == "not-claimed"


@pytest.mark.django_db
def test_a_lost_wake_up_is_made_good_by_the_sweeper(scripted_models, researcher, sent, settings):
    """The engine run's worker died between finishing its job and waking the campaign's."""
    url = scripted_models({"mixed-good": lambda body: (200, ANSWER)})
    make_question()
    campaign, _http, engine_run = mixed_campaign(url, researcher)
    assert execute_job(campaign.job_id) == "parked"
    engine_run.refresh_from_db()
    with mock.patch.object(engines, "local_chat_batch", engine_answers), mock.patch.object(jobs, "wake"):
        assert execute_job(engine_run.job_id) == Job.Status.SUCCEEDED
    assert jobs.sweep()["sent"] == 0  # a parked job's heart is not stale yet
    stale = timezone.now() - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS + 1)
    Job.objects.filter(pk=campaign.job_id).update(heartbeat_at=stale, message_due_at=stale)
    sent.reset_mock()
    assert jobs.sweep()["sent"] == 1 and woken(sent, campaign.job_id)
    assert execute_job(campaign.job_id) == Job.Status.SUCCEEDED


@pytest.mark.django_db
def test_a_campaigns_runs_save_their_answers_together_and_write_the_job_row_once_per_round(
    scripted_models, researcher, sent
):
    """Issue 28: each run saving and reporting on its own clock wrote a transaction of about three
    answers, and the job's row, per run twice a second. Within one round (SAVE_SECONDS, here longer
    than the campaign) the answers of all its runs go out in one batch and the row once."""
    url = scripted_models({"a": lambda body: (200, ANSWER), "b": lambda body: (200, ANSWER)})
    for _ in range(3):
        make_question()
    campaign = campaigns.start_campaign(name="c", endpoints=[make_endpoint("a", url), make_endpoint("b", url)],
                                        mode="direct", filters={}, user=researcher)  # fmt: skip
    batches, reports = [], []
    real_save, real_report = services.save_answers, Job.report

    def counted_save(batch):
        batches.append(len(batch))
        real_save(batch)

    def counted_report(job, *args, **kwargs):
        reports.append(kwargs.get("done"))
        return real_report(job, *args, **kwargs)

    with mock.patch.object(services, "save_answers", counted_save), mock.patch.object(Job, "report", counted_report), \
            mock.patch("inference.calls.SAVE_SECONDS", 60):  # fmt: skip
        assert execute_job(campaign.job_id) == Job.Status.SUCCEEDED
    assert batches == [6]  # both runs' answers, one transaction
    assert reports == [0, 6]  # the first report and the last, none per run in between
    assert all(run.counts()["ok"] == 3 for run in campaign.runs.all())


def test_a_campaign_retry_is_refused_while_a_part_of_one_of_its_runs_is_still_answering(
    scripted_models, researcher, sent, english, login
):
    campaign, engine_run = with_a_failed_engine_run(scripted_models, researcher)
    assert execute_job(campaign.job_id) == Job.Status.FAILED and campaigns.summary(campaign).finished
    # A part of the engine run's failed job has not seen the failure yet: its worker still answers.
    Job.objects.create(kind="inference.run_local", status=Job.Status.RUNNING, queue="cpu",
                       params={"run_id": engine_run.pk, "part_of": engine_run.job_id})  # fmt: skip
    jobs_before, campaign_job = Job.objects.count(), campaign.job_id
    refused = login(researcher).post(reverse("inference:campaign_retry", args=[campaign.pk]), follow=True)
    assert "is still being answered" in refused.content.decode()
    campaign.refresh_from_db()
    assert campaign.job_id == campaign_job and Job.objects.count() == jobs_before
