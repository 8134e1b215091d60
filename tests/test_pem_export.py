import importlib
import json
import sys
import types
import zipfile
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.vocabulary import TAXONOMY_VERSION
from pem import jobs
from pem.export import ExportError, export_pebench
from pem.models import Adjudication, ChainOfThought, PEBenchBuild, StepLabel
from pem.pebench_import import import_records
from tests.pem_factories import add_to_pebench, label_steps, make_cot


@pytest.fixture(autouse=True)
def _guideline(settings, tmp_media):
    settings.PEM_GUIDELINE_VERSION = "guideline.v3"


@pytest.fixture(autouse=True)
def agreement(monkeypatch):
    """The agreement report is another module's; where it is not written yet, a stand-in says so."""
    try:
        return importlib.import_module("pem.reports").agreement_report
    except ImportError:
        stand_in = types.ModuleType("pem.reports")
        stand_in.agreement_report = lambda cots: {"stand_in": True, "items": cots.count()}
        monkeypatch.setitem(sys.modules, "pem.reports", stand_in)
        return stand_in.agreement_report


@pytest.fixture
def bench(annotator, other_annotator, inspector):
    """Two PEBench items: one decided (gold on every step), one still being labelled."""
    build = PEBenchBuild.objects.create(target_size=2, min_steps=2, strata=["subject"], seed=5, counts={})
    decided = make_cot(steps=["读图得 $AB=4$。", "故 $AC=7$。"], key="q1", model_name="qwen", subject="physics",
                       stage="high", grade=11, qtype="free_response", reference_answer="$5$\n$6$",
                       status=ChainOfThought.Status.GOLD)  # fmt: skip
    open_ = make_cot(steps=["第一步。", "第二步。"], key="q2:7")
    add_to_pebench(decided, open_, build=build)
    label_steps(decided, ["CS", "CE"], rater="alice", user=annotator, explanation="", guideline_version="guideline.v3")
    label_steps(decided, ["CS", "KAE"], rater="amy", user=other_annotator, guideline_version="guideline.v3")
    label_steps(decided, ["CS", "CE"], source="model", rater="judge-72b", explanation="算错")
    label_steps(decided, ["CS", "CE"], source="gold", rater="ivan", user=inspector, explanation="应为 5")
    Adjudication.objects.create(cot=decided, decided_by=inspector, decided=timezone.now(), note="CE, not KAE")
    label_steps(open_, ["CS", None], rater="alice", user=annotator)
    return {"decided": decided, "open": open_, "build": build}


def read_zip(path):
    with zipfile.ZipFile(path) as archive:
        names = sorted(archive.namelist())
        jsonl = {n: [json.loads(line) for line in archive.read(n).splitlines()] for n in names if n.endswith(".jsonl")}
        return names, jsonl, json.loads(archive.read("manifest.json")), json.loads(archive.read("agreement.json"))


@pytest.mark.django_db
def test_it_writes_both_formats_the_agreement_report_and_the_versions(bench, tmp_path, agreement):
    result = export_pebench(out_path=tmp_path / "pebench.zip")
    names, files, manifest, report = read_zip(tmp_path / "pebench.zip")
    assert names == ["agreement.json", "manifest.json", "pebench-reference.jsonl", "pebench.jsonl"]
    assert (result["count"], result["reference_items"], result["items_without_gold"]) == (2, 1, 1)
    # The reference file: gold labels only, and only for items decided on every step.
    assert files["pebench-reference.jsonl"] == [{
        "hash_id": "q1", "question": bench["decided"].question_text, "format_solution": "",
        "ground_truth": ["$5$", "$6$"], "student_infer": bench["decided"].response_text,
        "step_labels": [["读图得 $AB=4$。", "步骤正确", "应为 5"], ["故 $AC=7$。", "运算处理错误", "应为 5"]],
        "img": "", "subject": "physics-g12", "type": "问答题", "model": "qwen",
    }]  # fmt: skip
    ours = {record["key"]: record for record in files["pebench.jsonl"]}
    second = ours["q1"]["steps"][1]
    assert (second["label"], second["gold"]["rater"], second["gold"]["user"]) == ("CE", "ivan", "ivan")
    assert sorted((label["source"], label["rater"], label["label"]) for label in second["labels"]) == [
        ("model", "judge-72b", "CE"), ("person", "alice", "CE"), ("person", "amy", "KAE")]  # fmt: skip
    assert ours["q1"]["adjudication"]["decided_by"] == "ivan" and ours["q1"]["pebench_build"] == bench["build"].pk
    assert ours["q2:7"]["steps"][1]["label"] is None and ours["q2:7"]["status"] == "new"
    assert manifest["taxonomy_version"] == TAXONOMY_VERSION and len(manifest["taxonomy"]) == 9
    assert manifest["guideline_version"] == "guideline.v3" and manifest["guideline_versions_used"] == ["guideline.v3"]
    assert manifest["items_without_gold_listed"] == ["q2:7"] and manifest["builds"][0]["seed"] == 5
    with zipfile.ZipFile(tmp_path / "pebench.zip") as archive:
        import hashlib

        assert manifest["files"]["pebench.jsonl"] == hashlib.sha256(archive.read("pebench.jsonl")).hexdigest()
    expected = json.loads(json.dumps(agreement(ChainOfThought.objects.in_pebench()), default=str))
    assert report == expected


