"""Where a model call may go and which secret it may carry (issue 10, findings 3, 4
and the bad port of 8): the allowlist compared after parsing, no redirects, and API
keys only from declared variables. Real HTTP servers on this machine."""

import threading
from http.server import ThreadingHTTPServer
from unittest import mock

import pytest
from django.core.exceptions import ImproperlyConfigured

from inference import calls, client, services
from inference.models import InferenceRun, ModelEndpoint, Response
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.scripted_models import ScriptedHandler, completion
from tests.test_settings import run_django

DEFAULT_ALLOWLIST = ["http://127.0.0.1:8000-8010", "http://localhost:8000-8010"]


class Recorder(ScriptedHandler):
    """Records every request; answers with a redirect to ``redirect_to`` when set, else a completion."""

    redirect_to = ""
    seen: list[dict]

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append({"path": self.path, "authorization": self.headers.get("Authorization"), "body": body})
        if self.redirect_to:
            self.send_response(307)
            self.send_header("Location", self.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(200, completion("m", "答案：B"))


def serve(redirect_to: str = ""):
    handler = type("Handler", (Recorder,), {"redirect_to": redirect_to, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def redirect_pair():
    """A server that redirects every request (307) to a second, recording server."""
    target, target_handler, target_url = serve()
    redirector, redirector_handler, redirector_url = serve(redirect_to=target_url)
    yield redirector_url + "/v1", redirector_handler, target_handler, target_url
    for server in (redirector, target):
        server.shutdown()
        server.server_close()


def endpoint(base_url: str, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url, model_name="m", **fields), user=None
    )


def api_as(user):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(user)
    return api


def start(ep, researcher) -> InferenceRun:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return services.start_inference_run(endpoint=ep, mode="direct", filters={}, user=researcher)


# --- the allowlist --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allowlist", "url"),
    [
        (["https://api.openai.com/"], "https://api.openai.com.evil.example/v1"),
        (["https://api.openai.com/"], "https://api.openai.com:8443/v1"),
        (["https://api.openai.com/"], "http://api.openai.com/v1"),
        (["http://10.0.0.5"], "http://10.0.0.50/v1"),
        (["http://10.0.0.5:8000"], "http://10.0.0.5:80001/v1"),
        (["https://gpu01.lab/v1"], "https://gpu01.lab/v10"),
        (["https://gpu01.lab/v1"], "https://gpu01.lab/"),
        (["https://gpu01.lab"], "https://evil@gpu01.lab/v1"),
        (DEFAULT_ALLOWLIST, "http://127.0.0.1:6379"),
        (DEFAULT_ALLOWLIST, "http://127.0.0.1:5432/v1"),
        (DEFAULT_ALLOWLIST, "http://localhost:80/v1"),
        (DEFAULT_ALLOWLIST, "http://127.0.0.2:8000/v1"),
    ],
)
def test_it_refuses_urls_that_only_look_like_an_allowed_one(settings, allowlist, url):
    settings.MODEL_URL_ALLOWLIST = allowlist
    with pytest.raises(client.EndpointError):
        client.check_endpoint_url(url)


@pytest.mark.parametrize(
    ("allowlist", "url", "normalised"),
    [
        (["https://api.openai.com/"], "https://API.openai.com/v1/", "https://api.openai.com/v1"),
        (["https://api.openai.com/"], "https://api.openai.com:443/v1", "https://api.openai.com:443/v1"),
        (["http://10.0.0.5"], "http://10.0.0.5/v1", "http://10.0.0.5/v1"),
        (["https://gpu01.lab/v1"], "https://gpu01.lab/v1/", "https://gpu01.lab/v1"),
        (["https://gpu01.lab/v1"], "https://gpu01.lab/v1/extra", "https://gpu01.lab/v1/extra"),
        (DEFAULT_ALLOWLIST, "http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        (DEFAULT_ALLOWLIST, "http://localhost:8010/v1", "http://localhost:8010/v1"),
        (["http://[::1]:8000"], "http://[::1]:8000/v1", "http://[::1]:8000/v1"),
    ],
)
def test_it_admits_what_an_entry_names(settings, allowlist, url, normalised):
    settings.MODEL_URL_ALLOWLIST = allowlist
    assert client.check_endpoint_url(url) == normalised


@pytest.mark.parametrize("entry", ["http://127.0.0.1:", "http://127.0.0.1:80-", "http://h:9-1", "ftp://h", "h:80"])
def test_a_malformed_allowlist_entry_is_a_configuration_error(entry):
    with pytest.raises(ImproperlyConfigured):
        client.parse_allowed_prefix(entry)


def test_the_default_allowlist_names_local_model_server_ports_only():
    result = run_django(
        {"DEBUG": "1", "MODEL_URL_ALLOWLIST": ""},
        "shell", "--no-imports", "-c",
        "from django.conf import settings; print(','.join(settings.MODEL_URL_ALLOWLIST))",
    )  # fmt: skip
    assert result.stdout.split() == [",".join(DEFAULT_ALLOWLIST)], result.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/v1", "http://127.0.0.1:80a/v1", "http://127.0.0.1:-1/v1"])
def test_a_bad_port_is_a_400_in_the_api(url, researcher):
    data = {"name": "x", "base_url": url, "model_name": "m"}
    response = api_as(researcher).post("/api/endpoints/", data, format="json")
    assert response.status_code == 400
    assert not ModelEndpoint.objects.exists()


@pytest.mark.django_db
def test_a_bad_port_is_a_form_error(researcher, login):
    data = {"name": "x", "kind": "openai", "base_url": "http://127.0.0.1:99999/v1", "model_name": "m",
            "max_concurrency": 4, "timeout_seconds": 60, "max_image_side": 1024, "default_params": "{}"}  # fmt: skip
    response = login(researcher).post("/research/endpoints/new/", data)
    assert response.status_code == 200 and response.context["form"].errors["base_url"]
    assert not ModelEndpoint.objects.exists()


@pytest.mark.django_db
def test_the_worker_checks_the_url_again_at_call_time(settings, researcher):
    """An endpoint saved while its host was allowed is not called once the entry is gone."""
    server, handler, url = serve()
    try:
        ep = endpoint(url + "/v1")
        make_question()
        run = start(ep, researcher)
        settings.MODEL_URL_ALLOWLIST = DEFAULT_ALLOWLIST
        execute_job(run.job_id)
        run.job.refresh_from_db()
        assert run.job.status == "failed" and "MODEL_URL_ALLOWLIST" in run.job.error
        assert handler.seen == []
    finally:
        server.shutdown()
        server.server_close()


# --- redirects ------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_redirect_is_a_failure_naming_its_target_and_the_target_gets_nothing(redirect_pair):
    url, redirector, target, target_url = redirect_pair
    ep = ModelEndpoint.objects.create(name="m", base_url=url, model_name="m", api_key_env="")
    with pytest.raises(client.ModelCallError) as failure:
        calls.complete_sync(ep, [{"role": "user", "content": "hi"}], {})
    assert target_url in str(failure.value) and "redirect" in str(failure.value)
    assert not failure.value.transient and failure.value.attempts == 1
    assert len(redirector.seen) == 1 and target.seen == []


@pytest.mark.django_db
def test_a_run_against_a_redirecting_server_records_the_redirect(redirect_pair, researcher):
    url, _, target, target_url = redirect_pair
    make_question()
    run = start(endpoint(url), researcher)
    execute_job(run.job_id)
    response = Response.objects.get(run=run)
    assert response.status == Response.Status.FAILED and target_url in response.error
    assert target.seen == []


def test_the_synchronous_client_does_not_follow_redirects_either():
    ep = ModelEndpoint(name="m", base_url="http://127.0.0.1:8000/v1", model_name="m")
    api = client.build_sync_client(ep)
    assert api._client.follow_redirects is False
    api.close()


# --- API keys -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "name", "ok"),
    [
        (["OPENAI_API_KEY", "K12VISTA_KEY_*"], "OPENAI_API_KEY", True),
        (["OPENAI_API_KEY", "K12VISTA_KEY_*"], "K12VISTA_KEY_QWEN", True),
        (["OPENAI_API_KEY", "K12VISTA_KEY_*"], "SECRET_KEY", False),
        (["OPENAI_API_KEY", "K12VISTA_KEY_*"], "DATABASE_URL", False),
        (["OPENAI_API_KEY", "K12VISTA_KEY_*"], "OPENAI_API_KEY_2", False),
        (["OPENAI_API_KEY", "K12VISTA_KEY_*"], "K12VISTA_KEYX", False),
        (["*"], "SECRET_KEY", False),
    ],
)
def test_only_declared_variables_are_key_variables(settings, declared, name, ok):
    settings.MODEL_API_KEY_VARIABLES = declared
    assert client.key_variable_declared(name) is ok


@pytest.mark.django_db
def test_the_api_refuses_an_undeclared_key_variable(researcher):
    data = {"name": "x", "base_url": "http://127.0.0.1:8000/v1", "model_name": "m", "api_key_env": "SECRET_KEY"}
    response = api_as(researcher).post("/api/endpoints/", data, format="json")
    assert response.status_code == 400 and "MODEL_API_KEY_VARIABLES" in response.json()["api_key_env"][0]


@pytest.mark.django_db
def test_the_form_refuses_an_undeclared_key_variable(researcher, login):
    data = {"name": "x", "kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model_name": "m",
            "api_key_env": "DATABASE_URL", "max_concurrency": 4, "timeout_seconds": 60, "max_image_side": 1024,
            "default_params": "{}"}  # fmt: skip
    response = login(researcher).post("/research/endpoints/new/", data)
    assert "MODEL_API_KEY_VARIABLES" in response.context["form"].errors["api_key_env"][0]
    assert not ModelEndpoint.objects.exists()


@pytest.mark.django_db
def test_an_old_endpoint_naming_a_server_secret_is_never_read_or_reported(researcher, login):
    """Saved before the rule (or written straight to the database): the page does not say
    whether the variable exists, the API does not either, and a run refuses to start."""
    ep = ModelEndpoint.objects.create(name="old", base_url="http://127.0.0.1:8000/v1", model_name="m",
                                      api_key_env="SECRET_KEY")  # fmt: skip
    page = login(researcher).get("/research/endpoints/").content.decode()
    assert 'data-key-state="undeclared"' in page and 'data-key-state="set"' not in page
    listed = api_as(researcher).get("/api/endpoints/").json()["results"]
    assert listed[0]["api_key_state"] == "undeclared"
    with pytest.raises(client.EndpointError, match="MODEL_API_KEY_VARIABLES"):
        ep.api_key()
    with pytest.raises(services.EndpointError, match="SECRET_KEY is not one of MODEL_API_KEY_VARIABLES"):
        start(ep, researcher)


@pytest.mark.django_db
def test_the_worker_never_sends_an_undeclared_variable(researcher, monkeypatch):
    """Even a run whose job was queued before: the worker's client refuses the variable."""
    monkeypatch.setenv("K12VISTA_KEY_TEST", "sk-declared")
    server, handler, url = serve()
    try:
        ep = endpoint(url + "/v1", api_key_env="K12VISTA_KEY_TEST")
        make_question()
        run = start(ep, researcher)
        ModelEndpoint.objects.filter(pk=ep.pk).update(api_key_env="SECRET_KEY")
        execute_job(run.job_id)
        run.job.refresh_from_db()
        assert run.job.status == "failed" and "SECRET_KEY" in run.job.error
        assert handler.seen == []
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db
def test_a_declared_key_reaches_the_server_as_bearer(researcher, monkeypatch):
    monkeypatch.setenv("K12VISTA_KEY_TEST", "sk-declared")
    server, handler, url = serve()
    try:
        make_question()
        run = start(endpoint(url + "/v1", api_key_env="K12VISTA_KEY_TEST"), researcher)
        execute_job(run.job_id)
        assert [seen["authorization"] for seen in handler.seen] == ["Bearer sk-declared"]
    finally:
        server.shutdown()
        server.server_close()
