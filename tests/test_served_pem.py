"""A trained PEM keeps the prompt it learnt on when it is served (issue 29), and a PEM trained on
the K12-PEM-style export, served back, scores step by step in the reference protocol and fills
the leaderboard (issue 24, item 7).

The end-to-end test trains the tests' tiny model for real (TRL in .venv-ml) on the reference-style
export, registers the served form that ``train_pem --register --serve-url`` creates, and scores
with it. The server answering under the served name is a scripted one (tests.scripted_models)
replying in K12-PEM's list-of-lists with Chinese labels: a tiny random model trained for a step
writes no such list, and what is tested is what the studio sends to the served PEM and reads back."""

import json
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.export import reference_record
from inference import prompts, scoring, services, standings
from inference.leaderboard.reference_cells import ALL_TAGS, ALL_TYPES
from inference.models import InferenceRun, ModelEndpoint, PromptTemplate, Protocol, ScoringRun
from inference.reference import board, register
from k12vista.jobs import execute_job
from k12vista.models import Job
from pem.models import FilterRun, TrainingExport, TrainingRun
from pem.training import exports, formats
from tests.model_server import ML_PYTHON
from tests.reference_code import CHECKOUT, needs_reference, prompt_tables
from tests.scripted_models import Servers, user_text
from tests.test_reference_scoring import answered_run

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 1


