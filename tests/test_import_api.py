"""Imports and a draw's questions through the API with a token (issue 29): the same services and access
rules as the imports page and the draw's page."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import CandidateSet, Question, SourceDocument
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests import fixtures_pdf
from tests.annotation_factories import make_question
from tests.test_import_views import reference_lines

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media", "no_broker")]


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_a_question_file_imports_with_a_token_and_reports_through_its_document(researcher, annotator):
    api = token_client(researcher)
    upload = SimpleUploadedFile("bank.jsonl", reference_lines())
    response = api.post("/api/imports/questions/", {"file": upload}, format="multipart")
    assert response.status_code == 202, response.content
    body = response.json()
    assert execute_job(body["job"]["id"]) == Job.Status.SUCCEEDED
    detail = api.get(f"/api/imports/{body['id']}/").json()
    assert detail["questions"] == 3 == Question.objects.count() and detail["job"]["status"] == "succeeded"
    refused = token_client(annotator).post("/api/imports/questions/", {"file": SimpleUploadedFile("b.jsonl", b"{}")},
                                           format="multipart")  # fmt: skip
    assert refused.status_code == 403  # question files are for researchers, as on the page
    assert token_client(annotator).get(f"/api/imports/{body['id']}/").status_code == 404  # not their upload


def test_an_exam_pdf_imports_with_a_token_and_a_bad_file_is_a_400(annotator):
    api = token_client(annotator)
    exam = SimpleUploadedFile("exam.pdf", fixtures_pdf.two_column_exam().pdf)
    response = api.post("/api/imports/pdf/", {"file": exam, "subject": "math", "grade": 9}, format="multipart")
    assert response.status_code == 202, response.content
    document = SourceDocument.objects.get()
    assert response.json()["id"] == document.pk and response.json()["job"]["id"] == document.job_id
    assert execute_job(document.job_id) == Job.Status.SUCCEEDED
    assert api.get(f"/api/imports/{document.pk}/").json()["questions"] == document.questions.count() > 0
    bad = api.post("/api/imports/pdf/", {"file": SimpleUploadedFile("x.pdf", b"not a pdf"), "subject": "math",
                                         "grade": 9}, format="multipart")  # fmt: skip
    assert bad.status_code == 400 and "file" in bad.json()
    grade = api.post("/api/imports/pdf/", {"file": exam, "subject": "math", "grade": 13}, format="multipart")
    assert grade.status_code == 400 and "grade" in grade.json()


def test_the_questions_of_a_draw(researcher, annotator):
    drawn = [make_question(), make_question()]
    make_question()  # not in the draw
    candidate = CandidateSet.objects.create(name="c", seed=1, bank_fingerprint="x")
    candidate.questions.set(drawn)
    api = token_client(researcher)
    response = api.get(f"/api/benchmark/draws/{candidate.pk}/questions/")
    assert response.status_code == 200
    assert sorted(row["hash_id"] for row in response.json()["results"]) == sorted(q.hash_id for q in drawn)
    assert api.get("/api/benchmark/draws/999999/questions/").status_code == 404
    assert token_client(annotator).get(f"/api/benchmark/draws/{candidate.pk}/questions/").status_code == 403