@pytest.mark.django_db
def test_it_refuses_when_an_item_was_used_for_training_and_names_it(bench, tmp_path):
    ChainOfThought.objects.filter(key="q2:7").update(in_training_data=True)
    with pytest.raises(ExportError, match=r"1 PEBench item\(s\) are marked as PEM training data .*: q2:7\."):
        export_pebench(out_path=tmp_path / "pebench.zip")
    assert not list(tmp_path.glob("pebench.zip*"))


@pytest.mark.django_db
def test_it_refuses_to_export_an_empty_pebench(tmp_path):
    with pytest.raises(ExportError, match="no items"):
        export_pebench(out_path=tmp_path / "pebench.zip")


@pytest.mark.django_db
def test_it_exports_files_that_import_back(bench, tmp_path):
    export_pebench(out_path=tmp_path / "pebench.zip")
    with zipfile.ZipFile(tmp_path / "pebench.zip") as archive:
        archive.extractall(tmp_path / "out")
    ChainOfThought.objects.all().delete()
    reference = import_records(path=tmp_path / "out" / "pebench-reference.jsonl", name="ref")
    assert (reference.created, reference.failed) == (1, 0)
    cot = ChainOfThought.objects.get(key="q1")
    assert (cot.subject, cot.stage, cot.qtype, cot.model_name) == ("physics", "high", "free_response", "qwen")
    assert list(StepLabel.objects.filter(step__cot=cot).values_list("label", flat=True)) == ["CS", "CE"]
    ChainOfThought.objects.all().delete()
    ours = import_records(path=tmp_path / "out" / "pebench.jsonl", name="ours")
    assert (ours.created, ours.failed) == (2, 0)
    raters = set(StepLabel.objects.filter(step__cot__key="q1", step__position=2).values_list("rater", "label"))
    assert raters == {("ours", "CE"), ("ours · person:alice", "CE"), ("ours · person:amy", "KAE"),
                      ("ours · model:judge-72b", "CE")}  # fmt: skip


@pytest.mark.django_db
def test_it_exports_as_a_job_with_a_download(bench, researcher, settings):
    job = jobs.start_export(user=researcher, build=bench["build"])
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result["path"] == f"exports/pebench-{job.pk}.zip" and len(job.result["sha256"]) == 64
    assert (settings.MEDIA_ROOT / job.result["path"]).stat().st_size == job.result["bytes"]


@pytest.mark.django_db
def test_it_fails_the_export_job_with_the_training_data_message(bench, researcher):
    ChainOfThought.objects.filter(key="q1").update(in_training_data=True)
    job = jobs.start_export(user=researcher)
    assert execute_job(job.pk) == Job.Status.FAILED
    job.refresh_from_db()
    assert "q1" in job.error and "PEM training data" in job.error


@pytest.mark.django_db
def test_it_starts_the_export_from_the_screen_and_offers_the_download(bench, researcher, annotator, login):
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        response = login(researcher).post("/pem/data/export/", {"build": bench["build"].pk})
    job = Job.objects.get(kind=jobs.EXPORT)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.params == {"build_id": bench["build"].pk}
    execute_job(job.pk)
    page = login(researcher).get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="download"' in page and f"exports/pebench-{job.pk}.zip" in page
    assert login(annotator).post("/pem/data/export/").status_code == 403
    assert login(researcher).post("/pem/data/export/", {"build": 999}).status_code == 302
    assert Job.objects.filter(kind=jobs.EXPORT).count() == 1


@pytest.mark.django_db
def test_it_starts_imports_and_exports_and_builds_from_the_api(bench, researcher, annotator, tmp_path, english):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(researcher)
    line = json.dumps({"hash_id": "api-1", "step_labels": [["一", "CS", ""], ["二", "CE", "x"]]})
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        upload = SimpleUploadedFile("api.jsonl", line.encode())
        started = api.post("/api/pem/data/imports/", {"file": upload}, format="multipart")
        exported = api.post("/api/pem/data/exports/", {"build": bench["build"].pk}, format="json")
    assert started.status_code == 202 and started.json()["kind"] == jobs.IMPORT
    assert exported.status_code == 202 and exported.json()["kind"] == jobs.EXPORT
    assert execute_job(started.json()["id"]) == Job.Status.SUCCEEDED and ChainOfThought.objects.filter(key="api-1")
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        built = api.post("/api/pem/data/builds/", {"target_size": 5, "min_steps": 2, "seed": 3}, format="json")
    assert built.status_code == 202 and built.json()["kind"] == jobs.BUILD
    assert execute_job(built.json()["id"]) == Job.Status.SUCCEEDED
    assert api.get(f"/api/jobs/{built.json()['id']}/").json()["result"]["taken"] == 1
    assert api.post("/api/pem/data/builds/", {"target_size": 0, "min_steps": 2, "seed": 3}).status_code == 400
    bad = api.post("/api/pem/data/imports/", {"file": SimpleUploadedFile("x.txt", b"hello")}, format="multipart")
    assert bad.status_code == 400 and "neither JSONL" in bad.json()["file"][0]
    api.force_authenticate(annotator)
    assert api.post("/api/pem/data/exports/", {}, format="json").status_code == 403