def api_as(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def trained_prompt() -> PromptTemplate:
    template = "题目：\n${question}\n\n学生解答：\n${model_answer}"
    return prompts.version_with_text(kind="judge_steps_trained", name="PEM", system="你是过程评估模型。",
                                     user_template=template, user=None)  # fmt: skip


def scored(run: InferenceRun, judge: ModelEndpoint, user, protocol=Protocol.STUDIO) -> ScoringRun:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        scoring_run = scoring.start_scoring_run(inference_run=run, judge=judge, method="judge_steps", user=user,
                                                protocol=protocol)  # fmt: skip
    assert execute_job(scoring_run.job_id) == Job.Status.SUCCEEDED
    scoring_run.refresh_from_db()
    return scoring_run


def test_an_openai_endpoint_keeps_the_judge_prompt_it_is_given_and_scores_steps_with_it(servers, researcher):
    own = trained_prompt()
    seen = []

    def pem(body):
        seen.append(body)
        return 200, json.dumps({"steps": [{"step": "x=2", "label": "CS", "reason": ""}]})

    base = servers.start({"pem-7": pem})
    body = {"name": "pem-served", "kind": "openai", "base_url": base, "model_name": "pem-7", "judge_prompt": own.pk}
    reply = api_as(researcher).post("/api/endpoints/", body, format="json")
    assert reply.status_code == 201, reply.content
    assert reply.json()["judge_prompt"] == own.pk
    endpoint = ModelEndpoint.objects.get(name="pem-served")
    assert endpoint.kind == "openai" and endpoint.judge_prompt == own
    result = scored(answered_run("step_by_step", ["步骤1：x=2"]), endpoint, researcher)
    assert {p["id"] for p in result.provenance["prompts"].values()} == {own.pk}
    assert [m["content"] for m in seen[0]["messages"] if m["role"] == "system"] == ["你是过程评估模型。"]
    assert user_text(seen[0]).startswith("题目：\n") and result.judgments.get().score == 1.0


def test_an_unusable_judge_prompt_or_base_url_is_a_400_naming_the_field(researcher, english):
    prompts.ensure_default_prompts()
    direct = prompts.current("judge_direct", "multiple_choice")
    api = api_as(researcher)
    body = {"name": "x", "base_url": "http://127.0.0.1:8001/v1", "model_name": "m"}
    reply = api.post("/api/endpoints/", {**body, "judge_prompt": direct.pk}, format="json")
    assert reply.status_code == 400 and "not a trained judge's prompt" in reply.json()["judge_prompt"][0]
    reply = api.post("/api/endpoints/", {**body, "judge_prompt": 10**9}, format="json")
    assert reply.status_code == 400 and "judge_prompt" in reply.json()
    reply = api.post("/api/endpoints/", {**body, "kind": "transformers"}, format="json")
    assert reply.status_code == 400 and "base URL" in reply.json()["base_url"][0]
    assert not ModelEndpoint.objects.exists()


@needs_reference
def test_a_pem_trained_on_the_reference_prompts_is_scored_in_that_protocol_only(servers, researcher, english):
    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    own = register.reference_prompt("judge_steps", "multiple_choice")
    base = servers.start({"pem": lambda body: (200, "[['x=2', '步骤正确', '对']]")})
    pem = services.save_endpoint(endpoint=ModelEndpoint(name="pem", base_url=base, model_name="pem",
                                                        judge_prompt=own), user=None)  # fmt: skip
    run = answered_run("step_by_step", ["步骤1：x=2"])
    with pytest.raises(scoring.ScoringError, match="reference code"):
        scoring.create_scoring_run(inference_run=run, judge=pem, method="judge_steps", user=researcher)
    studio_pem = services.save_endpoint(endpoint=ModelEndpoint(name="studio-pem", base_url=base, model_name="pem",
                                                               judge_prompt=trained_prompt()), user=None)  # fmt: skip
    with pytest.raises(scoring.ScoringError, match="Studio"):
        scoring.create_scoring_run(inference_run=run, judge=studio_pem, method="judge_steps", user=researcher,
                                   protocol=Protocol.REFERENCE)  # fmt: skip
    assert scored(run, pem, researcher, Protocol.REFERENCE).judgments.get().score == 1.0


@needs_reference
@pytest.mark.slow
def test_a_pem_trained_on_the_k12_pem_style_export_served_back_scores_in_the_reference_protocol(
    servers, researcher, tiny_model_dir, settings, tmp_path
):
    from tests.test_pem_reference_training import kept_run

    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    export = exports.start_export(filter_run=kept_run(researcher), user=researcher, formats_wanted=["trl"],
                                  style=TrainingExport.Style.REFERENCE, min_pixels=784, max_pixels=4096)  # fmt: skip
    exports.write_export(export)
    export.refresh_from_db()

    asked: list[dict] = []

    def served_pem(body):
        asked.append(body)
        if "BAD" in user_text(body):
            return 200, "[['步骤1：x=2'，'运算处理错误'，'算错'], ['步骤2：选 B'，'步骤正确'，'对']]"
        return 200, "[['步骤1：x=2', '步骤正确', '对'], ['步骤2：选 B', '步骤正确', '对']]"

    base = servers.start({"k12-pem-tiny": served_pem})
    out = StringIO()
    call_command("train_pem", str(export.pk), "--base-model", str(tiny_model_dir), "--max-steps", "1", "--register",
                 "pem-served", "--serve-url", base, "--served-name", "k12-pem-tiny", stdout=out)  # fmt: skip
    trained = json.loads(out.getvalue())
    assert trained["global_step"] == 1 and trained["endpoint"] == "pem-served"
    pem = ModelEndpoint.objects.get(name="pem-served")
    assert (pem.kind, pem.base_url, pem.model_name) == ("openai", base, "k12-pem-tiny")
    assert pem.judge_prompt.kind == "judge_steps" and pem.judge_prompt.prompt_set == export.prompt_set
    # The served form is the body of POST /api/endpoints/: posted as printed, it keeps the prompt.
    served = trained["served"]
    assert served["protocol"] == "reference" and "--served-model-name k12-pem-tiny" in served["vllm_serve"]
    reply = api_as(researcher).post("/api/endpoints/", {**served["endpoint"], "name": "pem-posted"}, format="json")
    assert reply.status_code == 201 and reply.json()["judge_prompt"] == pem.judge_prompt_id

    run = answered_run("step_by_step", ["GOOD 步骤1：x=2\n步骤2：选 B", "BAD 步骤1：x=3\n步骤2：选 B"],
                       model="student-7b", user=researcher)  # fmt: skip
    result = scored(run, pem, researcher, Protocol.REFERENCE)
    assert result.protocol == "reference" and result.provenance["prompt_set"] == export.prompt_set
    # Asked as it learnt: the reference's step-judge prompt of the question's type, filled as the
    # export filled it (no system turn, no schema), the figure beside it.
    response = run.responses.get(raw_output__startswith="GOOD")
    record = reference_record(response.question)
    _infer, eval_prompt, _pebench = prompt_tables()
    expected = eval_prompt["step_by_step_eval_prompt"]["选择题"].format(
        question=record["question"], answer=record["format_answer"]["ground_truth"],
        solution=record["format_answer"]["format_solution"], student_answer=response.raw_output,
    )  # fmt: skip
    body = next(b for b in asked if "GOOD" in user_text(b))
    assert [m["role"] for m in body["messages"]] == ["user"] and "response_format" not in body
    assert user_text(body).replace("\n", "") == expected.replace("<image>", "").replace("\n", "")

    good, bad = (result.judgments.get(response__raw_output__startswith=m) for m in ("GOOD", "BAD"))
    assert (good.score, bad.score) == (1.0, 0.5)
    assert list(bad.steps.values_list("label", flat=True)) == ["CE", "CS"]
    entry = standings.board_state("step_by_step").board.entry("student-7b", "step_by_step")
    assert entry is not None and entry.cells["overall"].mean == pytest.approx(0.75)
    [reference_entry] = board.reference_board("step_by_step")
    assert reference_entry.scoring_run == result and reference_entry.cells[ALL_TYPES][ALL_TAGS].mean == 0.75


@needs_reference
def test_a_local_pem_judging_in_the_reference_protocol_leaves_generation_to_the_model(researcher, settings):
    """A transformers-kind PEM scoring in the reference protocol: asked without local_engine's 512-token
    cap (engine_defaults), its K12-PEM replies read as the reference reads them."""
    from inference import engines
    from inference.client import Completion

    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    own = register.reference_prompt("judge_steps", "multiple_choice")
    pem = ModelEndpoint.objects.create(name="pem-cpu", kind="transformers", model_name="/ckpt", judge_prompt=own)
    asked = []

    def local(endpoint, conversations, params, seed=None, *, engine_defaults=False):
        asked.append((params, engine_defaults))
        return [Completion("[['x=2', '步骤正确', '对']]", 1, 10, 4, "stop", 1) for _ in conversations]

    run = answered_run("step_by_step", ["步骤1：x=2"])
    with mock.patch.object(engines, "local_chat_batch", local):
        result = scored(run, pem, researcher, Protocol.REFERENCE)
    assert asked == [({}, True)] and result.judgments.get().score == 1.0


def test_the_endpoint_form_keeps_a_trained_judge_prompt_and_offers_no_other(researcher, login, english):
    own = trained_prompt()
    prompts.ensure_default_prompts()
    studio = prompts.current("judge_steps", "multiple_choice")
    data = {"name": "pem-http", "kind": "openai", "base_url": "http://127.0.0.1:8001/v1", "model_name": "pem-7",
            "max_concurrency": 4, "timeout_seconds": 60, "max_image_side": 1024, "default_params": "{}"}  # fmt: skip
    client = login(researcher)
    page = client.get("/research/endpoints/new/").content.decode()
    assert f'<option value="{own.pk}">' in page and f'<option value="{studio.pk}">' not in page
    assert client.post("/research/endpoints/new/", {**data, "judge_prompt": own.pk}).status_code == 302
    assert ModelEndpoint.objects.get(name="pem-http").judge_prompt == own
    refused = client.post("/research/endpoints/new/", {**data, "name": "other", "judge_prompt": studio.pk})
    assert refused.status_code == 200 and refused.context["form"].errors["judge_prompt"]


def finished_run(researcher) -> TrainingRun:
    """A finished training run of a studio-style export (the checkpoint itself is not read here)."""
    filtered = FilterRun.objects.create(label_source="imported", label_rater="r", finished=timezone.now())
    export = TrainingExport.objects.create(filter_run=filtered, formats=["trl"], status="done", records=1,
                                           min_pixels=784, max_pixels=4096)  # fmt: skip
    return TrainingRun.objects.create(export=export, export_sha256="0" * 64, base_model="tiny", status="done",
                                      checkpoint="pem/runs/1/checkpoint", created_by=researcher)  # fmt: skip


def pem_answering(seen: list):
    def pem(body):
        seen.append(body)
        return 200, json.dumps({"steps": [{"step": "x=2", "label": "CS", "reason": ""}]})

    return pem


def test_the_api_registers_a_training_run_in_its_served_form_and_scoring_keeps_the_trained_prompt(
    servers, researcher, english
):
    run = finished_run(researcher)
    api = api_as(researcher)
    form = api.get(f"/api/pem/training/runs/{run.pk}/").json()["served_form"]
    assert form["served_name"] == f"pem-{run.pk}" and f"--served-model-name pem-{run.pk}" in form["vllm_serve"]
    assert form["base_url"] == "http://<gpu-host>:8000/v1" and form["keeps_trained_prompt"] is True
    assert (form["protocol"], form["prompt_kind"], form["prompt_set"]) == ("studio", "judge_steps_trained", "")
    seen: list[dict] = []
    base = servers.start({"pem-served-7": pem_answering(seen)})
    url = f"/api/pem/training/runs/{run.pk}/endpoint/"
    # Both or neither, and the base URL passes the allowlist as every endpoint's does.
    half = api.post(url, {"name": "pem", "base_url": base}, format="json")
    assert half.status_code == 400 and "served_name" in half.json()["served_name"][0]
    half = api.post(url, {"name": "pem", "served_name": "pem-served-7"}, format="json")
    assert half.status_code == 400 and "base_url" in half.json()
    far = api.post(url, {"name": "pem", "base_url": "http://gpu.elsewhere:9/v1", "served_name": "x"}, format="json")
    assert far.status_code == 400 and "MODEL_URL_ALLOWLIST" in far.json()["base_url"][0]
    assert not ModelEndpoint.objects.exists()

    reply = api.post(url, {"name": "pem", "base_url": base, "served_name": "pem-served-7"}, format="json")
    assert reply.status_code == 201, reply.content
    pem = ModelEndpoint.objects.get(name="pem")
    assert (pem.kind, pem.base_url, pem.model_name) == ("openai", base, "pem-served-7")
    assert reply.json()["endpoint"] == pem.pk and pem.judge_prompt.kind == "judge_steps_trained"
    result = scored(answered_run("step_by_step", ["步骤1：x=2"]), pem, researcher)
    assert {p["id"] for p in result.provenance["prompts"].values()} == {pem.judge_prompt_id}
    assert [m["content"] for m in seen[0]["messages"] if m["role"] == "system"] == [formats.SYSTEM_PROMPT]
    assert result.judgments.get().score == 1.0


def test_the_training_run_page_registers_the_served_form_with_the_trained_prompt(servers, researcher, login, english):
    run = finished_run(researcher)
    client = login(researcher)
    page = client.get(f"/pem/training/runs/{run.pk}/").content.decode()
    assert 'id="served-form"' in page and 'name="base_url"' in page and f'value="pem-{run.pk}"' in page
    base = servers.start({"pem-served-7": pem_answering([])})
    url = f"/pem/training/runs/{run.pk}/endpoint/"
    half = client.post(url, {"name": "pem", "base_url": base}, follow=True)
    assert "served_name" in half.content.decode() and not ModelEndpoint.objects.exists()
    client.post(url, {"name": "pem", "base_url": base, "served_name": "pem-served-7"})
    pem = ModelEndpoint.objects.get(name="pem")
    assert (pem.kind, pem.base_url, pem.model_name) == ("openai", base, "pem-served-7")
    assert pem.judge_prompt.kind == "judge_steps_trained" and pem.judge_prompt.system == formats.SYSTEM_PROMPT
    run.refresh_from_db()
    assert run.endpoint == pem
