"""The whole pipeline through the REST API (issue 15): scoring runs, assist runs,
difficulty filters, chains from runs and labels from scoring, and the stage 9
script in docs/api/evaluate.py driven end to end against a scripted
OpenAI-compatible server (jobs run here with execute_job, as the worker would)."""

import importlib.util
import json
from pathlib import Path
from unittest import mock

import pytest
from rest_framework.test import APIClient

from inference.models import AssistRun, InferenceRun, ModelEndpoint, ScoringRun
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from pem.models import ChainOfThought
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.scripted_models import ScriptedHandler, serve

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "api" / "evaluate.py"
STUDENT_ANSWER = "步骤1：由 $x^2=4$ 得 $x=\\pm 2$。\n步骤2：因为 $x>0$，所以 $x=2$。\n最终答案：B"
STEPS_JSON = json.dumps(
    {"steps": [{"step": "由 $x^2=4$ 得 $x=\\pm 2$。", "label": "CS", "reason": "正确"},
               {"step": "因为 $x>0$，所以 $x=2$。", "label": "LRE", "reason": "应检验"}]},
    ensure_ascii=False,
)  # fmt: skip
DIRECT_JSON = json.dumps({"reference_answers": ["B"], "model_answers": ["B"], "scores": [1]})


def load_script():
    spec = importlib.util.spec_from_file_location("evaluate_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Scripted(ScriptedHandler):
    """An OpenAI-compatible server: the model named "judge" judges, any other answers."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        type(self).seen.append(body)
        if body["model"] == "judge":
            asked = json.dumps(body["messages"], ensure_ascii=False)
            reply = STEPS_JSON if "步骤" in asked and "scores" not in asked else DIRECT_JSON
        else:
            reply = STUDENT_ANSWER
        self.send_completion(body, reply, usage=(50, 20))


@pytest.fixture
def model_server(settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*", "http://localhost:*"]
    settings.MODEL_CALL_RETRIES = 1
    Scripted.seen = []
    with serve(Scripted) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _no_broker():
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        yield


def run_queued_jobs(_seconds: float = 0) -> None:
    """What the worker does between two polls."""
    for pk in Job.objects.filter(status=Job.Status.QUEUED).order_by("id").values_list("pk", flat=True):
        execute_job(pk)


class ScriptClient:
    """The script's client interface over DRF's test client."""

    def __init__(self, user):
        self.client = APIClient()
        self.client.force_authenticate(user)

    def _decode(self, reply):
        script = load_script()
        body = reply.json() if reply.content else None
        if reply.status_code >= 400:
            raise script.ApiError(reply.status_code, body)
        return body

    def get(self, path):
        return self._decode(self.client.get(path))

    def post(self, path, data):
        return self._decode(self.client.post(path, data, format="json"))


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def create_endpoints(client: APIClient, base_url: str) -> None:
    for name in ("student", "judge"):
        reply = client.post("/api/endpoints/", {"name": name, "base_url": base_url, "model_name": name}, format="json")
        assert reply.status_code == 201, reply.content


# --- stage 9 end to end ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["step_by_step", "direct"])
def test_the_script_runs_stage_9_end_to_end(researcher, model_server, mode):
    for _ in range(3):
        make_question()
    make_question(subject="physics")
    create_endpoints(api(researcher), model_server)
    script = load_script()
    client = ScriptClient(researcher)
    done = script.evaluate(client, model="student", judge="judge", mode=mode, filters={"subject": "math"},
                           sleep=run_queued_jobs, every=0, log=lambda line: None)  # fmt: skip
    run, scoring_run, board = done["inference_run"], done["scoring_run"], done["leaderboard"]
    assert run["job"]["status"] == "succeeded" and run["counts"] == {"ok": 3, "failed": 0, "pending": 0}
    assert scoring_run["job"]["status"] == "succeeded" and scoring_run["coverage"]["ok"] == 3
    assert scoring_run["method"] == ("judge_steps" if mode == "step_by_step" else "judge_direct")
    (entry,) = board["entries"]
    assert entry["model"] == "student" and entry["mode"] == mode
    assert entry["run"]["inference_run"] == run["id"] and entry["run"]["scoring_run"] == scoring_run["id"]
    expected = 0.5 if mode == "step_by_step" else 1.0  # one step of two correct; every answer right
    assert entry["cells"]["overall"]["mean"] == pytest.approx(expected) and entry["cells"]["overall"]["n"] == 3
    assert [body["model"] for body in Scripted.seen].count("judge") == 3
    lines = script.board_lines(board)
    assert "student" in lines[1] and f"{100 * expected:.1f}%" in lines[1]


def test_the_script_stops_on_a_failed_job(researcher, model_server):
    make_question()
    create_endpoints(api(researcher), model_server)
    script = load_script()

    def fail_the_jobs(_seconds):
        Job.objects.filter(status=Job.Status.QUEUED).update(status=Job.Status.FAILED, error="worker lost")

    with pytest.raises(RuntimeError, match="failed: worker lost"):
        script.evaluate(ScriptClient(researcher), model="student", judge="judge", sleep=fail_the_jobs, every=0,
                        log=lambda line: None)  # fmt: skip
    assert not ScoringRun.objects.exists()


# --- scoring runs ------------------------------------------------------------------------


def answered_run(user, base_url, mode="step_by_step") -> InferenceRun:
    make_question()
    make_question()
    client = api(user)
    create_endpoints(client, base_url)
    student = ModelEndpoint.objects.get(name="student")
    reply = client.post("/api/runs/", {"endpoint": student.pk, "mode": mode}, format="json")
    assert reply.status_code == 201
    run_queued_jobs()
    return InferenceRun.objects.get(pk=reply.json()["id"])


def test_a_scoring_run_is_started_listed_and_read_with_its_judgments(researcher, model_server):
    run = answered_run(researcher, model_server)
    judge = ModelEndpoint.objects.get(name="judge")
    client = api(researcher)
    started = client.post(f"/api/runs/{run.pk}/scoring/", {"judge": judge.pk}, format="json")
    assert started.status_code == 201, started.content
    body = started.json()
    assert body["method"] == "judge_steps" and body["job"]["status"] == "queued" and body["coverage"]["pending"] == 2
    run_queued_jobs()
    detail = client.get(f"/api/scoring/{body['id']}/").json()
    assert detail["job"]["status"] == "succeeded" and detail["coverage"]["ok"] == 2
    assert [s["id"] for s in client.get(f"/api/runs/{run.pk}/scoring/").json()["results"]] == [body["id"]]
    assert [s["id"] for s in client.get("/api/scoring/").json()["results"]] == [body["id"]]
    judgments = client.get(f"/api/scoring/{body['id']}/judgments/").json()["results"]
    assert len(judgments) == 2 and judgments[0]["score"] == 0.5
    assert [(s["position"], s["label"]) for s in judgments[0]["steps"]] == [(1, "CS"), (2, "LRE")]
    rescore = client.post(f"/api/scoring/{body['id']}/rescore/")
    assert rescore.status_code == 202 and rescore.json()["kind"] == "inference.score"


def test_scoring_is_refused_while_the_run_is_still_answering(researcher, model_server, english):
    make_question()
    client = api(researcher)
    create_endpoints(client, model_server)
    run = client.post("/api/runs/", {"endpoint": ModelEndpoint.objects.get(name="student").pk, "mode": "direct"},
                      format="json").json()  # fmt: skip
    judge = ModelEndpoint.objects.get(name="judge")
    refused = client.post(f"/api/runs/{run['id']}/scoring/", {"judge": judge.pk}, format="json")
    assert refused.status_code == 400 and "still answering" in refused.json()["detail"][0]
    assert not ScoringRun.objects.exists()


def test_scoring_runs_stay_with_their_owner(researcher, annotator, model_server):
    run = answered_run(researcher, model_server)
    judge = ModelEndpoint.objects.get(name="judge")
    scoring_id = api(researcher).post(f"/api/runs/{run.pk}/scoring/", {"judge": judge.pk}, format="json").json()["id"]
    rob = api(make_person("rob", Role.RESEARCHER))
    for url in (f"/api/scoring/{scoring_id}/", f"/api/scoring/{scoring_id}/judgments/", f"/api/runs/{run.pk}/scoring/"):
        assert rob.get(url).status_code == 404, url
        assert api(annotator).get(url).status_code == 403, url
    assert rob.get("/api/scoring/").json()["results"] == []
    assert rob.post(f"/api/runs/{run.pk}/scoring/", {"judge": judge.pk}, format="json").status_code == 404
    assert rob.post(f"/api/scoring/{scoring_id}/rescore/").status_code == 404
    assert rob.post(f"/api/runs/{run.pk}/retry/").status_code == 404
    assert ScoringRun.objects.count() == 1


# --- chains from runs, labels from scoring -----------------------------------------------


def test_chains_and_labels_come_from_a_run_and_its_scoring_through_the_api(researcher, model_server):
    run = answered_run(researcher, model_server)
    judge = ModelEndpoint.objects.get(name="judge")
    client = api(researcher)
    chains = client.post("/api/pem/data/from-run/", {"inference_run": run.pk}, format="json")
    assert chains.status_code == 202 and chains.json()["kind"] == "pem.cots_from_run"
    scoring_id = client.post(f"/api/runs/{run.pk}/scoring/", {"judge": judge.pk}, format="json").json()["id"]
    run_queued_jobs()
    assert ChainOfThought.objects.count() == 2
    labels = client.post("/api/pem/data/from-scoring/", {"scoring_run": scoring_id}, format="json")
    assert labels.status_code == 202, labels.content
    run_queued_jobs()
    job = client.get(f"/api/jobs/{labels.json()['id']}/").json()
    assert job["status"] == "succeeded", job
    rob = api(make_person("rob", Role.RESEARCHER))
    assert rob.post("/api/pem/data/from-run/", {"inference_run": run.pk}, format="json").status_code == 404
    assert rob.post("/api/pem/data/from-scoring/", {"scoring_run": scoring_id}, format="json").status_code == 404


def test_labels_need_step_by_step_scoring(researcher, model_server):
    run = answered_run(researcher, model_server, mode="direct")
    judge = ModelEndpoint.objects.get(name="judge")
    client = api(researcher)
    scoring_id = client.post(f"/api/runs/{run.pk}/scoring/", {"judge": judge.pk}, format="json").json()["id"]
    assert client.post("/api/pem/data/from-scoring/", {"scoring_run": scoring_id}, format="json").status_code == 404
    assert client.post("/api/pem/data/from-run/", {"inference_run": run.pk}, format="json").status_code == 404


# --- assist runs and difficulty filters --------------------------------------------------


def test_difficulty_filters_run_preview_and_confirm_through_the_api(researcher, model_server):
    questions = [make_question(), make_question()]
    client = api(researcher)
    create_endpoints(client, model_server)
    student = ModelEndpoint.objects.get(name="student")
    started = client.post("/api/assist/", {"kind": "text_only_filter", "endpoint": student.pk}, format="json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    run_queued_jobs()
    detail = client.get(f"/api/assist/{run_id}/").json()
    assert detail["job"]["status"] == "succeeded" and detail["counts"]["ok"] == 2
    assert [r["id"] for r in client.get("/api/assist/").json()["results"]] == [run_id]
    preview = client.post("/api/difficulty-filters/preview/", {"text_only": run_id}, format="json")
    assert preview.status_code == 200, preview.content
    shown = preview.json()
    assert shown["candidates"] == 2 and [v["run"] for v in shown["evidence"][0]["verdicts"]] == [run_id]
    stale = client.post("/api/difficulty-filters/confirm/", {"text_only": run_id, "fingerprint": "0" * 64},
                        format="json")  # fmt: skip
    assert stale.status_code == 409 and stale.json()["fingerprint"] == shown["fingerprint"]
    confirm = {"text_only": run_id, "fingerprint": shown["fingerprint"]}
    confirmed = client.post("/api/difficulty-filters/confirm/", confirm, format="json")
    assert confirmed.status_code == 202, confirmed.content
    assert all(q.status != "rejected" for q in questions if q.refresh_from_db() is None)  # the job does it
    execute_job(confirmed.json()["id"])
    rejected = {q.pk for q in questions if (q.refresh_from_db() or q.status == "rejected")}
    assert rejected == set(shown["to_remove"])
    rob = api(make_person("rob", Role.RESEARCHER))
    assert rob.get(f"/api/assist/{run_id}/").status_code == 404
    assert rob.post("/api/difficulty-filters/preview/", {"text_only": run_id}, format="json").status_code == 404
    assert AssistRun.objects.count() == 1
