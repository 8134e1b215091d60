"""No 5xx from input (issue 26, items 8-14 and 16): request shapes an attack run answered with a 500.

Each test sends what the attack sent and asserts a 4xx (or a per-row report) instead. Several only
failed on PostgreSQL (which refuses a NUL in text and longer values than a column holds); CI runs
the suite on both databases."""

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation import draw
from annotation.models import Release
from inference.leaderboard import formats
from inference.leaderboard.core import Cell, Entry, Leaderboard, PublishedScore
from inference.models import InferenceRun, ModelEndpoint, PublishedResult
from k12vista import csvfiles
from pem.training.models import FilterRun, TrainingExport
from review import reports
from tests.annotation_factories import make_question
from tests.review_factories import audit_of, bulk_questions, three_inspectors

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def raw_post(client: APIClient, url: str, body: str | bytes):
    """A JSON body sent as it is written, not as the test client would encode it."""
    return client.generic("POST", url, body, content_type="application/json")


# --- 8. NUL in a URL's path ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/annotate/questions/%00/",
        "/api/questions/%00/",
        "/annotate/benchmark/releases/v1/files/%00/",
        "/research/prompts/%00/x/",
        "/media/figures/%00.png",
        "/api/questions/a%00b/",
    ],
)
def test_a_nul_in_a_path_is_a_404(url, researcher):
    make_question(hash_id="q1")
    Release.objects.create(version=1, name="v1", licence="CC-BY-4.0", created_by=researcher)  # its files' kinds
    client = token_client(researcher)
    client.force_login(researcher)
    assert client.get(url).status_code == 404


def test_a_nul_in_a_query_string_is_a_400(researcher):
    client = token_client(researcher)
    assert client.get("/api/questions/", {"q": "a\x00b"}).status_code == 400
    assert client.get("/api/questions/", {"q": "ab"}).status_code == 200


# --- 9. the audit report's type -------------------------------------------------------------


@pytest.fixture
def audit(inspector, annotator):
    bulk_questions(3, subjects=["math"], worker=annotator)
    return audit_of(inspectors=three_inspectors(inspector), per_stratum=3)


@pytest.mark.parametrize("fmt", ['x"; filename="evil.html', "html", "x%0d%0aSet-Cookie: a=b", "csv%00", "x%0a"])
def test_the_audit_report_comes_as_csv_or_json_only(fmt, audit, login, inspector):
    client = login(inspector)
    response = client.get(f"/inspect/audits/{audit.pk}/report.{fmt}")
    assert response.status_code == 404
    assert "evil" not in response.get("Content-Disposition", "")
    for good in ("csv", "json"):
        response = client.get(f"/inspect/audits/{audit.pk}/report.{good}")
        assert response.status_code == 200
        assert response["Content-Disposition"] == f'attachment; filename="audit-{audit.pk}-report.{good}"'


# --- 10. an endpoint's default parameters ----------------------------------------------------

ENDPOINT = {"name": "e", "kind": "openai", "base_url": "http://127.0.0.1:8001/v1", "model_name": "m"}


@pytest.mark.parametrize(
    "params",
    [
        '{"engine": {"a": "\\u0000"}}',
        '{"stop": "\\ud800"}',
        "[1, 2]",
        '"temperature"',
        "3",
        '{"engine": "tensor_parallel_size"}',
    ],
)
def test_the_api_refuses_default_params_that_are_not_an_object_of_storable_values(params, researcher):
    body = '{"name": "e", "kind": "openai", "base_url": "http://127.0.0.1:8001/v1", "model_name": "m", '
    response = raw_post(token_client(researcher), "/api/endpoints/", body + f'"default_params": {params}}}')
    assert response.status_code == 400, response.content
    assert not ModelEndpoint.objects.exists()


@pytest.mark.parametrize(
    "params", ['{"engine": {"a": "\\u0000"}}', '{"stop": "\\ud800"}', "[1, 2]", '"x"', '{"engine": {"a": 1e400}}']
)
def test_the_form_refuses_the_same_default_params(params, researcher, login):
    data = {**ENDPOINT, "max_concurrency": 8, "timeout_seconds": 60, "max_image_side": 1024, "default_params": params}
    response = login(researcher).post("/research/endpoints/new/", data)
    assert response.status_code == 200  # the form again, with its error
    assert response.context["form"].errors["default_params"]
    assert not ModelEndpoint.objects.exists()


def test_good_default_params_are_saved_by_form_and_api(researcher, login):
    response = raw_post(token_client(researcher), "/api/endpoints/", json.dumps({**ENDPOINT, "default_params": {
        "temperature": 0, "engine": {"max_model_len": 4096}}}))  # fmt: skip
    assert response.status_code == 201, response.content
    data = {**ENDPOINT, "name": "f", "max_concurrency": 8, "timeout_seconds": 60, "max_image_side": 1024,
            "default_params": '{"temperature": 0.2}'}  # fmt: skip
    assert login(researcher).post("/research/endpoints/new/", data).status_code == 302
    assert ModelEndpoint.objects.get(name="f").default_params == {"temperature": 0.2}


# --- 11 and 12. one JSON parser for the API: no infinities, no deep nesting ------------------------


def test_infinite_numbers_in_filter_run_and_training_parameters_are_a_400(researcher):
    client = token_client(researcher)
    response = raw_post(client, "/api/pem/training/filter-runs/",
                        '{"source": "imported", "rater": "r", "params": {"min_steps": 1e400}}')  # fmt: skip
    assert response.status_code == 400, response.content
    assert not FilterRun.objects.exists()
    run = FilterRun.objects.create(label_source="imported", label_rater="r", finished=timezone.now())
    export = TrainingExport.objects.create(filter_run=run, min_pixels=1, max_pixels=2, status="done")
    for number in ("1e400", "-1e400", "NaN", "Infinity"):
        body = f'{{"export": {export.pk}, "base_model": "m", "hyperparameters": {{"lr": {number}}}}}'
        response = raw_post(client, "/api/pem/training/runs/", body)
        assert response.status_code == 400, (number, response.content)


