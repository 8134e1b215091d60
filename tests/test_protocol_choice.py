"""The protocol is chosen and shown everywhere (issue 24): a campaign's runs ask in the protocol
the researcher chose (page, API, command), a run's scoring form offers the run's protocol, and the
leaderboard names each entry's protocol and never ranks two protocols together silently."""

from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.urls import reverse

from inference import campaigns, services, standings
from inference.models import Campaign, InferenceRun, ModelEndpoint, Protocol, ScoringRun
from inference.reference import register
from k12vista.models import Job
from tests.annotation_factories import make_question
from tests.reference_code import CHECKOUT, needs_reference
from tests.scripted_models import Servers

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


@pytest.fixture
def sent():
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


def make_endpoint(name: str, base_url: str) -> ModelEndpoint:
    return services.save_endpoint(endpoint=ModelEndpoint(name=name, base_url=base_url, model_name=name), user=None)


@needs_reference
def test_a_campaign_asks_in_the_protocol_chosen_on_the_page_the_api_and_the_command(servers, researcher, sent,
                                                                                     login):  # fmt: skip
    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    prompt_set = register.latest_set()
    url = servers.start({})
    a, b = make_endpoint("a", url), make_endpoint("b", url)
    make_question()
    client = login(researcher)
    page = client.get(reverse("inference:campaign_create")).content.decode()
    assert 'name="protocol"' in page and 'name="prompt_set"' in page
    response = client.post(reverse("inference:campaign_create"), {
        "name": "页面", "endpoints": [a.pk, b.pk], "mode": "direct", "input_form": "images", "protocol": "reference",
    })  # fmt: skip
    assert response.status_code == 302, response.context["form"].errors
    campaign = Campaign.objects.get(name="页面")
    assert (campaign.protocol, campaign.prompt_set) == ("reference", prompt_set)
    assert set(campaign.runs.values_list("protocol", flat=True)) == {"reference"}
    detail = client.get(reverse("inference:campaign", args=[campaign.pk])).content.decode()
    assert 'data-protocol="reference"' in detail and prompt_set in detail
    created = client.post(reverse("inference_api:campaigns"), {"name": "api", "endpoints": [a.pk], "mode": "direct",
                                                              "protocol": "reference"},
                          content_type="application/json")  # fmt: skip
    assert created.status_code == 201 and created.json()["protocol"] == "reference"
    assert Campaign.objects.get(name="api").runs.get().protocol == "reference"
    body = {"name": "bad", "endpoints": [a.pk], "mode": "direct", "protocol": "paper"}
    bad = client.post(reverse("inference_api:campaigns"), body, content_type="application/json")
    assert bad.status_code == 400 and "protocol" in bad.json()
    call_command("start_campaign", "cli", "--endpoint", "a", "--mode", "direct", "--protocol", "reference",
                 stdout=StringIO())  # fmt: skip
    assert Campaign.objects.get(name="cli").runs.get().protocol == "reference"
    studio = campaigns.start_campaign(name="default", endpoints=[a], mode="direct", filters={}, user=researcher)
    assert studio.protocol == "studio" and studio.runs.get().protocol == "studio"
    # A run's page offers to score it in the protocol it was asked in.
    run = campaign.runs.first()
    run_page = client.get(reverse("inference:run", args=[run.pk])).content.decode()
    assert '<option value="reference" selected>' in run_page


def two_scorings(researcher):
    """Alpha scored twice (the newer by another judge, in the reference protocol); Beta once
    (studio), and a panel-style scoring run of Beta with no job and no stored slices."""
    from tests.test_standings import endpoint, finish, questions, scored_run

    bank = questions(20)
    old = scored_run(endpoint("Alpha"), "direct", bank, 1)
    other_judge = endpoint("judge-2")
    newer = ScoringRun.objects.create(name="newer", inference_run=old.inference_run, judge=other_judge,
                                      method=old.method, job=finish(), protocol=Protocol.REFERENCE)  # fmt: skip
    from inference.models import Judgment

    for response in old.inference_run.responses.all():
        Judgment.objects.create(scoring_run=newer, response=response, status=Judgment.Status.OK, score=1.0)
    standings.take_snapshot(newer)
    beta = scored_run(endpoint("Beta"), "direct", bank, 2)
    panel = ScoringRun.objects.create(name="panel judge", inference_run=beta.inference_run, judge=other_judge,
                                      method=beta.method, job=None)  # fmt: skip
    return old, newer, beta, panel


