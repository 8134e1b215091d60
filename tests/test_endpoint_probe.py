"""'Test connection' on endpoints (inference.client.probe_endpoint): one tiny request
through the client every run uses, with its result and latency, on the endpoint pages
and in the API; the offline engines say what can be checked instead."""

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from inference import client, services
from inference.models import CallLease, ModelEndpoint
from tests.scripted_models import Servers, user_text
from tests.test_unreachable_endpoints import closed_port_url

HTMX = {"HX-Request": "true"}


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


def make_endpoint(base_url="", **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url,
                               model_name=fields.pop("model_name", "m"), **fields),
        user=None,
    )  # fmt: skip


def test_it_calls_the_model_once_and_reports_its_name_and_latency(db, servers):
    url = servers.start({"qwen-72b": lambda body: (200, "ok")})
    probe = client.probe_endpoint(make_endpoint(url, model_name="qwen-72b"))
    assert probe.ok is True and probe.model == "qwen-72b"
    assert probe.latency_ms is not None and 0 <= probe.latency_ms < 10_000
    from tests.scripted_models import Models

    (sent,) = Models.seen  # one request, one token asked for
    assert sent["max_tokens"] == 1 and user_text(sent) == "ping"


def test_a_closed_port_is_named_with_its_cause(db, english):
    url = closed_port_url()
    probe = client.probe_endpoint(make_endpoint(url))
    assert probe.ok is False
    assert probe.message == f"Cannot reach the model server {url}: connection refused."


def test_an_unknown_model_name_is_the_servers_answer(db, servers, english):
    url = servers.start({"other": lambda body: (200, "ok")})
    probe = client.probe_endpoint(make_endpoint(url, model_name="typo"))
    assert probe.ok is False and "HTTP 404" in probe.message and "no model typo" in probe.message


def test_it_obeys_the_allowlist_and_the_key_rules_before_any_request(db, servers, settings):
    url = servers.start({"m": lambda body: (200, "ok")})
    endpoint = make_endpoint(url)
    from tests.scripted_models import Models

    settings.MODEL_URL_ALLOWLIST = ["http://10.0.0.1:8000"]  # the server was taken off the list
    assert client.probe_endpoint(endpoint).ok is False
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(api_key_env="SECRET_KEY")
    endpoint.refresh_from_db()
    refused = client.probe_endpoint(endpoint)
    assert refused.ok is False and "SECRET_KEY" in refused.message
    assert Models.seen == []


def test_it_needs_no_slot_while_runs_hold_them_all(db, servers):
    url = servers.start({"m": lambda body: (200, "ok")})
    endpoint = make_endpoint(url, max_concurrency=1)
    CallLease.objects.create(endpoint=endpoint, slot=0, holder="a-long-run", expires=timezone.now() + timedelta(1))
    started = time.monotonic()
    assert client.probe_endpoint(endpoint).ok is True
    assert time.monotonic() - started < 5


def test_the_offline_engines_say_what_can_be_checked(db, tmp_path, english, settings):
    settings.MODEL_FILES_DIR = tmp_path
    (tmp_path / "config.json").write_text("{}")
    here = client.probe_endpoint(make_endpoint(name="v", kind="vllm_offline", model_name=str(tmp_path)))
    assert (here.ok, here.model_path_exists) == (None, True)
    assert "no server to call" in here.message and "exists on this server" in here.message
    gone = client.probe_endpoint(make_endpoint(name="g", kind="vllm_offline", model_name=str(tmp_path / "gone")))
    assert (gone.ok, gone.model_path_exists) == (None, False) and "not found on this server" in gone.message
    away = client.probe_endpoint(make_endpoint(name="t", kind="transformers", model_name="Qwen/Qwen2-VL-2B"))
    assert (away.ok, away.model_path_exists) == (None, None) and "MODEL_FILES_DIR" in away.message
    # Forms and the API refuse NUL; a name no file system takes is not looked up.
    odd = client.probe_endpoint(ModelEndpoint(name="n", kind="transformers", model_name=f"{tmp_path}/bad\x00path"))
    assert odd.model_path_exists is None


