"""The inference API: endpoints, runs, their answers and the leaderboard."""

import json

import pytest
from django.urls import include, path

from inference.models import InferenceRun, ModelEndpoint, PublishedResult, Response, ScoringRun
from k12vista import urls as project_urls
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.test_inference_views import answer, make_endpoint, make_run, scored

# The project's URLs, with the inference API mounted as k12vista/urls.py mounts it
# (added here only while the project's urls.py does not include it yet).
urlpatterns = list(project_urls.urlpatterns)
if not any(getattr(p, "namespace", None) == "inference_api" for p in urlpatterns):
    urlpatterns.append(path("api/", include("inference.api_urls")))
pytestmark = pytest.mark.urls(__name__)


@pytest.fixture(autouse=True)
def _local_model_servers(settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*", "http://localhost:*"]


# --- access -------------------------------------------------------------------------------


def urls_for(run) -> list[str]:
    return ["/api/endpoints/", "/api/runs/", f"/api/runs/{run.pk}/", f"/api/runs/{run.pk}/responses/"]


def test_it_keeps_annotators_and_inspectors_out(api, annotator, inspector, researcher, no_broker):
    run = make_run(researcher)
    for person in (annotator, inspector):
        client = api(person)
        for url in urls_for(run):
            assert client.get(url).status_code == 403, url
        assert client.post("/api/runs/", {"endpoint": run.endpoint_id, "mode": "direct"}).status_code == 403
    assert api(annotator).get("/api/leaderboard/").status_code == 403
    assert InferenceRun.objects.count() == 1


def test_it_asks_anonymous_callers_to_authenticate(api, researcher):
    run = make_run(researcher)
    for url in [*urls_for(run), "/api/leaderboard/"]:
        assert api(None).get(url).status_code == 401, url


def test_it_hides_another_researchers_run(api, researcher):
    run = make_run(researcher)
    answer(run)
    client = api(make_person("rob", Role.RESEARCHER))
    assert client.get(f"/api/runs/{run.pk}/").status_code == 404
    assert client.get(f"/api/runs/{run.pk}/responses/").status_code == 404
    assert client.get("/api/runs/").json()["results"] == []


def test_it_shows_administrators_every_run(api, researcher, administrator):
    run = make_run(researcher)
    client = api(administrator)
    assert [r["id"] for r in client.get("/api/runs/").json()["results"]] == [run.pk]
    assert client.get(f"/api/runs/{run.pk}/").status_code == 200


def test_it_refuses_methods_it_does_not_serve(api, researcher):
    run = make_run(researcher)
    client = api(researcher)
    assert client.put(f"/api/runs/{run.pk}/", {}).status_code == 405
    assert client.delete(f"/api/runs/{run.pk}/").status_code == 405
    assert client.post(f"/api/runs/{run.pk}/responses/", {}).status_code == 405
    assert client.post("/api/leaderboard/", {}).status_code == 405


# --- endpoints ------------------------------------------------------------------------------


def test_it_creates_and_lists_endpoints_without_ever_returning_a_key(api, researcher, monkeypatch):
    monkeypatch.setenv("K12VISTA_KEY_QWEN", "sk-very-secret-value")
    client = api(researcher)
    data = {
        "name": "qwen", "base_url": "http://127.0.0.1:8000/v1/", "model_name": "qwen-vl",
        "api_key_env": "K12VISTA_KEY_QWEN",
    }  # fmt: skip
    created = client.post("/api/endpoints/", data, format="json")
    assert created.status_code == 201
    assert created.json()["base_url"] == "http://127.0.0.1:8000/v1" and created.json()["api_key_state"] == "set"
    listed = client.get("/api/endpoints/")
    assert [e["name"] for e in listed.json()["results"]] == ["qwen"]
    assert "sk-very-secret-value" not in created.content.decode() + listed.content.decode()
    assert ModelEndpoint.objects.get().created_by == researcher


def test_it_refuses_an_endpoint_outside_the_allowlist(api, researcher):
    data = {"name": "x", "base_url": "http://10.0.0.5:8000/v1", "model_name": "m"}
    response = api(researcher).post("/api/endpoints/", data, format="json")
    assert response.status_code == 400 and "MODEL_URL_ALLOWLIST" in response.json()["base_url"][0]
    assert not ModelEndpoint.objects.exists()


def test_it_refuses_a_key_in_place_of_a_variable_name(api, researcher):
    data = {"name": "x", "base_url": "http://127.0.0.1:8000/v1", "model_name": "m", "api_key_env": "sk-abc.def"}
    response = api(researcher).post("/api/endpoints/", data, format="json")
    assert response.status_code == 400 and "api_key_env" in response.json()
    assert not ModelEndpoint.objects.exists()


# --- runs ---------------------------------------------------------------------------------


def test_it_starts_a_run(api, researcher, no_broker):
    endpoint = make_endpoint()
    make_question(), make_question(subject="physics", grade=8)
    data = {"endpoint": endpoint.pk, "mode": "step_by_step", "filters": {"subject": "math", "grade": 9},
            "params": {"temperature": 0.0}, "seed": 3, "name": "api run"}  # fmt: skip
    response = api(researcher).post("/api/runs/", data, format="json")
    assert response.status_code == 201
    run = InferenceRun.objects.get()
    body = response.json()
    assert body["id"] == run.pk and body["job"]["kind"] == "inference.run" and body["job"]["status"] == "queued"
    assert run.filters == {"subject": "math", "grade": 9} and run.params == {"temperature": 0.0} and run.seed == 3
    assert body["provenance"]["questions"]["count"] == 1 and run.created_by == researcher


@pytest.mark.parametrize(
    "data", [{"mode": "sideways"}, {"filters": {"subject": "astrology"}}, {"params": {"temperature": 9}}]
)
def test_it_refuses_bad_run_input(api, researcher, no_broker, data):
    endpoint = make_endpoint()
    response = api(researcher).post("/api/runs/", {"endpoint": endpoint.pk, "mode": "direct", **data}, format="json")
    assert response.status_code == 400 and not InferenceRun.objects.exists()


def test_it_reports_an_endpoint_that_cannot_run(api, researcher, no_broker, english):
    endpoint = make_endpoint()
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(active=False)
    response = api(researcher).post("/api/runs/", {"endpoint": endpoint.pk, "mode": "direct"}, format="json")
    assert response.status_code == 400 and "switched off" in response.json()["endpoint"][0]
    assert not InferenceRun.objects.exists()


def test_it_returns_a_run_with_its_counts(api, researcher):
    run = make_run(researcher)
    answer(run), answer(run, status=Response.Status.FAILED)
    client = api(researcher)
    detail = client.get(f"/api/runs/{run.pk}/").json()
    assert detail["counts"] == {"ok": 1, "failed": 1, "pending": 0} and detail["endpoint_name"] == "qwen"
    listed = client.get("/api/runs/").json()["results"]
    assert listed[0]["counts"] == {"ok": 1, "failed": 1, "pending": 0}


def test_it_pages_a_runs_answers_with_a_cursor(api, researcher):
    run = make_run(researcher)
    rows = [answer(run, latency_ms=100 + i) for i in range(3)]
    client = api(researcher)
    first = client.get(f"/api/runs/{run.pk}/responses/", {"page_size": 2}).json()
    assert [r["id"] for r in first["results"]] == [rows[0].pk, rows[1].pk]
    assert first["results"][0]["question"] == rows[0].question.hash_id and first["results"][0]["latency_ms"] == 100
    second = client.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == [rows[2].pk] and second["next"] is None


# --- leaderboard ----------------------------------------------------------------------------


@pytest.fixture
def board(researcher):
    run = make_run(researcher, finished=True)
    answer(run), answer(run)
    scored(run, score=0.75)
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.6, source="paper")
    return run


