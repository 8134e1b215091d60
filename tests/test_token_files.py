"""Files a page offers download with an API token (issue 29): release files, PEM training exports, the
PEBench zip, audit reports and the leaderboard answer a token client under the page's own access rule,
instead of a redirect to /login/."""

import hashlib

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from k12vista.models import Job
from pem.models import TrainingExport
from tests.test_benchmark_views import published
from tests.test_pem800k_export import kept_run
from tests.test_pem_releases import bench, built  # noqa: F401 - bench is a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


def token_client(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_benchmark_release_file_downloads_with_a_token_and_only_for_researchers(researcher, annotator):
    release = published(researcher)
    url = f"/annotate/benchmark/releases/v{release.version}/files/reference/"
    response = token_client(researcher).get(url)
    assert response.status_code == 200, response.get("Location")
    assert response["X-Checksum-SHA256"] == hashlib.sha256(body(response)).hexdigest()
    assert token_client(annotator).get(url).status_code == 403
    wrong = Client(HTTP_AUTHORIZATION="Token not-a-token").get(url)
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"] == "Token"
    assert Client().get(url).status_code == 302  # a browser without a session still goes to log in


def test_a_training_export_file_downloads_with_a_token(researcher, annotator):
    from pem.training import exports

    run, _ = kept_run(researcher)
    export = exports.start_export(filter_run=run, user=researcher, formats_wanted=["trl"])
    exports.write_export(export)
    export.refresh_from_db()
    assert export.status == TrainingExport.Status.DONE
    url = f"/pem/training/exports/{export.pk}/files/trl.jsonl"
    response = token_client(researcher).get(url)
    assert response.status_code == 200 and body(response).count(b"\n") == 3
    assert token_client(annotator).get(url).status_code == 403


def test_the_pebench_zip_downloads_with_a_token_and_the_blind_rule_holds(researcher, annotator, bench):  # noqa: F811
    release = built(researcher)
    url = f"/pem/releases/v{release.version}/file/"
    response = token_client(researcher).get(url)
    assert response.status_code == 200 and body(response)[:2] == b"PK"
    assert token_client(annotator).get(url).status_code == 403


def test_the_api_download_links_work_for_the_token_client(researcher, bench):  # noqa: F811
    release = built(researcher)
    client = token_client(researcher)
    detail = client.get(f"/api/pem/releases/v{release.version}/").json()
    assert client.get(detail["download"]).status_code == 200


def test_the_leaderboard_download_answers_a_token(researcher):
    response = token_client(researcher).get("/research/leaderboard/download/csv/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert not Job.objects.exists()  # a download starts nothing