def test_it_tells_nothing_about_paths_outside_the_models_folder(db, tmp_path, settings, researcher, english):
    """The server account's ~/.ssh, the studio's own folder, /etc, a way out through "..", a link
    inside the folder that leads out: the same answer whether the path exists or not."""
    models = tmp_path / "models"
    models.mkdir()
    settings.MODEL_FILES_DIR = models
    (tmp_path / "secret").mkdir()
    (models / "exit").symlink_to(tmp_path / "secret")
    api = APIClient()
    api.force_authenticate(researcher)
    answers = set()
    for name in [str(Path.home() / ".ssh"), str(Path(__file__).parent), "/etc/passwd", "/no/such/path",
                 f"{models}/../secret", f"{models}/../no-such", f"{models}/exit", "~", "~/.bash_history"]:  # fmt: skip
        endpoint = make_endpoint(name=f"e{len(answers)}-{abs(hash(name))}", kind="transformers", model_name=name)
        probe = client.probe_endpoint(endpoint)
        reply = api.post(reverse("inference_api:endpoint_test", args=[endpoint.pk])).json()
        assert probe.model_path_exists is None and reply["model_path_exists"] is None, name
        answers.add((probe.message, reply["message"]))
    assert len(answers) == 1


def test_it_answers_the_tiny_model_from_transformers_serve(db, tiny_model_server):  # noqa: F811
    base_url, model_name = tiny_model_server
    probe = client.probe_endpoint(make_endpoint(base_url, model_name=model_name, timeout_seconds=60))
    assert probe.ok is True, probe.message
    assert probe.model and probe.latency_ms is not None


# --- the pages and the API ------------------------------------------------------------


def test_the_endpoint_list_and_page_test_by_post_only(db, servers, researcher, login):
    url = servers.start({"m": lambda body: (200, "ok")})
    endpoint = make_endpoint(url)
    web = login(researcher)
    test_url = reverse("inference:endpoint_test", args=[endpoint.pk])
    assert test_url in web.get(reverse("inference:endpoints")).content.decode()
    assert test_url in web.get(reverse("inference:endpoint_edit", args=[endpoint.pk])).content.decode()
    assert web.get(test_url).status_code == 405  # a test calls out: never on a GET
    fragment = web.post(test_url, headers=HTMX).content.decode()
    assert 'data-probe="ok"' in fragment and "模型 m 已应答，用时" in fragment
    # Without htmx: the result comes back as a message on the page it was asked from.
    page = web.post(test_url, {"next": "edit"}, follow=True)
    assert page.redirect_chain[-1][0] == reverse("inference:endpoint_edit", args=[endpoint.pk])
    assert "模型 m 已应答" in page.content.decode()


def test_a_failed_test_reads_in_chinese_on_the_page(db, researcher, login):
    url = closed_port_url()
    endpoint = make_endpoint(url)
    fragment = login(researcher).post(reverse("inference:endpoint_test", args=[endpoint.pk]), headers=HTMX)
    text = fragment.content.decode()
    assert 'data-probe="failed"' in text and f"无法连接模型服务 {url}：连接被拒绝。" in text


def test_only_researchers_and_admins_test_endpoints(db, annotator, inspector, login):
    endpoint = make_endpoint(closed_port_url())
    for person in (annotator, inspector):
        web = login(person)
        assert web.post(reverse("inference:endpoint_test", args=[endpoint.pk])).status_code == 403
        assert web.post(reverse("inference_api:endpoint_test", args=[endpoint.pk])).status_code == 403


def test_the_api_gives_the_result_and_the_latency(db, servers, researcher, login):
    url = servers.start({"m": lambda body: (200, "ok")})
    endpoint = make_endpoint(url)
    web = login(researcher)
    assert web.get(reverse("inference_api:endpoint_test", args=[endpoint.pk])).status_code == 405
    data = web.post(reverse("inference_api:endpoint_test", args=[endpoint.pk])).json()
    assert data["ok"] is True and data["model"] == "m" and isinstance(data["latency_ms"], int)
    assert data["message"].startswith("模型 m 已应答")
    assert web.post(reverse("inference_api:endpoint_test", args=[999999])).status_code == 404
