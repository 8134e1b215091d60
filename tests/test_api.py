import base64

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from k12vista.models import Job


def token_client(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_it_authenticates_scripts_with_a_token(researcher):
    response = token_client(researcher).get("/api/me/")
    assert response.status_code == 200
    assert response.json()["roles"] == ["researcher"]


@pytest.mark.django_db
def test_it_refuses_anonymous_and_bad_tokens(api):
    client = api(csrf=True)
    assert client.get("/api/me/").status_code in (401, 403)
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/me/").status_code == 401


def test_it_requires_csrf_for_session_writes(api, researcher):
    job = Job.objects.create(kind="k12vista.worker_check", started_by=researcher)
    client = api(csrf=True)
    client.force_login(researcher, backend="django.contrib.auth.backends.ModelBackend")
    assert client.post(f"/api/jobs/{job.pk}/cancel/").status_code == 403
    job.refresh_from_db()
    assert not job.cancel_requested


def test_it_lists_only_the_callers_jobs(researcher, inspector):
    mine = Job.objects.create(kind="k12vista.worker_check", started_by=researcher)
    theirs = Job.objects.create(kind="k12vista.worker_check", started_by=inspector)
    client = token_client(researcher)
    ids = [row["id"] for row in client.get("/api/jobs/").json()["results"]]
    assert ids == [mine.pk]
    assert client.get(f"/api/jobs/{theirs.pk}/").status_code == 404
    assert client.post(f"/api/jobs/{theirs.pk}/cancel/").status_code == 404


def test_it_cancels_a_job_through_the_api(researcher):
    job = Job.objects.create(kind="k12vista.worker_check", started_by=researcher)
    response = token_client(researcher).post(f"/api/jobs/{job.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"


def test_it_serves_the_openapi_schema_and_docs(researcher, login):
    client = login(researcher)
    schema = client.get("/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"})
    assert schema.status_code == 200
    assert "/api/jobs/{id}/cancel/" in schema.json()["paths"]
    docs = client.get("/api/docs/").content.decode()
    assert "swagger" in docs.lower() and "://" not in docs.split("<body")[0].split("<title")[0]
    assert "cdn" not in docs.lower()


def test_it_rotates_the_api_token_from_the_account_page(researcher, login):
    client = login(researcher)
    first = client.post("/account/token/").context["new_token"]
    second = client.post("/account/token/").context["new_token"]
    assert first != second
    assert list(Token.objects.filter(user=researcher).values_list("key", flat=True)) == [second]


def test_it_generates_a_valid_schema_without_warnings(tmp_path):
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "/api/runs/{id}/responses/" in out.read_text() and "/api/questions/" in out.read_text()


# --- hostile cursors and page sizes (issue 10, finding 8) ------------------------------------


def forged(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


CURSOR_LISTS = ["/api/questions/", "/api/endpoints/", "/api/runs/", "/api/jobs/", "/api/inspect/audits/"]


@pytest.mark.parametrize("url", CURSOR_LISTS)
@pytest.mark.parametrize(
    "cursor", [forged("p=abc"), forged("p=99999999999999999999999"), forged("p=1&r=1&o=x"), "%%%not-base64"]
)
def test_a_forged_cursor_is_a_400_with_a_message(administrator, url, cursor):
    response = token_client(administrator).get(url, {"cursor": cursor})
    assert response.status_code == 400, response.content
    assert "cursor" in response.json()


def test_a_forged_cursor_on_a_nested_list_is_a_400(researcher):
    from inference.models import InferenceRun, ModelEndpoint

    endpoint = ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:8000/v1", model_name="m")
    run = InferenceRun.objects.create(name="r", endpoint=endpoint, mode="direct", created_by=researcher)
    response = token_client(researcher).get(f"/api/runs/{run.pk}/responses/", {"cursor": forged("p=abc")})
    assert response.status_code == 400 and "cursor" in response.json()


@pytest.mark.parametrize(
    ("size", "used"), [("abc", 2), ("-5", 2), ("0", 2), ("1e3", 2), ("99999999999999999999", 3), ("3", 3)]
)
def test_a_bad_page_size_falls_back_to_the_default(administrator, monkeypatch, size, used):
    """A page size that is not a positive whole number gives the default page; one above the
    largest allowed gives the largest (ById's own sizes, shrunk here so a few questions show it)."""
    from k12vista.pagination import ById
    from tests.annotation_factories import make_question

    monkeypatch.setattr(ById, "page_size", 2)
    monkeypatch.setattr(ById, "max_page_size", 3)
    for n in range(4):
        make_question(hash_id=f"q{n}")
    response = token_client(administrator).get("/api/questions/", {"page_size": size})
    assert response.status_code == 200
    assert [row["hash_id"] for row in response.json()["results"]] == [f"q{n}" for n in range(used)]
    assert response.json()["next"] is not None


def test_a_real_cursor_still_pages(administrator):
    from tests.annotation_factories import make_question

    for n in range(3):
        make_question(hash_id=f"q{n}")
    client = token_client(administrator)
    first = client.get("/api/questions/", {"page_size": 2}).json()
    second = client.get(first["next"]).json()
    assert [q["hash_id"] for q in first["results"] + second["results"]] == ["q0", "q1", "q2"]