def test_it_serves_the_leaderboard_to_inspectors(api, inspector, board):
    response = api(inspector).get("/api/leaderboard/")
    assert response.status_code == 200
    document = response.json()
    by_key = {(e["model"], e["mode"]): e for e in document["entries"]}
    assert document["format"] == "k12vista-leaderboard.v2"
    assert by_key[("qwen", "step_by_step")]["cells"]["overall"]["mean"] == 0.75
    run = by_key[("qwen", "step_by_step")]["run"]
    scoring_run = ScoringRun.objects.get(inference_run=board)
    assert (run["inference_run"], run["scoring_run"]) == (board.pk, scoring_run.pk)
    assert run["inference_run_url"] == f"/api/runs/{board.pk}/"
    assert run["scoring_run_page"] == f"/research/scoring/{scoring_run.pk}/"
    assert set(document["definitions"]) >= {"mean", "interval", "coverage", "absent", "error_share", "time_rule"}
    assert document["time_rule"] == "snapshot" and document["waiting"] == []
    assert by_key[("GPT-4o", "direct")]["published"]["overall"] == {"score": 0.6, "source": "paper"}


def test_it_filters_the_leaderboard_by_mode(api, researcher, board):
    client = api(researcher)
    entries = client.get("/api/leaderboard/", {"mode": "direct"}).json()["entries"]
    assert [(e["model"], e["mode"]) for e in entries] == [("GPT-4o", "direct")]
    assert client.get("/api/leaderboard/", {"mode": "sideways"}).status_code == 400


