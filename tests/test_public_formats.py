"""The public Chinese exam sets imported as they are published (issue 29): GAOKAO-Bench and
GAOKAO-MM wrapper files, their fields and their image references, read from ../shared (never
copied into the repository), with what was mapped and what was guessed in the import report."""

import json
import zipfile
from pathlib import Path

import pytest
from django.utils import translation

from annotation.jsonl_import import import_questions_file, register_upload
from annotation.models import Question

RECORDS = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "records"
BENCH = RECORDS / "GAOKAO-Bench" / "Data" / "Objective_Questions"
MM = RECORDS / "GAOKAO-MM" / "Data"

pytestmark = [
    pytest.mark.skipif(not RECORDS.is_dir(), reason="needs ../shared/realdata/records"),
    pytest.mark.usefixtures("tmp_media", "english"),
]


def published(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_gaokao_bench_file_is_taken_as_published_and_imported(researcher):
    path = BENCH / "2010-2022_Math_I_MCQs.json"
    records = published(path)["example"]

    document = register_upload(path=path, user=researcher)  # refused today: "the first line is not JSON"
    report = import_questions_file(path=document.file.path, user=researcher, source_document=document)

    assert (report.created, report.failed) == (len(records), 0), report.failed_lines
    first = records[0]
    question = Question.objects.get(hash_id=f"2010-2022_Math_I_MCQs-{first['index']}")
    assert (question.subject, question.stage, question.qtype) == ("math", "high", "multiple_choice")
    assert question.grade_known is False  # gaokao gives the stage, not the grade
    assert [o["label"] for o in question.options] == ["A", "B", "C", "D"]
    assert question.options[2]["text"] == "$q_{1}, q_{4}$"
    assert question.answers == first["answer"]
    assert question.raw_solution == first["analysis"]
    assert question.source == f"GAOKAO-Bench {first['year']}{first['category']}"
    assert question.text.startswith("5. （5 分) 已知命题") and "A. $q_{1}" not in question.text

    summary = report.as_dict()
    assert summary["formats"] == {"GAOKAO-Bench": len(records)}
    assert summary["guessed"] == {"type": len(records), "subject_grade_tag": len(records)}
    # Codes, worded on the page.
    assert ["analysis", ["raw_solution", "solution_steps"]] in summary["mapped"]["GAOKAO-Bench"]

    again = import_questions_file(path=path, user=researcher)
    assert (again.created, again.unchanged) == (0, len(records))


def test_every_published_gaokao_bench_subject_imports(researcher):
    for path in sorted(BENCH.glob("*.json")):
        report = import_questions_file(path=path, user=researcher)
        assert report.failed == 0, (path.name, report.failed_lines)
        assert report.created == len(published(path)["example"])
    assert set(Question.objects.values_list("subject", flat=True)) == {
        "math", "physics", "chemistry", "biology", "geography"
    }  # fmt: skip


def test_the_gaokao_mm_data_folder_zipped_as_published_brings_its_pictures(researcher, tmp_path):
    archive = tmp_path / "GAOKAO-MM.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for file in sorted(MM.rglob("*")):
            if file.is_file():
                out.write(file, f"Data/{file.relative_to(MM).as_posix()}")
    expected = sum(len(published(p)["example"]) for p in MM.glob("*.json"))

    document = register_upload(path=archive, user=researcher)
    report = import_questions_file(path=document.file.path, user=researcher)

    assert (report.created, report.failed) == (expected, 0), report.failed_lines
    math = published(MM / "2010-2023_Math_MCQs.json")["example"][0]
    question = Question.objects.get(hash_id=f"2010-2023_Math_MCQs-{math['index']}")
    assert question.figures.count() == len(math["picture"]) == 1
    assert question.answers == ["A"] and len(question.options) == 4
    assert report.as_dict()["formats"] == {"GAOKAO-MM": expected}


def test_a_gaokao_mm_file_alone_names_the_missing_picture(researcher):
    report = import_questions_file(path=MM / "2010-2023_Physics_MCQs.json", user=researcher)
    assert report.created == 0 and report.failed == len(published(MM / "2010-2023_Physics_MCQs.json")["example"])
    assert "picture[0]" in report.failed_lines[0]["reason"]
    assert "zip" in report.failed_lines[0]["reason"]


def test_a_bare_record_names_what_is_missing_once(researcher, tmp_path):
    record = published(BENCH / "2010-2022_Physics_MCQs.json")["example"][0]
    path = tmp_path / "bare.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with translation.override("zh-hans"):
        report = import_questions_file(path=path, user=researcher)
    reason = report.failed_lines[0]["reason"]
    assert reason.count("subject") == 1, reason  # today: “subject”：“subject”：应为文本


def test_a_release_record_names_every_missing_field(researcher, tmp_path):
    path = tmp_path / "release.jsonl"
    line = {"question": "求 $x$。", "subject": "math-g9", "format_answer": {"ground_truth": ["1"]}}
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    report = import_questions_file(path=path, user=researcher)
    reason = report.failed_lines[0]["reason"]
    assert "hash_id" in reason and "type" in reason, reason


def test_the_report_states_the_release_format_as_mapped(researcher, tmp_path):
    path = tmp_path / "release.jsonl"
    line = {"hash_id": "r1", "question": "求 $x$。", "type": "填空题", "subject": "math-g9",
            "format_answer": {"ground_truth": ["1"], "format_solution": "步骤1：$x=1$。"}}  # fmt: skip
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    summary = import_questions_file(path=path, user=researcher).as_dict()
    assert summary["formats"] == {"K12Vista release": 1} and summary["mapped"] == {}
    assert summary["guessed"] == {"grade": 1}


def test_the_import_page_takes_the_published_file_and_says_what_was_guessed(
    researcher, login, django_capture_on_commit_callbacks
):
    from unittest import mock

    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.models import SourceDocument
    from k12vista.jobs import execute_job
    from k12vista.models import Job

    path = BENCH / "2010-2022_Biology_MCQs.json"
    client = login(researcher)
    upload = SimpleUploadedFile(path.name, path.read_bytes(), content_type="application/json")
    with mock.patch("k12vista.tasks.run_job.apply_async"), django_capture_on_commit_callbacks(execute=True):
        response = client.post("/annotate/imports/", {"kind": "file", "file-file": upload})
    document = SourceDocument.objects.get()
    assert response.url == f"/annotate/imports/{document.pk}/", response.content[:500]
    execute_job(Job.objects.latest("id").pk)
    assert Question.objects.filter(subject="biology").count() == len(published(path)["example"])
    body = client.get(response.url).content.decode()
    report = body.split('id="import-formats"')[1]
    assert 'data-format="GAOKAO-Bench"' in report and 'data-mapped="GAOKAO-Bench"' in report
    assert 'data-guessed="type"' in report and 'data-guessed="subject_grade_tag"' in report


def test_the_report_on_the_import_page_reads_in_chinese(researcher, login, tmp_path, settings):
    from annotation.jsonl_import import start_import
    from k12vista.jobs import execute_job
    from tests.test_chinese_pages import read

    settings.LANGUAGE_CODE = "zh-hans"
    path = tmp_path / "release.jsonl"
    line = {"hash_id": "r1", "question": "求 $x$。", "type": "填空题", "subject": "math-g9",
            "format_answer": {"ground_truth": ["1"], "format_solution": "步骤1：$x=1$。"}}  # fmt: skip
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    document = register_upload(path=path, user=researcher)
    execute_job(start_import(document=document, user=researcher).pk)
    client = login(researcher)
    with translation.override("zh-hans"):
        body = client.get(f"/annotate/imports/{document.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    report = body.split('id="import-formats"')[1].split("</dl>")[0]
    assert "K12Vista 发布版" in report and "年级" in report
    assert read(report).found == []

    # A published set's file: its fields' mapping worded in Chinese, its own keys as published.
    gaokao = register_upload(path=BENCH / "2010-2022_Biology_MCQs.json", user=researcher)
    execute_job(start_import(document=gaokao, user=researcher).pk)
    with translation.override("zh-hans"):
        body = client.get(f"/annotate/imports/{gaokao.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    report = body.split('id="import-formats"')[1].split("</dl>")[0]
    mapped = report.split('data-mapped="GAOKAO-Bench"')[1].split("</p>")[0]
    assert '<code translate="no">analysis</code> → 原始解析 + ' in mapped and "raw_solution" not in mapped
    assert read(report).found == []


def test_an_unrelated_json_in_a_published_zip_is_skipped_and_reported(researcher, tmp_path):
    from k12vista.import_files import ImportFileError

    path = BENCH / "2010-2022_Math_I_MCQs.json"
    archive = tmp_path / "bench.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.write(path, f"Data/{path.name}")
        out.writestr("Data/notes.json", "{}")
    report = import_questions_file(path=archive, user=researcher)
    assert report.created == len(published(path)["example"])
    assert [(e["hash_id"], "not a published set" in e["reason"]) for e in report.failed_lines] == [
        ("Data/notes.json", True)
    ]
    alone = tmp_path / "notes.zip"
    with zipfile.ZipFile(alone, "w") as out:
        out.writestr("Data/notes.json", "{}")
    with translation.override("zh-hans"), pytest.raises(ImportFileError) as refused:
        import_questions_file(path=alone, user=researcher)
    assert "notes.json" in str(refused.value) and "公开" in str(refused.value)
