"""An endpoint's API key goes only where MODEL_API_KEY_URLS binds its variable (issue 26, item 5).

Endpoints are shared and any researcher edits one: pointing an endpoint that names the lab's key
variable at one's own server (inside the URL allowlist) must not hand them the key, whether the
endpoint is saved through the form or the API, a run is started on it, or the URL is changed under
a run already queued. Real HTTP servers on this machine: the lab's and the attacker's."""

from unittest import mock

import pytest

from inference import client, services
from inference.models import ModelEndpoint
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.test_endpoint_rules import api_as, serve

pytestmark = pytest.mark.django_db

KEY = "sk-lab-only-6f1"


@pytest.fixture
def servers(settings, monkeypatch):
    lab, lab_handler, lab_url = serve()
    thief, thief_handler, thief_url = serve()
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]
    settings.MODEL_API_KEY_VARIABLES = ["OPENAI_API_KEY", "K12VISTA_KEY_*"]
    settings.MODEL_API_KEY_URLS = {"K12VISTA_KEY_LAB": [lab_url + "/v1/*"]}
    monkeypatch.setenv("K12VISTA_KEY_LAB", KEY)
    monkeypatch.setenv("K12VISTA_KEY_SPARE", "sk-spare")
    yield {"lab": lab_url + "/v1", "thief": thief_url + "/v1", "lab_seen": lab_handler.seen,
           "thief_seen": thief_handler.seen}  # fmt: skip
    for server in (lab, thief):
        server.shutdown()
        server.server_close()


def form_data(url: str, variable: str = "K12VISTA_KEY_LAB") -> dict:
    return {"name": "lab", "kind": "openai", "base_url": url, "model_name": "m", "api_key_env": variable,
            "max_concurrency": 4, "timeout_seconds": 60, "max_image_side": 1024, "default_params": "{}"}  # fmt: skip


def start(ep, user):
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return services.start_inference_run(endpoint=ep, mode="direct", filters={}, user=user)


def test_a_key_variable_cannot_be_pointed_at_another_server_at_save(servers, researcher, login):
    response = login(researcher).post("/research/endpoints/new/", form_data(servers["thief"]))
    assert response.status_code == 200 and "MODEL_API_KEY_URLS" in str(response.context["form"].errors)
    api = api_as(researcher).post("/api/endpoints/", {**form_data(servers["thief"]), "default_params": {}},
                                  format="json")  # fmt: skip
    assert api.status_code == 400 and "MODEL_API_KEY_URLS" in str(api.json())
    # A variable bound to nothing goes nowhere, not even to the lab.
    spare = api_as(researcher).post("/api/endpoints/", {**form_data(servers["lab"], "K12VISTA_KEY_SPARE"),
                                                        "default_params": {}}, format="json")  # fmt: skip
    assert spare.status_code == 400
    assert not ModelEndpoint.objects.exists()
    # Editing the lab's endpoint to point elsewhere is refused the same way.
    lab = services.save_endpoint(endpoint=ModelEndpoint(name="lab", base_url=servers["lab"], model_name="m",
                                                        api_key_env="K12VISTA_KEY_LAB"), user=researcher)  # fmt: skip
    edit = login(researcher).post(f"/research/endpoints/{lab.pk}/", form_data(servers["thief"]))
    assert "MODEL_API_KEY_URLS" in str(edit.context["form"].errors)
    lab.refresh_from_db()
    assert lab.base_url == servers["lab"]


def test_the_endpoint_page_says_a_key_is_not_bound_to_its_url(servers, researcher, login):
    ModelEndpoint.objects.create(
        name="moved", base_url=servers["thief"], model_name="m", api_key_env="K12VISTA_KEY_LAB"
    )
    page = login(researcher).get("/research/endpoints/").content.decode()
    assert 'data-key-state="unbound"' in page and 'data-key-state="set"' not in page


def test_the_key_reaches_its_own_server(servers, researcher):
    ep = services.save_endpoint(endpoint=ModelEndpoint(name="lab", base_url=servers["lab"], model_name="m",
                                                       api_key_env="K12VISTA_KEY_LAB"), user=researcher)  # fmt: skip
    make_question()
    run = start(ep, researcher)
    execute_job(run.job_id)
    assert [seen["authorization"] for seen in servers["lab_seen"]] == [f"Bearer {KEY}"]


def test_a_run_refuses_to_start_and_the_worker_to_call_once_the_url_moved(servers, researcher):
    ep = services.save_endpoint(endpoint=ModelEndpoint(name="lab", base_url=servers["lab"], model_name="m",
                                                       api_key_env="K12VISTA_KEY_LAB"), user=researcher)  # fmt: skip
    make_question()
    queued = start(ep, researcher)
    # Written straight to the database (an older row, an admin, a migration): still refused.
    ModelEndpoint.objects.filter(pk=ep.pk).update(base_url=servers["thief"])
    ep.refresh_from_db()
    with pytest.raises(services.EndpointError, match="MODEL_API_KEY_URLS"):
        start(ep, researcher)
    with pytest.raises(client.EndpointError, match="MODEL_API_KEY_URLS"):
        ep.api_key()
    # The endpoint list and the API say why, without reading the key.
    page = api_as(researcher).get("/api/endpoints/").json()["results"]
    assert page[0]["api_key_state"] == "unbound"
    execute_job(queued.job_id)
    queued.job.refresh_from_db()
    assert queued.job.status == "failed" and "MODEL_API_KEY_URLS" in queued.job.error
    assert servers["thief_seen"] == [] and servers["lab_seen"] == []


@pytest.mark.parametrize(
    ("bound", "url", "ok"),
    [
        (["https://api.openai.com/v1"], "https://api.openai.com/v1", True),
        (["https://api.openai.com/*"], "https://api.openai.com/v1", True),
        (["https://api.openai.com/v1"], "https://api.openai.com.evil.example/v1", False),
        (["https://api.openai.com/v1"], "http://api.openai.com/v1", False),
        (["https://api.openai.com/v1"], "https://api.openai.com/v10", False),
        ([], "https://api.openai.com/v1", False),
    ],
)
def test_bindings_are_compared_after_parsing(settings, bound, url, ok):
    settings.MODEL_API_KEY_URLS = {"OPENAI_API_KEY": bound}
    if ok:
        client.check_key_destination("OPENAI_API_KEY", url)
    else:
        with pytest.raises(client.EndpointError, match="MODEL_API_KEY_URLS"):
            client.check_key_destination("OPENAI_API_KEY", url)


def test_a_malformed_binding_stops_start_up(settings):
    from inference.apps import check_model_url_allowlist

    settings.MODEL_API_KEY_URLS = {"OPENAI_API_KEY": ["ftp://api.openai.com"]}
    assert [problem.id for problem in check_model_url_allowlist()] == ["inference.E003"]


@pytest.mark.parametrize("value", ["not json", '["https://api.openai.com/v1"]', '{"OPENAI_API_KEY": "https://x"}'])
def test_a_binding_that_is_no_json_object_of_lists_stops_start_up(value):
    from tests.test_settings import run_django

    result = run_django({"DEBUG": "1", "MODEL_API_KEY_URLS": value}, "check")
    assert result.returncode != 0 and "MODEL_API_KEY_URLS" in result.stderr
