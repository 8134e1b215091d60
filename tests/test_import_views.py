import json

from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import Question, SourceDocument
from k12vista.jobs import execute_job
from k12vista.models import Job


def reference_lines() -> bytes:
    from bench.generate import iter_questions

    records = [json.dumps(r, ensure_ascii=False) for r in iter_questions(0.0001, seed=3)][:3]
    bad = ['{"hash_id": "x1", "question": "缺少学科", "type": "选择题"}', "not json at all", '{"subject": "music-g9"}']
    return "\n".join([records[0], bad[0], records[1], bad[1], records[2], bad[2]]).encode()


def run_started_job():
    execute_job(Job.objects.latest("id").pk)


def test_it_imports_jsonl_and_reports_bad_lines_by_number(
    researcher, login, no_broker, django_capture_on_commit_callbacks
):
    client = login(researcher)
    upload = SimpleUploadedFile("bank.jsonl", reference_lines(), content_type="application/json")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/annotate/imports/", {"kind": "file", "file-file": upload})
    document = SourceDocument.objects.get()
    assert response.url == f"/annotate/imports/{document.pk}/"
    no_broker.assert_called_once()
    run_started_job()
    assert Question.objects.count() == 3
    body = client.get(response.url).content.decode()
    report = body.split('id="line-errors"')[1]
    for line in ("<td>2</td>", "<td>4</td>", "<td>6</td>"):
        assert line in report
    assert "hx-trigger" not in body.split('id="import-status"')[1].split(">")[0]  # finished: polling stops


def test_it_polls_while_the_import_runs(researcher, login, no_broker):
    client = login(researcher)
    upload = SimpleUploadedFile("bank.jsonl", reference_lines())
    client.post("/annotate/imports/", {"kind": "file", "file-file": upload})
    document = SourceDocument.objects.get()
    fragment = client.get(f"/annotate/imports/{document.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert fragment.startswith('\n<div id="import-status"') or 'id="import-status"' in fragment[:80]
    assert 'hx-trigger="every 1s"' in fragment and "<html" not in fragment


def test_it_refuses_a_file_that_is_neither_jsonl_nor_zip(researcher, login, no_broker):
    upload = SimpleUploadedFile("bank.jsonl", b"\x89PNG\r\n\x1a\n not jsonl")
    response = login(researcher).post("/annotate/imports/", {"kind": "file", "file-file": upload})
    assert response.status_code == 200 and "该文件既不是 JSONL" in response.content.decode()  # the page's language
    assert not SourceDocument.objects.exists()
    no_broker.assert_not_called()


def test_it_keeps_annotators_to_pdf_uploads(annotator, login, no_broker):
    client = login(annotator)
    body = client.get("/annotate/imports/").content.decode()
    assert 'id="pdf-upload"' in body and 'id="file-upload"' not in body
    upload = SimpleUploadedFile("bank.jsonl", reference_lines())
    assert client.post("/annotate/imports/", {"kind": "file", "file-file": upload}).status_code == 403


def test_it_reports_a_pdf_that_is_not_a_pdf_and_starts_nothing(annotator, login, no_broker, english):
    upload = SimpleUploadedFile("paper.pdf", b"just text pretending", content_type="application/pdf")
    response = login(annotator).post(
        "/annotate/imports/", {"kind": "pdf", "pdf-files": [upload], "pdf-subject": "math", "pdf-grade": "9"},
        follow=True,
    )  # fmt: skip
    assert "not a PDF" in response.content.decode()
    assert not SourceDocument.objects.exists()
    no_broker.assert_not_called()


def test_it_starts_one_job_per_uploaded_pdf(annotator, login, no_broker, django_capture_on_commit_callbacks):
    import pymupdf

    files = []
    for name in ("a.pdf", "b.pdf"):
        doc = pymupdf.open()
        doc.new_page().insert_text((72, 72), "1. 计算 1+1=___", fontname="china-s")
        files.append(SimpleUploadedFile(name, doc.tobytes(), content_type="application/pdf"))
    with django_capture_on_commit_callbacks(execute=True):
        login(annotator).post(
            "/annotate/imports/", {"kind": "pdf", "pdf-files": files, "pdf-subject": "physics", "pdf-grade": "8"}
        )
    assert SourceDocument.objects.count() == 2 and no_broker.call_count == 2
    assert {j.params["subject"] for j in Job.objects.all()} == {"physics"}


def test_it_shows_annotators_only_their_own_uploads(annotator, other_annotator, login, no_broker):
    import pymupdf

    doc = pymupdf.open()
    doc.new_page()
    upload = SimpleUploadedFile("mine.pdf", doc.tobytes())
    login(other_annotator).post("/annotate/imports/", {"kind": "pdf", "pdf-files": [upload], "pdf-subject": "math",
                                                       "pdf-grade": "9"})  # fmt: skip
    document = SourceDocument.objects.get()
    client = login(annotator)
    assert client.get(f"/annotate/imports/{document.pk}/").status_code == 404
    assert "mine.pdf" not in client.get("/annotate/imports/").content.decode()


def test_it_exports_the_filtered_questions_for_download(researcher, login, no_broker):
    from tests.annotation_factories import make_question

    make_question(), make_question(subject="physics")
    client = login(researcher)
    response = client.post("/annotate/questions/export/", {"subject": "physics", "fmt": "reference"})
    job = Job.objects.get()
    assert response.url == f"/jobs/{job.pk}/" and job.params == {"filters": {"subject": "physics"}, "fmt": "reference"}
    execute_job(job.pk)
    page = client.get(response.url).content.decode()
    link = page.split('id="download"><a class="button" href="')[1].split('"')[0]
    lines = b"".join(client.get(link).streaming_content).decode().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["subject"].startswith("physics")


def test_it_keeps_exports_from_annotators(annotator, login, no_broker):
    assert login(annotator).post("/annotate/questions/export/", {"fmt": "reference"}).status_code == 403
    assert not Job.objects.exists()


def test_it_exports_only_flagged_questions_when_the_list_is_filtered_by_flag(researcher, login, no_broker):
    from tests.annotation_factories import make_question

    flagged = make_question(answers=[])
    make_question()
    login(researcher).post("/annotate/questions/export/", {"flag": "missing_answer", "fmt": "reference"})
    job = Job.objects.get()
    execute_job(job.pk)
    job.refresh_from_db()
    assert job.result["count"] == 1
    from django.conf import settings

    line = (settings.MEDIA_ROOT / job.result["path"]).read_text(encoding="utf-8")
    assert json.loads(line)["hash_id"] == flagged.hash_id