def test_a_researcher_pins_a_scoring_run_through_the_api(api, researcher, inspector, board):
    first = ScoringRun.objects.get(inference_run=board)
    second = scored(board, score=0.25, name="second")
    client = api(researcher)

    def entry():
        return next(e for e in client.get("/api/leaderboard/").json()["entries"] if e["run"])

    assert entry()["run"]["scoring_run"] == second.pk
    response = client.post("/api/leaderboard/pins/", {"scoring_run": first.pk}, format="json")
    assert response.status_code == 201 and response.json() == {"inference_run": board.pk, "scoring_run": first.pk}
    assert entry()["run"]["scoring_run"] == first.pk and entry()["run"]["pinned"] is True
    assert entry()["cells"]["overall"]["mean"] == 0.75
    assert api(inspector).post("/api/leaderboard/pins/", {"scoring_run": first.pk}, format="json").status_code == 403
    assert client.post("/api/leaderboard/pins/", {"scoring_run": "x"}, format="json").status_code == 400
    assert client.delete(f"/api/leaderboard/pins/{board.pk}/").status_code == 204
    assert client.delete(f"/api/leaderboard/pins/{board.pk}/").status_code == 404
    assert entry()["run"]["scoring_run"] == second.pk


def test_it_refuses_to_pin_an_unfinished_scoring_run(api, researcher, board):
    going = ScoringRun.objects.create(name="going", inference_run=board, judge=board.endpoint,
                                      method=ScoringRun.Method.JUDGE_STEPS)  # fmt: skip
    response = api(researcher).post("/api/leaderboard/pins/", {"scoring_run": going.pk}, format="json")
    assert response.status_code == 400 and "finished" in response.json()["scoring_run"][0]
    assert [w["inference_run"] for w in api(researcher).get("/api/leaderboard/").json()["waiting"]] == []


def test_it_appears_in_the_openapi_schema(researcher, login):
    schema = login(researcher).get("/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"})
    paths = json.loads(schema.content)["paths"]
    assert {"/api/endpoints/", "/api/runs/", "/api/runs/{id}/responses/", "/api/leaderboard/"} <= set(paths)
    assert {"/api/leaderboard/pins/", "/api/leaderboard/pins/{id}/"} <= set(paths)
