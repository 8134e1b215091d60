"""The PDF import's consistency report is kept on its document and shown from there on the import
screen; a stopped import is continued from that screen, reusing what it read."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import Flag, Question, SourceDocument
from annotation.pdf.layout import Line
from annotation.pdf.segment import segment
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests import fixtures_pdf
from tests.test_pdf_import import FakeOCR

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


def _upload(client, content: bytes, name: str, django_capture_on_commit_callbacks) -> SourceDocument:
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/annotate/imports/", {"kind": "pdf", "pdf-files": [SimpleUploadedFile(name, content)],
                                           "pdf-subject": "math", "pdf-grade": "9"})  # fmt: skip
    return SourceDocument.objects.latest("id")


def test_the_import_screen_shows_the_report_kept_on_the_document(
    annotator, login, no_broker, django_capture_on_commit_callbacks
):
    client = login(annotator)
    document = _upload(client, fixtures_pdf.gap_paper(), "gap.pdf", django_capture_on_commit_callbacks)
    assert execute_job(Job.objects.latest("id").pk) == Job.Status.SUCCEEDED
    document.refresh_from_db()
    assert document.import_report["report"]["gaps"] == ["3"]
    assert any("Question 3 was not found" in w for w in document.import_report["warnings"])
    Job.objects.filter(pk=document.job_id).update(result={})  # the page reads the document, not the job
    body = client.get(f"/annotate/imports/{document.pk}/").content.decode()
    report = body.split('id="consistency-report"')[1]
    assert 'data-gaps="1"' in body and '<span class="gaps">3</span>' in report
    # Worded in the reader's language from the stored code: Chinese by default, English when chosen.
    assert "未找到第 3 题（在第 2 题与第 4 题之间）。" in body and "was not found" not in body
    client.post("/i18n/setlang/", {"language": "en"})
    english_body = client.get(f"/annotate/imports/{document.pk}/").content.decode()
    assert "Question 3 was not found (between 2 and 4)." in english_body
    # The questions on either side of the gap carry the flag, shown beside them on the same page.
    flagged = Question.objects.filter(flags__code=Flag.Code.IMPORT_GAP).order_by("id")
    assert [q.text[:1] for q in flagged] == ["乙", "丁"]
    assert body.count('data-code="import_gap"') == 2


def test_a_stopped_import_is_continued_from_its_screen_and_reuses_the_ocr(
    annotator, login, no_broker, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.OCR_BACKEND = "tests.test_pdf_import.FakeOCR"
    FakeOCR.calls = 0
    client = login(annotator)
    document = _upload(client, fixtures_pdf.scanned_page(), "scan.pdf", django_capture_on_commit_callbacks)

    def crash(**kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr("annotation.pdf.importer._save_questions", crash)
    assert execute_job(Job.objects.latest("id").pk) == Job.Status.FAILED
    body = client.get(f"/annotate/imports/{document.pk}/").content.decode()
    assert "the disk is full" in body and 'id="import-retry"' in body
    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/annotate/imports/{document.pk}/retry/")
    assert response.status_code == 302 and no_broker.call_count == 2
    retry = Job.objects.latest("id")
    assert retry.params == {"source_document_id": document.pk, "subject": "math", "grade": 9, "reader": "unsure"}
    assert execute_job(retry.pk) == Job.Status.SUCCEEDED
    document.refresh_from_db()
    assert document.error == "" and document.questions.count() == 1 and document.pages.count() == 1
    assert FakeOCR.calls == 1  # the page OCR'd by the stopped run was read back, not OCR'd again
    assert 'id="import-retry"' not in client.get(f"/annotate/imports/{document.pk}/").content.decode()


def test_only_the_uploader_may_continue_an_import_and_never_by_get(
    annotator, other_annotator, login, no_broker, django_capture_on_commit_callbacks
):
    document = _upload(login(other_annotator), fixtures_pdf.gap_paper(), "gap.pdf", django_capture_on_commit_callbacks)
    client = login(annotator)
    assert client.post(f"/annotate/imports/{document.pk}/retry/").status_code == 404
    assert client.get(f"/annotate/imports/{document.pk}/retry/").status_code == 405


def _lines(*texts):
    return [Line(text, (0, i * 20, 100, i * 20 + 12), 1, (1, 0, 0, i * 20)) for i, text in enumerate(texts)]


def test_text_read_into_no_question_is_a_warning_naming_the_questions_on_either_side():
    lost = "某同学用如图所示的装置研究小车的运动，打点计时器所接交流电的频率为 50 Hz。" * 6
    parsed = segment(_lines("一、选择题", "1．下列说法正确的是（  ）", "A．甲 B．乙 C．丙 D．丁", "二、实验题",
                            lost, "3．求小车的加速度。"))  # fmt: skip
    report = parsed.report
    assert report["leftover"] == [{"page": 1, "column": 1, "chars": len(lost)}]
    assert report["suspects"] == ["1", "3"]
    assert {"code": "leftover", "params": {"page": 1, "column": 1, "chars": len(lost)}} in report["reasons"]["3"]


def test_a_figure_that_cannot_be_cropped_is_left_out_and_said_on_its_question(monkeypatch):
    from annotation.pdf import figures, import_document, register_pdf_upload

    real_crop = figures.crop
    calls = {"n": 0}

    def broken_first(page, box):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("code=2: cannot render this object")
        return real_crop(page, box)

    monkeypatch.setattr("annotation.pdf.figures.crop", broken_first)
    document = register_pdf_upload(
        uploaded_file_or_path=SimpleUploadedFile("exam.pdf", fixtures_pdf.two_column_exam().pdf)
    )
    summary = import_document(document=document)
    assert summary.questions == 8 and summary.figures == 1 and summary.failed == []
    flag = Flag.objects.get(code=Flag.Code.IMPORT_ERROR)
    assert "could not be cropped" in flag.message and "cannot render" in flag.message
    assert flag.question.figures.count() == 0 and flag.question.text.startswith("某班四个小组")