@pytest.mark.parametrize("url", ["/api/endpoints/", "/api/pem/training/filter-runs/", "/api/benchmark/draws/"])
def test_a_body_nested_a_hundred_thousand_levels_is_a_400(url, researcher):
    response = raw_post(token_client(researcher), url, "[" * 100_000 + "]" * 100_000)
    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]


def test_a_nul_anywhere_in_an_api_body_is_a_400(researcher):
    response = raw_post(token_client(researcher), "/api/pem/training/filter-runs/",
                        '{"source": "imported", "rater": "r", "params": {"a\\u0000": 1}}')  # fmt: skip
    assert response.status_code == 400
    assert not FilterRun.objects.exists()


# --- 13. published results: lengths per row ------------------------------------------------------


def test_a_published_csv_with_a_long_source_or_model_is_reported_per_row(researcher, login):
    text = ("model,mode,group,score,source\n"
            f"GPT-4o,direct,overall,61.5%,{'s' * 301}\n"
            f"{'m' * 201},direct,overall,50%,paper\n"
            "GPT-4o,step_by_step,overall,50%,pa\x00per\n"
            "GPT-4o,step_by_step,stage:primary,50%,paper\n")  # fmt: skip
    upload = SimpleUploadedFile("p.csv", text.encode(), content_type="text/csv")
    response = login(researcher).post("/research/leaderboard/published/", {"file": upload, "scale": "auto"})
    body = response.content.decode()
    assert response.status_code == 400 and not PublishedResult.objects.exists()
    assert "<td>2</td><td>source is longer than 300 characters" in body
    assert "<td>3</td><td>model is longer than 200 characters" in body
    assert "<td>4</td><td>source holds a NUL" in body


def test_the_published_limits_are_the_columns_lengths():
    from inference.leaderboard import published

    for column, limit in published.MAX_LENGTHS.items():
        assert PublishedResult._meta.get_field(column).max_length == limit


# --- 14. a draw's cell keys ---------------------------------------------------------------------


@pytest.mark.parametrize("key", ["math", "math/x/choice", "math/7", "planet/7/choice", "math/7/essay", "a/b/c/d"])
def test_a_draw_with_a_malformed_cell_key_is_a_400(key, researcher, client, english):
    client.force_login(researcher)
    response = client.post("/api/benchmark/draws/", {"targets": {"cells": {key: 2}}},
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 400, response.content
    assert "cell" in response.content.decode()
    with pytest.raises(draw.DrawError):
        draw.Targets.from_dict({"cells": {key: 2}})


def test_a_well_formed_cell_key_is_taken():
    assert draw.Targets.from_dict({"cells": {"math/7/multiple_choice": 2}}).cells == {"math/7/multiple_choice": 2}


# --- 16. CSV formula injection ------------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://evil")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\rx"]


@pytest.mark.parametrize("value", FORMULAS)
def test_the_csv_helper_neutralises_formula_cells(value):
    out = io.StringIO()
    csvfiles.writer(out).writerow([value, 0.5, -0.25, "-0.25", "1e-05", "ok"])
    row = next(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert row[0] == "'" + value
    assert row[1:] == ["0.5", "-0.25", "-0.25", "1e-05", "ok"]  # numbers stay numbers
    assert csvfiles.read_cell(row[0]) == value


def test_the_leaderboard_csv_neutralises_formulas_and_reads_them_back():
    cell = Cell("overall", 3, 0, 0, 0.5, 0.1, 0.9)
    entry = Entry("=cmd|' /C calc'!A0", "direct", {"overall": cell}, {},
                  {"overall": PublishedScore(0.5, "@SUM(1+1)")})  # fmt: skip
    text = formats.to_csv(Leaderboard((entry,)))
    rows = list(csv.DictReader(line for line in io.StringIO(text, newline="") if not line.startswith("#")))
    assert rows[0]["model"] == "'=cmd|' /C calc'!A0" and rows[0]["published_source"] == "'@SUM(1+1)"
    back = formats.from_csv(text).entries[0]
    assert back.model == entry.model and back.published["overall"].source == "@SUM(1+1)"


def test_the_audit_report_csv_neutralises_formulas():
    report = {"dimensions": ["=x"], "strata": [], "overall": {"rates": {
        "=x": {"n": 1, "successes": 1, "value": 1.0, "ci95": None},
        "all": {"n": 1, "successes": 1, "value": 1.0, "ci95": None}}, "decision": "@bad"}}  # fmt: skip
    rows = list(csv.reader(io.StringIO(reports.report_csv(report), newline="")))
    assert rows[1][1] == "'=x" and rows[1][-1] == "'@bad"


def test_the_leaderboard_download_neutralises_a_published_models_formula(researcher, login):
    PublishedResult.objects.create(model="=HYPERLINK(1)", mode=InferenceRun.Mode.DIRECT, group="overall",
                                   score=0.5, source="+paper")  # fmt: skip
    body = login(researcher).get("/research/leaderboard/download/csv/").content.decode()
    rows = list(csv.reader(line for line in io.StringIO(body, newline="") if not line.startswith("#")))
    cells = [cell for row in rows[1:] for cell in row]
    assert "'=HYPERLINK(1)" in cells and "'+paper" in cells
    assert not any(cell[:1] in csvfiles.FORMULA_STARTS for cell in cells if not csvfiles.is_number(cell))