def test_the_leaderboard_names_each_entrys_protocol_and_never_mixes_them_silently(researcher, login):
    old, newer, beta, _panel = two_scorings(researcher)
    state = standings.board_state("direct")
    assert state.protocols == ["reference", "studio"]
    alpha = state.board.entry("Alpha", "direct")
    assert (alpha.run.scoring_run, alpha.run.protocol) == (newer.pk, "reference")
    client = login(researcher)
    page = client.get(reverse("inference:leaderboard") + "?mode=direct").content.decode()
    assert 'id="protocols-mixed"' in page and 'data-protocol-link="studio"' in page
    assert 'data-protocol="reference"' in page and 'data-protocol="studio"' in page
    studio_only = client.get(reverse("inference:leaderboard") + "?mode=direct&protocol=studio").content.decode()
    assert 'id="protocols-mixed"' not in studio_only
    only = standings.board_state("direct", protocol="studio")
    assert only.protocols == ["studio"] and only.board.entry("Alpha", "direct").run.scoring_run == old.pk
    document = client.get("/api/leaderboard/?mode=direct&protocol=reference").json()
    assert document["protocols"] == ["reference"] and [e["model"] for e in document["entries"] if e["run"]] == ["Alpha"]
    assert client.get("/api/leaderboard/?protocol=paper").status_code == 400
    # The downloads carry each entry's protocol, and read back.
    from inference import leaderboard

    board = standings.board_state().board
    assert leaderboard.from_json(leaderboard.to_json(board)).entries == board.entries
    assert leaderboard.from_csv(leaderboard.to_csv(board)).entries == board.entries
    assert board.entry("Alpha", "direct").run.protocol == "reference"


def test_a_newer_scoring_run_replacing_an_entry_is_said_with_the_pin_and_waiting_runs_say_why(researcher, login,
                                                                                              english):  # fmt: skip
    old, newer, beta, panel = two_scorings(researcher)
    alpha = standings.board_state("direct").board.entry("Alpha", "direct")
    assert alpha.run.replaced.scoring_run == old.pk and set(alpha.run.replaced.differs) == {"judge", "protocol"}
    client = login(researcher)
    page = client.get(reverse("inference:leaderboard") + "?mode=direct").content.decode()
    assert f'data-replaced="{old.pk}"' in page and "replaced" in page and "differs in the judge, the protocol" in page
    assert f'<input type="hidden" name="scoring_run" value="{old.pk}">' in page  # the pin, offered there
    # The panel's scoring run: one place says it is not on the board and why; never "succeeded".
    section = page.split('id="not-on-board"')[1].split("</ul>")[0]
    assert f'data-not-counted="{panel.pk}"' in section and "no slices are stored for the board" in section
    assert "succeeded" not in section.lower() and "Waiting for a finished scoring run" not in page
    # Pinned, nothing is said: the researcher chose.
    standings.pin_scoring_run(scoring_run=old, user=researcher)
    page = client.get(reverse("inference:leaderboard") + "?mode=direct").content.decode()
    assert "data-replaced" not in page
    # A scoring run still going, on a model with no entry yet: waiting, with its job's status.
    from tests.test_standings import endpoint, finish

    gamma = InferenceRun.objects.create(name="Gamma direct", endpoint=endpoint("Gamma"), mode="direct")
    going = ScoringRun.objects.create(name="going", inference_run=gamma, judge=gamma.endpoint, method=old.method,
                                      job=finish(status=Job.Status.RUNNING))  # fmt: skip
    page = client.get(reverse("inference:leaderboard") + "?mode=direct").content.decode()
    assert f'data-waiting="{gamma.pk}"' in page and f"#{going.pk} going: running" in page
