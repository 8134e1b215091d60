"""The PEM-800K screens, API and commands: import, filters with the funnel, exports, training."""

import json
from io import StringIO
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from rest_framework.test import APIClient

from bench.generate import iter_pem
from k12vista.jobs import execute_job
from k12vista.models import Job
from pem.models import ChainOfThought, FilterRun, TrainingExport
from pem.training import exports, jobs
from tests.test_pem800k_export import kept_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def pem_file(records=None) -> bytes:
    records = records or list(iter_pem(0.0001, 3))
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def test_only_researchers_and_admins_see_the_training_screens(login, researcher, annotator, inspector):
    assert login(researcher).get("/pem/training/").status_code == 200
    assert login(annotator).get("/pem/training/").status_code == 403
    assert login(inspector).post("/pem/training/filter/", {}).status_code == 403
    assert login(researcher).post("/pem/training/").status_code == 405


def test_a_researcher_imports_filters_and_reads_the_funnel_in_the_browser(login, researcher):
    client = login(researcher)
    upload = SimpleUploadedFile("pem.jsonl", pem_file(), content_type="application/jsonl")
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        response = client.post("/pem/training/import/", {"file": upload, "name": "pem800k"})
    job = Job.objects.get(kind=jobs.IMPORT)
    assert response["Location"] == f"/jobs/{job.pk}/" and execute_job(job.pk) == Job.Status.SUCCEEDED
    assert ChainOfThought.objects.count() == 84
    form = {"labels": "imported|pem800k", "min_steps": 1, "max_steps": 60, "max_text_mismatch": 0,
            "require_reason": "on", "check_final_answer": "on", "min_models": 3, "target": "", "seed": 0}  # fmt: skip
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        response = client.post("/pem/training/filter/", form)
    run = FilterRun.objects.get()
    assert response["Location"] == f"/pem/training/filters/{run.pk}/"
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    page = client.get(f"/pem/training/filters/{run.pk}/").content.decode()
    run.refresh_from_db()
    assert 'id="funnel"' in page and f"<td>{run.funnel['input']['chains']}</td>" in page
    assert 'class="progress"' in page and 'id="funnel-labels"' in page


def test_the_api_exports_a_filter_run_and_the_files_download_through_the_access_check(researcher, annotator, login):
    run, _ = kept_run(researcher)
    api = APIClient()
    api.force_authenticate(researcher)
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        response = api.post("/api/pem/training/exports/", {"filter_run": run.pk, "formats": ["trl", "qwen"]},
                            format="json")  # fmt: skip
    assert response.status_code == 202, response.content
    export = TrainingExport.objects.get()
    assert execute_job(export.job_id) == Job.Status.SUCCEEDED
    body = api.get(f"/api/pem/training/exports/{export.pk}/").json()
    assert body["status"] == "done" and body["records"] == 3 and "trl.jsonl" in body["files"]
    download = login(researcher).get(f"/pem/training/exports/{export.pk}/files/trl.jsonl")
    assert download.status_code == 200 and b"".join(download.streaming_content).count(b"\n") == 3
    assert login(researcher).get(f"/pem/training/exports/{export.pk}/files/../../secret").status_code == 404
    assert login(annotator).get(f"/pem/training/exports/{export.pk}/files/trl.jsonl").status_code == 403
    api.force_authenticate(annotator)
    assert api.get(f"/api/pem/training/exports/{export.pk}/").status_code == 403


def test_the_api_refuses_bad_filter_parameters_and_training_without_images(researcher, english):
    api = APIClient()
    api.force_authenticate(researcher)
    bad = {"source": "imported", "rater": "x", "params": {"coverage": {"min_models": 0}}}
    response = api.post("/api/pem/training/filter-runs/", bad, format="json")
    assert response.status_code == 400 and "min_models" in response.json()["params"][0]
    run, _ = kept_run(researcher)
    call_command("export_training", str(run.pk), "--formats", "trl", stdout=StringIO())
    export = TrainingExport.objects.get()
    export_dir = exports.export_path(export)
    for image in (export_dir / "images").iterdir():
        image.unlink()
    response = api.post("/api/pem/training/runs/", {"export": export.pk, "base_model": "x"}, format="json")
    assert response.status_code == 400 and "images are missing" in response.json()["export"][0]
    assert export_dir.is_dir()


def test_the_commands_import_filter_and_export(tmp_path):
    path = tmp_path / "pem.jsonl"
    path.write_bytes(pem_file())
    out = StringIO()
    call_command("import_pem800k", str(path), "--name", "pem", stdout=out)
    assert json.loads(out.getvalue())["created"] == 84
    out = StringIO()
    call_command("filter_pem800k", "--rater", "pem", "--params", '{"coverage": {"min_models": 2}}', stdout=out)
    result = json.loads(out.getvalue())
    assert result["funnel"]["input"]["chains"] == 84 and result["kept"] > 0
    out = StringIO()
    call_command("export_training", str(result["filter_run"]), stdout=out)
    exported = json.loads(out.getvalue())
    assert exported["records"] == result["kept"] and set(exported["checked"].values()) == {result["kept"]}
