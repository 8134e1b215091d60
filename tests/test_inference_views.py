"""The researcher's screens: endpoints, prompts, runs, scoring and the leaderboard."""

import json
from unittest import mock

import pytest
from django.utils import timezone
from django.utils.html import escape

from annotation.models import Question
from inference import leaderboard, prompts, services, standings
from inference.models import (
    InferenceRun,
    JudgedStep,
    Judgment,
    ModelEndpoint,
    PromptTemplate,
    PublishedResult,
    Response,
    ScoringRun,
)
from k12vista.models import Job
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.conftest import make_person

HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def _local_model_servers(settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*", "http://localhost:*"]


@pytest.fixture(autouse=True)
def _in_english(client, settings):
    """The assertions read the English source strings, whatever the translations say."""
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"


@pytest.fixture
def sent():
    """Jobs are started but never sent to a broker."""
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


def make_endpoint(name="qwen", **fields) -> ModelEndpoint:
    fields.setdefault("base_url", "http://127.0.0.1:8000/v1")
    fields.setdefault("model_name", "qwen-vl")
    return services.save_endpoint(endpoint=ModelEndpoint(name=name, **fields), user=None)


def make_run(user, *, endpoint=None, mode="step_by_step", finished=False) -> InferenceRun:
    if not Question.objects.exists():
        make_question()  # a run over no question is refused (issue 29)
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        run = services.start_inference_run(endpoint=endpoint or make_endpoint(), mode=mode, filters={}, user=user)
    if finished:
        Job.objects.filter(pk=run.job_id).update(status=Job.Status.SUCCEEDED)
        run.refresh_from_db()
    return run


def answer(run, question=None, **fields) -> Response:
    fields.setdefault("status", Response.Status.OK)
    fields.setdefault("raw_output", "步骤1：由 $x^2=4$ 得 $x=2$。\n答案：B")
    return Response.objects.create(run=run, question=question or make_question(), **fields)


def scored(run, *, judge=None, labels=("CS", "CE"), score=0.5, name="judged") -> ScoringRun:
    """A step-by-step scoring run with one OK judgment per answer of the run,
    as its finished job leaves it: slices stored for the leaderboard."""
    job = Job.objects.create(kind="inference.score", status=Job.Status.SUCCEEDED, finished_at=timezone.now())
    scoring_run = ScoringRun.objects.create(
        name=name, inference_run=run, judge=judge or run.endpoint, method=ScoringRun.Method.JUDGE_STEPS, job=job
    )
    for response in run.responses.all():
        judgment = Judgment.objects.create(
            scoring_run=scoring_run, response=response, status=Judgment.Status.OK, score=score, parse_status="ok"
        )
        for position, label in enumerate(labels):
            JudgedStep.objects.create(judgment=judgment, position=position, text=f"step {position}", label=label)
    standings.take_snapshot(scoring_run)
    return scoring_run


# --- access -----------------------------------------------------------------------

MANAGEMENT_PAGES = [
    "/research/endpoints/",
    "/research/endpoints/new/",
    "/research/prompts/",
    "/research/prompts/answer_direct/multiple_choice/",
    "/research/runs/",
    "/research/runs/new/",
    "/research/leaderboard/published/",
]
LEADERBOARD_PAGES = [
    "/research/leaderboard/",
    "/research/leaderboard/download/csv/",
    "/research/leaderboard/download/json/",
    "/research/leaderboard/download/latex/",
]


@pytest.mark.parametrize("url", MANAGEMENT_PAGES + LEADERBOARD_PAGES)
def test_it_sends_anonymous_visitors_to_the_login_page(client, url, db):
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/login/")


@pytest.mark.parametrize("url", MANAGEMENT_PAGES + LEADERBOARD_PAGES)
def test_it_keeps_annotators_out(annotator, login, url):
    assert login(annotator).get(url).status_code == 403


@pytest.mark.parametrize("url", MANAGEMENT_PAGES)
def test_it_keeps_inspectors_out_of_the_management_screens(inspector, login, url):
    assert login(inspector).get(url).status_code == 403


@pytest.mark.parametrize("url", LEADERBOARD_PAGES)
def test_it_lets_inspectors_read_the_leaderboard(inspector, login, url):
    assert login(inspector).get(url).status_code == 200


@pytest.mark.parametrize("url", MANAGEMENT_PAGES + LEADERBOARD_PAGES)
def test_it_opens_every_screen_for_administrators(administrator, login, url):
    assert login(administrator).get(url).status_code == 200


def test_it_keeps_annotators_and_inspectors_out_of_a_run_and_its_actions(annotator, inspector, researcher, login):
    run = make_run(researcher)
    answer(run, status=Response.Status.FAILED)
    scoring_run = scored(run)
    for person in (annotator, inspector):
        client = login(person)
        assert client.get(f"/research/runs/{run.pk}/").status_code == 403
        assert client.post(f"/research/runs/{run.pk}/retry/").status_code == 403
        assert client.get(f"/research/scoring/{scoring_run.pk}/").status_code == 403
        assert client.post(f"/research/endpoints/{run.endpoint_id}/deactivate/").status_code == 403
    assert run.responses.get().status == Response.Status.FAILED


def test_it_hides_another_researchers_run(researcher, login, sent):
    run = make_run(researcher)
    answer(run, status=Response.Status.FAILED)
    scoring_run = scored(run)
    client = login(make_person("rob", Role.RESEARCHER))
    assert client.get(f"/research/runs/{run.pk}/").status_code == 404
    assert client.post(f"/research/runs/{run.pk}/retry/").status_code == 404
    assert client.post(f"/research/runs/{run.pk}/score/", {"judge": run.endpoint_id}).status_code == 404
    assert client.get(f"/research/scoring/{scoring_run.pk}/").status_code == 404
    assert client.post(f"/research/scoring/{scoring_run.pk}/rescore/").status_code == 404
    assert run.name not in client.get("/research/runs/").content.decode()
    assert run.responses.get().status == Response.Status.FAILED and not sent.called


def test_it_shows_administrators_every_run(researcher, administrator, login):
    run = make_run(researcher)
    client = login(administrator)
    assert client.get(f"/research/runs/{run.pk}/").status_code == 200
    assert escape(run.name) in client.get("/research/runs/").content.decode()


@pytest.mark.parametrize(
    "url", ["/research/runs/{run}/retry/", "/research/runs/{run}/score/", "/research/endpoints/{endpoint}/deactivate/",
            "/research/scoring/{scoring}/rescore/"],
)  # fmt: skip
def test_it_refuses_get_on_actions(researcher, login, url):
    run = make_run(researcher)
    scoring_run = scored(run)
    path = url.format(run=run.pk, endpoint=run.endpoint_id, scoring=scoring_run.pk)
    assert login(researcher).get(path).status_code == 405


@pytest.mark.parametrize(
    "url", ["/research/runs/{run}/", "/research/scoring/{scoring}/", "/research/leaderboard/",
            "/research/leaderboard/download/csv/", "/research/prompts/answer_direct/any/diff/"],
)  # fmt: skip
def test_it_refuses_post_on_read_only_pages(researcher, login, url):
    run = make_run(researcher)
    scoring_run = scored(run)
    assert login(researcher).post(url.format(run=run.pk, scoring=scoring_run.pk)).status_code == 405


def test_it_links_the_screens_from_the_home_page(researcher, login):
    run = make_run(researcher)
    body = login(researcher).get("/research/").content.decode()
    for url in ("/research/endpoints/", "/research/prompts/", "/research/runs/", "/research/leaderboard/"):
        assert f'href="{url}"' in body
    assert f'href="/research/runs/{run.pk}/"' in body


# --- endpoints ------------------------------------------------------------------------


def endpoint_post(**overrides):
    data = {
        "name": "qwen", "kind": "openai", "base_url": "http://127.0.0.1:8000/v1/", "model_name": "qwen-vl",
        "api_key_env": "K12VISTA_KEY_QWEN", "max_concurrency": 4, "timeout_seconds": 60, "accepts_images": "on",
        "max_image_side": 1024, "supports_json_schema": "on", "default_params": '{"temperature": 0}', "active": "on",
    }  # fmt: skip
    data.update(overrides)
    return data


def test_it_creates_an_endpoint_with_a_checked_url(researcher, login):
    response = login(researcher).post("/research/endpoints/new/", endpoint_post())
    assert response.status_code == 302 and response.url == "/research/endpoints/"
    endpoint = ModelEndpoint.objects.get()
    assert endpoint.base_url == "http://127.0.0.1:8000/v1" and endpoint.created_by == researcher
    assert endpoint.default_params == {"temperature": 0} and endpoint.max_concurrency == 4


@pytest.mark.parametrize("url", ["http://10.0.0.5:8000/v1", "http://169.254.169.254/latest"])
def test_it_shows_an_allowlist_refusal_on_the_url_field(researcher, login, url):
    response = login(researcher).post("/research/endpoints/new/", endpoint_post(base_url=url))
    assert response.status_code == 200
    field_errors = response.context["form"].errors["base_url"]
    assert "MODEL_URL_ALLOWLIST" in field_errors[0]
    assert not ModelEndpoint.objects.exists()


def test_it_refuses_a_pasted_key_in_place_of_a_variable_name(researcher, login):
    response = login(researcher).post("/research/endpoints/new/", endpoint_post(api_key_env="sk-live-abc123"))
    assert "api_key_env" in response.context["form"].errors
    assert not ModelEndpoint.objects.exists()
    assert "sk-live-abc123" not in ModelEndpoint.objects.values_list("api_key_env", flat=True)


def test_it_says_whether_the_key_is_set_without_showing_it(researcher, login, monkeypatch):
    monkeypatch.setenv("K12VISTA_KEY_QWEN", "sk-very-secret-value")
    make_endpoint("with-key", api_key_env="K12VISTA_KEY_QWEN")
    make_endpoint("without-key", api_key_env="K12VISTA_KEY_NOT_SET_ANYWHERE")
    client = login(researcher)
    body = client.get("/research/endpoints/").content.decode()
    assert 'data-key-state="set"' in body and 'data-key-state="missing"' in body
    assert "sk-very-secret-value" not in body
    edit = client.get(f"/research/endpoints/{ModelEndpoint.objects.get(name='with-key').pk}/").content.decode()
    assert 'data-key-state="set"' in edit and "sk-very-secret-value" not in edit


def test_it_edits_an_endpoint(researcher, login):
    endpoint = make_endpoint()
    response = login(researcher).post(f"/research/endpoints/{endpoint.pk}/", endpoint_post(model_name="qwen-vl-72b"))
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.model_name == "qwen-vl-72b"


def test_it_answers_404_for_an_unknown_endpoint(researcher, login):
    client = login(researcher)
    assert client.get("/research/endpoints/999/").status_code == 404
    assert client.post("/research/endpoints/999/deactivate/").status_code == 404


def test_it_switches_an_endpoint_off(researcher, login):
    endpoint = make_endpoint()
    response = login(researcher).post(f"/research/endpoints/{endpoint.pk}/deactivate/")
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert not endpoint.active


def test_it_switches_an_endpoint_off_and_returns_its_row_for_htmx(researcher, login):
    endpoint = make_endpoint()
    response = login(researcher).post(f"/research/endpoints/{endpoint.pk}/deactivate/", headers=HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith(f'<tr id="endpoint-{endpoint.pk}"')
    assert "<html" not in body and "deactivate" not in body
    endpoint.refresh_from_db()
    assert not endpoint.active


# --- prompts -------------------------------------------------------------------------


def test_it_loads_the_default_prompts_on_post_only(researcher, login):
    client = login(researcher)
    body = client.get("/research/prompts/").content.decode()
    assert not PromptTemplate.objects.exists() and 'id="load-defaults"' in body
    assert client.post("/research/prompts/").status_code == 302
    assert PromptTemplate.objects.exists()
    body = client.get("/research/prompts/").content.decode()
    assert 'id="load-defaults"' not in body and "/research/prompts/answer_direct/multiple_choice/" in body


def prompt_post(prompt: PromptTemplate, **overrides):
    data = {"name": prompt.name, "system": prompt.system, "user_template": prompt.user_template}
    data.update(overrides)
    return data


@pytest.fixture
def answer_prompt(db):
    prompts.ensure_default_prompts()
    return prompts.current("answer_direct", "multiple_choice")


def slot_url(prompt: PromptTemplate) -> str:
    return f"/research/prompts/{prompt.kind}/{prompt.qtype or 'any'}/"


def test_it_saves_an_edited_prompt_as_a_new_version(researcher, login, answer_prompt):
    client = login(researcher)
    edited = answer_prompt.user_template + "\n请写出最终答案。"
    response = client.post(slot_url(answer_prompt), prompt_post(answer_prompt, user_template=edited))
    assert response.status_code == 302
    newest = prompts.current(answer_prompt.kind, answer_prompt.qtype)
    assert newest.version == answer_prompt.version + 1 and newest.created_by == researcher
    body = client.get(slot_url(answer_prompt)).content.decode()
    assert newest.content_hash in body and answer_prompt.content_hash in body


def test_it_keeps_the_version_when_nothing_changed(researcher, login, answer_prompt):
    response = login(researcher).post(slot_url(answer_prompt), prompt_post(answer_prompt), follow=True)
    assert "Nothing changed" in response.content.decode()
    assert PromptTemplate.objects.filter(kind=answer_prompt.kind, qtype=answer_prompt.qtype).count() == 1


def test_it_shows_an_unknown_placeholder_and_saves_nothing(researcher, login, answer_prompt):
    data = prompt_post(answer_prompt, user_template="${question}\n${answer_key}")
    response = login(researcher).post(slot_url(answer_prompt), data)
    assert response.status_code == 200 and "${answer_key}" in response.content.decode()
    assert prompts.current(answer_prompt.kind, answer_prompt.qtype).pk == answer_prompt.pk


@pytest.mark.parametrize("path", ["no_such_kind/multiple_choice", "answer_direct/essay"])
def test_it_answers_404_for_unknown_prompt_slots(researcher, login, path):
    assert login(researcher).get(f"/research/prompts/{path}/").status_code == 404


def test_it_shows_a_type_free_prompt_under_any(researcher, login, db):
    prompts.ensure_default_prompts()
    type_free = PromptTemplate.objects.filter(qtype="").first()
    assert login(researcher).get(slot_url(type_free)).status_code == 200


TRAINED_TEMPLATE = "题目：\n${question}\n\n学生解答：\n${model_answer}"


def test_it_shows_a_trained_judges_prompt_read_only_on_its_endpoint_and_prompt_pages(researcher, login, english):
    own = prompts.version_with_text(kind="judge_steps_trained", name="PEM-800K", system="你是过程评估模型。",
                                    user_template=TRAINED_TEMPLATE, user=None)  # fmt: skip
    pem = ModelEndpoint.objects.create(name="pem", kind="transformers", model_name="/ckpt", judge_prompt=own)
    client = login(researcher)
    page = client.get(f"/research/endpoints/{pem.pk}/").content.decode()
    assert f'href="{slot_url(own)}"' in page and "PEM-800K v1" in page
    prompt_page = client.get(slot_url(own)).content.decode()
    assert "你是过程评估模型。" in prompt_page and 'id="prompt-form"' not in prompt_page
    assert client.post(slot_url(own), prompt_post(own, user_template="${question}")).status_code == 405
    assert PromptTemplate.objects.filter(kind="judge_steps_trained").count() == 1
    from inference.api import EndpointOutput

    assert EndpointOutput(pem).data["judge_prompt"] == own.pk  # the API's endpoint list, read-only


def edited_twice(prompt, user):
    edited = prompt.user_template + "\n<script>alert(1)</script> $x^2$"
    return prompts.save_version(kind=prompt.kind, qtype=prompt.qtype, name=prompt.name, system=prompt.system,
                                user_template=edited, user=user)  # fmt: skip


def test_it_diffs_two_versions_as_escaped_text(researcher, login, answer_prompt):
    newer = edited_twice(answer_prompt, researcher)
    url = f"{slot_url(answer_prompt)}diff/?a={answer_prompt.version}&b={newer.version}"
    body = login(researcher).get(url).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert escape("+<script>alert(1)</script> $x^2$") in body and 'data-diff="+"' in body


def test_it_returns_only_the_diff_for_htmx(researcher, login, answer_prompt):
    newer = edited_twice(answer_prompt, researcher)
    url = f"{slot_url(answer_prompt)}diff/?a={answer_prompt.version}&b={newer.version}"
    response = login(researcher).get(url, headers=HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="diff">') and "<html" not in body
    assert response["Vary"] and "HX-Request" in response["Vary"]


@pytest.mark.parametrize("query", ["a=1&b=99", "a=x&b=1", ""])
def test_it_answers_404_for_versions_that_do_not_exist(researcher, login, answer_prompt, query):
    assert login(researcher).get(f"{slot_url(answer_prompt)}diff/?{query}").status_code == 404


# --- runs ------------------------------------------------------------------------------


def test_it_shows_the_run_form_with_the_question_filters(researcher, login):
    make_endpoint()
    body = login(researcher).get("/research/runs/new/").content.decode()
    for name in ("endpoint", "mode", "input_form", "subject", "grade", "stage", "qtype", "status", "temperature",
                 "max_tokens", "top_p", "seed", "name"):  # fmt: skip
        assert f'name="{name}"' in body


def test_it_starts_a_run_from_the_form(researcher, login, sent):
    endpoint = make_endpoint()
    make_question(), make_question(subject="physics", grade=8)
    data = {"endpoint": endpoint.pk, "mode": "direct", "input_form": "images", "subject": "math", "grade": "9",
            "temperature": "0.2", "max_tokens": "512", "seed": "7", "name": "math g9"}  # fmt: skip
    response = login(researcher).post("/research/runs/new/", data)
    run = InferenceRun.objects.get()
    assert response.status_code == 302 and response.url == f"/research/runs/{run.pk}/"
    assert run.filters == {"subject": "math", "grade": 9} and run.seed == 7 and run.name == "math g9"
    assert run.params == {"temperature": 0.2, "max_tokens": 512}
    assert run.provenance["questions"]["count"] == 1 and run.created_by == researcher
    assert run.job.kind == "inference.run"


def test_it_shows_an_endpoint_refusal_on_the_run_form(researcher, login, sent, monkeypatch):
    # an API key variable that is not set: start_inference_run names it and the form shows it
    monkeypatch.delenv("K12VISTA_KEY_TEST_UNSET", raising=False)
    closed = make_endpoint("closed", api_key_env="K12VISTA_KEY_TEST_UNSET")
    data = {"endpoint": closed.pk, "mode": "direct", "input_form": "images"}
    response = login(researcher).post("/research/runs/new/", data)
    assert response.status_code == 200
    assert "K12VISTA_KEY_TEST_UNSET" in response.context["form"].errors["endpoint"][0]
    assert not InferenceRun.objects.exists()


def test_a_transformers_endpoint_runs_on_a_cpu_worker(researcher, login, sent):
    make_question()
    engine = make_endpoint("small", kind=ModelEndpoint.Kind.TRANSFORMERS, base_url="", model_name="/models/tiny")
    data = {"endpoint": engine.pk, "mode": "direct", "input_form": "images"}
    response = login(researcher).post("/research/runs/new/", data)
    run = InferenceRun.objects.get()
    assert response.status_code == 302 and run.job.kind == "inference.run_local" and run.job.queue == "cpu"


def test_it_refuses_a_switched_off_endpoint_on_the_run_form(researcher, login, sent):
    endpoint = make_endpoint()
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(active=False)
    data = {"endpoint": endpoint.pk, "mode": "direct", "input_form": "images"}
    response = login(researcher).post("/research/runs/new/", data)
    assert "endpoint" in response.context["form"].errors and not InferenceRun.objects.exists()


def test_it_lists_runs_with_their_counts(researcher, login):
    run = make_run(researcher)
    answer(run), answer(run), answer(run, status=Response.Status.FAILED)
    body = login(researcher).get("/research/runs/").content.decode()
    assert escape(run.name) in body and "<td>2</td><td>1</td><td>0</td>" in body


def test_it_shows_a_run_with_progress_counts_provenance_and_answers(researcher, login):
    run = make_run(researcher)
    answer(run, latency_ms=812, prompt_tokens=100, completion_tokens=42, finish_reason="stop")
    answer(run, status=Response.Status.FAILED, raw_output="", error="HTTP 503 <server busy>")
    answer(run, raw_output="<img src=x onerror=alert(1)> $\\frac{1}{2}$")
    body = login(researcher).get(f"/research/runs/{run.pk}/").content.decode()
    assert f'id="job-{run.job_id}"' in body and f"/jobs/{run.job_id}/cancel/" in body
    assert 'data-count="ok">answered 2' in body and 'data-count="failed">failed 1' in body
    assert run.provenance["prompts"]["multiple_choice"]["hash"] in body and "qwen-vl" in body
    assert "812" in body and "stop" in body and escape("HTTP 503 <server busy>") in body
    assert "<img src=x" not in body and escape("<img src=x onerror=alert(1)>") in body
    assert 'data-math style="white-space: pre-wrap">步骤1：由 $x^2=4$ 得 $x=2$。' in body
    assert 'id="retry-form"' in body and 'id="score-form"' in body


def test_it_pages_answers_by_id_and_returns_rows_for_htmx(researcher, login, monkeypatch):
    monkeypatch.setattr("k12vista.pagination.PAGE_SIZE", 2)
    run = make_run(researcher)
    rows = [answer(run) for _ in range(3)]
    client = login(researcher)
    first = client.get(f"/research/runs/{run.pk}/").content.decode()
    assert f'id="response-{rows[1].pk}"' in first and f'id="response-{rows[2].pk}"' not in first
    assert f"?after={rows[1].pk}" in first
    more = client.get(f"/research/runs/{run.pk}/?after={rows[1].pk}", headers=HTMX).content.decode()
    assert f'id="response-{rows[2].pk}"' in more and f'id="response-{rows[0].pk}"' not in more
    assert "<html" not in more and "more-responses" not in more


def test_it_retries_the_failed_answers(researcher, login, sent):
    run = make_run(researcher, finished=True)  # a run still answered is not retried
    ok, failed = answer(run), answer(run, status=Response.Status.FAILED, error="timeout")
    first_job = run.job_id
    response = login(researcher).post(f"/research/runs/{run.pk}/retry/")
    assert response.status_code == 302 and response.url == f"/research/runs/{run.pk}/"
    failed.refresh_from_db(), ok.refresh_from_db(), run.refresh_from_db()
    assert failed.status == Response.Status.PENDING and failed.error == "" and ok.status == Response.Status.OK
    assert run.job_id != first_job


def test_it_starts_scoring_a_finished_run(researcher, login, sent):
    run = make_run(researcher, finished=True)
    answer(run)
    judge = make_endpoint("judge")
    response = login(researcher).post(f"/research/runs/{run.pk}/score/", {"judge": judge.pk, "method": "judge_steps"})
    scoring_run = ScoringRun.objects.get()
    assert response.status_code == 302 and response.url == f"/research/scoring/{scoring_run.pk}/"
    assert scoring_run.inference_run == run and scoring_run.judge == judge and scoring_run.job.kind == "inference.score"


def test_it_explains_why_scoring_did_not_start(researcher, login, sent):
    run = make_run(researcher, finished=True)
    answer(run)
    data = {"judge": run.endpoint_id, "method": "judge_direct"}  # a step-by-step run
    response = login(researcher).post(f"/research/runs/{run.pk}/score/", data, follow=True)
    assert "Scoring was not started" in response.content.decode() and not ScoringRun.objects.exists()


def test_it_refuses_scoring_with_an_unknown_judge(researcher, login, sent):
    run = make_run(researcher, finished=True)
    response = login(researcher).post(f"/research/runs/{run.pk}/score/", {"judge": 999, "method": "judge_steps"})
    assert response.status_code == 302 and not ScoringRun.objects.exists()


# --- scoring ---------------------------------------------------------------------------


def test_it_shows_coverage_judgments_and_labelled_steps(researcher, login):
    run = make_run(researcher, finished=True)
    answer(run), answer(run)
    scoring_run = scored(run, labels=("CS", "CE"))
    failed = Judgment.objects.filter(scoring_run=scoring_run).last()
    Judgment.objects.filter(pk=failed.pk).update(status=Judgment.Status.PARSE_FAILED, score=None,
                                                 parse_status="failed", error="no JSON <found>")  # fmt: skip
    JudgedStep.objects.filter(judgment=failed).delete()
    body = login(researcher).get(f"/research/scoring/{scoring_run.pk}/").content.decode()
    assert "<strong>1 / 2</strong>" in body and 'data-count="parse_failed">output not understood 1' in body
    assert "0.500" in body and escape("no JSON <found>") in body
    assert 'class="label-code"' in body and '运算处理错误 / <span lang="en">Calculation error</span>' in body
    assert '步骤正确 / <span lang="en">Correct step</span>' in body
    assert f"/jobs/{run.job_id}/" not in body  # the scoring run's job, not the inference run's
    assert 'id="rescore-form"' in body


def test_it_returns_judgment_rows_for_htmx(researcher, login):
    run = make_run(researcher, finished=True)
    answer(run)
    scoring_run = scored(run)
    body = login(researcher).get(f"/research/scoring/{scoring_run.pk}/", headers=HTMX).content.decode()
    assert body.lstrip().startswith('<tr id="judgment-') and "<html" not in body


def test_it_rescores_the_failed_judgments(researcher, login, sent):
    run = make_run(researcher, finished=True)
    answer(run)
    scoring_run = scored(run)
    scoring_run.judgments.update(status=Judgment.Status.CALL_FAILED, score=None, error="503")
    response = login(researcher).post(f"/research/scoring/{scoring_run.pk}/rescore/")
    assert response.status_code == 302
    scoring_run.refresh_from_db()
    assert scoring_run.judgments.get().status == Judgment.Status.PENDING and scoring_run.job.kind == "inference.score"


# --- leaderboard -------------------------------------------------------------------------


@pytest.fixture
def board(researcher):
    """One step-by-step model with two scored answers and a published number beside it."""
    run = make_run(researcher, endpoint=make_endpoint("<b>Qwen</b>"), finished=True)
    answer(run, Question.objects.get()), answer(run)  # the question make_run asked about, and one more
    scored(run, labels=("CS", "CE", "HE"), score=0.5)
    PublishedResult.objects.create(model="<b>Qwen</b>", mode="step_by_step", group="overall", score=0.612,
                                   source="K12Vista paper, Table 7")  # fmt: skip
    return run


def test_it_shows_scores_coverage_and_published_numbers(inspector, login, board):
    body = login(inspector).get("/research/leaderboard/?mode=step_by_step").content.decode()
    assert "<b>Qwen</b>" not in body and escape("<b>Qwen</b>") in body
    assert "<strong>50.0</strong>" in body and "2/2 (100%)" in body
    assert 'data-published title="K12Vista paper, Table 7">published 61.2' in body
    for grouping in ("overall", "stage", "subject", "type", "cell"):
        assert f'id="scores-{grouping}"' in body
    assert 'data-code="CE"' in body and "width: 50.00%" in body and "幻觉错误 / Hallucination error" in body
    # The only scripts in the body are chart data islands: JSON, never run, with "<" escaped inside.
    page_body = body.split("</head>")[1]
    assert (
        page_body.count("<script")
        == page_body.count('<script id="chart-')
        == page_body.count('type="application/json"')
    )
    assert "<b>Qwen</b>" not in page_body and "\\u003Cb\\u003EQwen" in page_body
    assert 'id="published-form"' not in body and "/research/leaderboard/published/" not in body


def test_it_switches_modes_and_returns_the_board_for_htmx(researcher, login, board):
    client = login(researcher)
    direct = client.get("/research/leaderboard/?mode=direct", headers=HTMX)
    body = direct.content.decode()
    assert body.lstrip().startswith('<div id="board">') and "<html" not in body
    assert "No labelled steps in this mode yet." in body and "<strong>50.0</strong>" not in body
    assert "HX-Request" in direct["Vary"]
    # an unknown mode falls back to the first
    assert 'aria-current="page">Direct' in client.get("/research/leaderboard/?mode=nonsense").content.decode()


def test_it_downloads_csv(inspector, login, board):
    response = login(inspector).get("/research/leaderboard/download/csv/")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="k12vista-leaderboard.csv"'
    lines = [line for line in response.content.decode().splitlines() if not line.startswith("# ")]
    assert lines[0].startswith("model,mode,group,in_release,n,")
    assert lines[1].startswith("<b>Qwen</b>,step_by_step,overall,true,2,")


def test_it_downloads_json(inspector, login, board):
    response = login(inspector).get("/research/leaderboard/download/json/")
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].endswith('filename="k12vista-leaderboard.json"')
    document = json.loads(response.content)
    entry = document["entries"][0]
    assert document["format"] == "k12vista-leaderboard.v2" and entry["cells"]["overall"]["mean"] == 0.5
    assert entry["published"]["overall"]["score"] == 0.612


def test_it_downloads_latex_for_a_mode_and_grouping(inspector, login, board):
    response = login(inspector).get("/research/leaderboard/download/latex/?mode=step_by_step&grouping=subject")
    assert response["Content-Type"] == "application/x-tex; charset=utf-8"
    assert response["Content-Disposition"].endswith('filename="k12vista-leaderboard.tex"')
    text = response.content.decode()
    assert text.startswith("% time_rule: ") and "\\begin{table}" in text
    assert "Math" in text and "\\textbf{50.00}" in text


def test_the_page_and_every_download_state_each_definition(inspector, login, board):
    client = login(inspector)
    page = client.get("/research/leaderboard/?mode=step_by_step").content.decode()
    csv_text = client.get("/research/leaderboard/download/csv/").content.decode()
    document = json.loads(client.get("/research/leaderboard/download/json/").content)
    for grouping in leaderboard.LATEX_GROUPINGS:
        latex = client.get(f"/research/leaderboard/download/latex/?mode=step_by_step&grouping={grouping}")
        for key, text in leaderboard.DEFINITIONS.items():
            assert f"% {key}: {text}" in latex.content.decode()
    for key, text in leaderboard.DEFINITIONS.items():
        assert f'data-definition="{key}"' in page and escape(text) in page
        assert f"# {key}: {text}" in csv_text
        assert document["definitions"][key] == text
    assert "correct steps (CS) are excluded" in page and "Student-t" in page and "clipped to [0, 1]" in page
    assert document["time_rule"] == "snapshot" and "Snapshot rule" in page


def test_each_entry_names_and_links_its_runs_and_shows_an_unfinished_rescoring_beside(researcher, login, board):
    finished = ScoringRun.objects.get(inference_run=board)
    running = Job.objects.create(kind="inference.score", status=Job.Status.RUNNING)
    going = ScoringRun.objects.create(
        name="rescoring now", inference_run=board, judge=board.endpoint, method=finished.method, job=running
    )
    body = login(researcher).get("/research/leaderboard/?mode=step_by_step").content.decode()
    assert f'href="/research/runs/{board.pk}/"' in body and f'href="/research/scoring/{finished.pk}/"' in body
    assert f'data-not-counted="{going.pk}"' in body and "rescoring now: running" in body
    assert "<strong>50.0</strong>" in body  # the finished run's numbers, not the running one's
    document = json.loads(login(researcher).get("/research/leaderboard/download/json/").content)
    run = document["entries"][0]["run"]
    assert (run["inference_run"], run["scoring_run"], run["not_counted"][0]["status"]) == (
        board.pk, finished.pk, "running",
    )  # fmt: skip


def test_it_shows_the_grid_with_coverage_and_cells_outside_the_release_in_their_own_column(
    inspector, login, researcher
):
    run = make_run(researcher, finished=True)
    answer(run, make_question(subject="physics", grade=5, qtype="fill_in_blank"))
    answer(run, make_question(subject="math", grade=8, qtype="multiple_choice"))
    scored(run, labels=("CS", "CE"), score=0.5)
    body = login(inspector).get("/research/leaderboard/?mode=step_by_step").content.decode()
    grid = body.split('id="scores-grid"')[1].split('id="error-charts"')[0]
    assert "physics-g6 §" in grid and "data-outside" in grid and "1/1 (100%)" in grid
    cells = body.split('id="scores-cell"')[1].split('id="scores-grid"')[0]
    assert "physics-g6 §" in cells
    assert 'data-group="grid:fill_in_blank:physics-g6"' in body  # its error distribution
    latex = login(inspector).get("/research/leaderboard/download/latex/?mode=step_by_step&grouping=grid").content
    assert "physics-g6\\S" in latex.decode() and "Outside the release" in latex.decode()


def test_a_researcher_pins_a_finished_scoring_run_and_unpins_it(researcher, login, board):
    first = ScoringRun.objects.get(inference_run=board)
    second = scored(board, score=1.0, name="second judge")
    client = login(researcher)
    assert "<strong>100.0</strong>" in client.get("/research/leaderboard/?mode=step_by_step").content.decode()
    response = client.post("/research/leaderboard/pin/", {"scoring_run": first.pk})
    assert response.status_code == 302 and response.url == "/research/leaderboard/?mode=step_by_step"
    body = client.get("/research/leaderboard/?mode=step_by_step").content.decode()
    assert "<strong>50.0</strong>" in body and "data-pinned" in body and 'class="pin-form"' in body
    assert client.post(f"/research/leaderboard/unpin/{board.pk}/").status_code == 302
    body = client.get("/research/leaderboard/?mode=step_by_step").content.decode()
    assert "<strong>100.0</strong>" in body and "data-pinned" not in body
    assert f'data-scoring-run="{second.pk}"' in body


def test_it_keeps_inspectors_and_strangers_from_pinning(inspector, login, board, db):
    scoring_run = ScoringRun.objects.get(inference_run=board)
    assert login(inspector).post("/research/leaderboard/pin/", {"scoring_run": scoring_run.pk}).status_code == 403
    stranger = make_person("stranger", Role.RESEARCHER)
    assert login(stranger).post("/research/leaderboard/pin/", {"scoring_run": scoring_run.pk}).status_code == 404
    assert login(stranger).post("/research/leaderboard/pin/", {"scoring_run": "x"}).status_code == 404


@pytest.mark.parametrize("path", ["download/xlsx/", "download/latex/?grouping=nonsense"])
def test_it_answers_404_for_unknown_downloads(inspector, login, path):
    assert login(inspector).get(f"/research/leaderboard/{path}").status_code == 404


PUBLISHED_CSV = """model,mode,group,score,source
GPT-4o,direct,overall,61.5%,paper
GPT-4o,step_by_step,stage:primary,55,paper
"""


def upload(text: str, name="published.csv"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def test_it_imports_published_results_and_replaces_them_on_reimport(researcher, login):
    client = login(researcher)
    response = client.post("/research/leaderboard/published/", {"file": upload(PUBLISHED_CSV), "scale": "auto"})
    assert response.status_code == 302
    row = PublishedResult.objects.get(mode="direct")
    assert row.score == pytest.approx(0.615) and row.imported_by == researcher
    again = PUBLISHED_CSV.replace("61.5%", "63%")
    client.post("/research/leaderboard/published/", {"file": upload(again), "scale": "auto"})
    assert PublishedResult.objects.count() == 2 and PublishedResult.objects.get(mode="direct").score == 0.63
    assert "stage:primary" in client.get("/research/leaderboard/published/").content.decode()


def test_it_lists_every_bad_line_and_imports_nothing(researcher, login):
    bad = PUBLISHED_CSV + "GPT-4o,sideways,overall,50,paper\n,direct,planet:mars,abc,\n"
    response = login(researcher).post("/research/leaderboard/published/", {"file": upload(bad), "scale": "auto"})
    body = response.content.decode()
    assert response.status_code == 400 and not PublishedResult.objects.exists()
    assert "<td>4</td><td>unknown mode" in body and "<td>5</td><td>missing model" in body


def test_it_refuses_a_csv_without_the_columns(researcher, login):
    data = {"file": upload("a,b\n1,2\n"), "scale": "auto"}
    response = login(researcher).post("/research/leaderboard/published/", data)
    assert response.status_code == 400 and "missing column(s)" in response.content.decode()


def test_it_keeps_inspectors_from_importing_published_results(inspector, login):
    response = login(inspector).post("/research/leaderboard/published/", {"file": upload(PUBLISHED_CSV)})
    assert response.status_code == 403 and not PublishedResult.objects.exists()
