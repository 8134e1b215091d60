"""PDF import: the test papers are built at test time by tests/fixtures_pdf.py."""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db.models.fields.files import FieldFile
from PIL import Image

from annotation import ocr
from annotation.models import Figure, Page, Question, SourceDocument
from annotation.pdf import PdfImportError, import_document, importer, register_pdf_upload, start_pdf_import
from annotation.pdf.layout import Line, Span, line_text
from annotation.pdf.segment import segment, split_answer
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests import fixtures_pdf

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


@pytest.fixture(scope="module")
def exam():
    return fixtures_pdf.two_column_exam()


def upload(content: bytes, name: str = "exam.pdf", user=None) -> SourceDocument:
    return register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile(name, content), user=user)


@pytest.fixture
def imported(exam, annotator):
    document = upload(exam.pdf, user=annotator)
    summary = import_document(document=document, subject="math", grade=9)
    return document, summary, list(Question.objects.filter(source_document=document).order_by("id"))


def by_number(questions, number):
    """Questions are created in paper order, so the n-th one is question n."""
    return questions[number - 1]


# --- the two-column paper ------------------------------------------------------------


def test_it_finds_every_question_with_its_type_from_the_section(imported):
    document, summary, questions = imported
    assert summary.pages == 2 and summary.questions == 8 and summary.ocr_pages == 0
    assert [q.qtype for q in questions] == ["multiple_choice"] * 4 + ["fill_in_blank"] * 2 + ["free_response"] * 2
    assert all(q.status == Question.Status.IMPORTED and q.subject == "math" and q.grade == 9 for q in questions)
    document.refresh_from_db()
    assert document.page_count == 2 and document.error == ""


def test_it_splits_options_on_one_line_two_lines_and_one_a_line(imported):
    questions = imported[2]
    assert by_number(questions, 1).options == [
        {"label": "A", "text": "2"}, {"label": "B", "text": "-2"},
        {"label": "C", "text": "±2"}, {"label": "D", "text": "4"},
    ]  # fmt: skip
    assert [o["text"] for o in by_number(questions, 2).options] == ["第一组", "第二组", "第三组", "第四组"]
    assert [o["text"] for o in by_number(questions, 3).options] == ["14", "20", "24", "11"]
    assert "A．" not in by_number(questions, 1).text


def test_it_rebuilds_a_raised_small_run_as_a_superscript(imported):
    questions = imported[2]
    assert by_number(questions, 1).text == "已知 $x^{2}$=4，则 x 的值是（  ）"
    assert "y=$ax^{2}$+bx+c" in by_number(questions, 7).text


def test_it_joins_a_question_across_columns_and_pages(imported):
    questions = imported[2]
    q4, q7 = by_number(questions, 4), by_number(questions, 7)
    assert q4.text == "如图，AB 是⊙O 的直径，点 C在⊙O 上，则∠ACB 的度数是（  ）"
    assert [o["label"] for o in q4.options] == ["A", "B", "C", "D"]
    assert q7.text.startswith("已知抛物线 y=$ax^{2}$+bx+c 经过点A(-1,0)，B(3,0)，C(0,3)．\n(1) 求抛物线的解析式；")
    assert q7.source_page.number == 1


def test_it_keeps_sub_questions_on_their_own_lines(imported):
    q8 = by_number(imported[2], 8)
    assert q8.text == "在△ABC 中，AB=AC，D 是 BC的中点．\n(1) 求证：AD⊥BC；\n(2) 若 BC=6，AD=4，求 AB 的长．"


def test_it_attaches_answers_from_the_answer_section_by_number(imported):
    questions = imported[2]
    assert [by_number(questions, n).answers for n in range(1, 7)] == [["C"], ["B"], ["A"], ["D"], ["a(b-1)"], ["2"]]
    assert by_number(questions, 3).raw_solution == "2+3×4=14，故选 A．"
    q7 = by_number(questions, 7)
    assert q7.answers == ["y=-$x^{2}$+2x+3", "(1,4)"]
    assert q7.raw_solution == "设 y=a(x+1)(x-3)，代入C(0,3)得 a=-1．"
    assert by_number(questions, 8).answers == ["见解析", "5"]


def test_it_drops_running_headers_page_numbers_and_the_answer_section(imported):
    document, _, questions = imported
    everything = " ".join(q.text + q.raw_solution + json.dumps(q.options, ensure_ascii=False) for q in questions)
    assert fixtures_pdf.HEADER not in everything
    assert "页" not in everything and "参考答案" not in everything
    assert Page.objects.filter(document=document).count() == 2


def test_it_crops_figures_and_attaches_them_to_their_questions(imported, exam):
    questions = imported[2]
    raster = Figure.objects.get(question=by_number(questions, 2))
    drawing = Figure.objects.get(question=by_number(questions, 4))
    assert Figure.objects.filter(question__in=questions).count() == 2
    assert raster.origin == Figure.Origin.EMBEDDED and drawing.origin == Figure.Origin.DRAWING
    assert raster.bbox == pytest.approx(list(exam.raster_rect), abs=0.5)
    # The drawing's crop reaches over its vertex labels.
    x0, y0, x1, y1 = drawing.bbox
    assert x0 < exam.drawing_rect.x0 - 5 and x1 > exam.drawing_rect.x1 + 5
    assert y0 <= exam.drawing_rect.y0 and y1 >= exam.drawing_rect.y1
    assert raster.page.number == 1 and max(raster.width, raster.height) >= 900
    with Image.open(drawing.image.path) as image:
        assert image.getextrema() != ((255, 255), (255, 255), (255, 255))  # not a blank crop
    # Vertex labels belong to the figure, not the question text.
    assert "A B" not in by_number(questions, 4).text


def test_it_stores_each_question_box_in_points_on_its_first_page(imported):
    questions = imported[2]
    q2 = by_number(questions, 2)
    x0, y0, x1, y1 = q2.bbox
    assert 40 <= x0 < 50 and x1 < 290 and y0 < 140 and y1 > 270  # stem, figure and options
    assert q2.source_page.number == 1 and q2.source_page.width_pt == 595


def test_it_reads_three_columns_in_order():
    document = upload(fixtures_pdf.three_column_page(), "three.pdf")
    import_document(document=document)
    texts = list(Question.objects.filter(source_document=document).order_by("id").values_list("text", flat=True))
    assert texts == [f"第{n}题的题干写在这里，答案是______．" for n in range(1, 7)]
    assert set(Question.objects.filter(source_document=document).values_list("qtype", flat=True)) == {"fill_in_blank"}


# --- the job, re-runs and bad input --------------------------------------------------


def test_it_runs_as_a_job_and_a_second_run_creates_nothing(exam, annotator):
    document = upload(exam.pdf, user=annotator)
    job = start_pdf_import(document=document, user=annotator, subject="physics", grade=8)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result["report"]["gaps"] == [] and job.result["failed"] == []
    assert job.result | {"warnings": [], "notes": [], "seconds": {}, "report": {}} == {
        "pages": 2, "questions": 8, "existing": 0, "figures": 2, "ocr_pages": 0, "warnings": [], "notes": [],
        "seconds": {}, "report": {}, "failed": [], "partial": [],
    }  # fmt: skip
    assert set(job.result["seconds"]) == {"pages", "segment", "vision", "questions"}
    assert (job.done, job.total) == (3, 3)  # a step per page and one for the questions
    assert set(Question.objects.values_list("subject", "grade")) == {("physics", 8)}
    again = start_pdf_import(document=document, user=annotator, subject="physics", grade=8)
    assert execute_job(again.pk) == Job.Status.SUCCEEDED
    again.refresh_from_db()
    assert again.result["questions"] == 0 and again.result["existing"] == 8
    assert Question.objects.count() == 8 and Page.objects.count() == 2 and Figure.objects.count() == 2


def test_it_resumes_after_a_crash_without_rendering_saved_pages_again(exam, monkeypatch):
    document = upload(exam.pdf)
    real_save_questions = importer._save_questions

    def crash(*args, **kwargs):
        raise RuntimeError("worker died")

    monkeypatch.setattr(importer, "_save_questions", crash)
    with pytest.raises(RuntimeError):
        import_document(document=document)
    assert Page.objects.filter(document=document).count() == 2 and Question.objects.count() == 0
    images = set(Page.objects.values_list("image", flat=True))
    monkeypatch.setattr(importer, "_save_questions", real_save_questions)
    monkeypatch.setattr(importer.reading, "render_png", crash)  # a page rendered again would fail the run
    assert import_document(document=document).questions == 8
    assert set(Page.objects.values_list("image", flat=True)) == images


def test_it_finishes_a_half_saved_paper_without_duplicates(exam, monkeypatch):
    document = upload(exam.pdf)
    real_create = importer.create_question
    created = []

    def dies_after_three(**kwargs):
        if len(created) == 3:
            raise RuntimeError("worker died")
        created.append(real_create(**kwargs))
        return created[-1]

    monkeypatch.setattr(importer, "create_question", dies_after_three)
    monkeypatch.setattr(importer, "SAVE_BATCH", 2)
    with pytest.raises(RuntimeError):
        import_document(document=document)
    assert Question.objects.count() == 2  # the first batch; the second one rolled back with the crash
    monkeypatch.setattr(importer, "create_question", real_create)
    summary = import_document(document=document)
    assert (summary.questions, summary.existing) == (6, 2) and Question.objects.count() == 8
    assert Figure.objects.count() == 2


def test_it_reads_the_file_through_a_storage_without_local_paths(exam, monkeypatch):
    def no_path(self):
        raise NotImplementedError("This backend doesn't support absolute paths.")

    document = upload(exam.pdf)
    monkeypatch.setattr(FieldFile, "path", property(no_path))
    assert import_document(document=document).questions == 8


def test_it_imports_the_same_file_uploaded_twice_once(exam):
    import_document(document=upload(exam.pdf))
    assert import_document(document=upload(exam.pdf)).questions == 0
    assert Question.objects.count() == 8


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (fixtures_pdf.encrypted_pdf, "password"),
        (fixtures_pdf.zero_page_pdf, "no pages"),
        (lambda: fixtures_pdf.text_pages(5), "at most 4"),
    ],
    ids=["encrypted", "zero-pages", "too-many-pages"],
)
def test_it_refuses_a_bad_pdf_with_a_clear_message_and_writes_nothing(build, message, settings, annotator):
    settings.PDF_MAX_PAGES = 4
    document = upload(build(), user=annotator)
    job = start_pdf_import(document=document, user=annotator, subject="math", grade=9)
    assert execute_job(job.pk) == Job.Status.FAILED
    document.refresh_from_db()
    job.refresh_from_db()
    assert message in document.error and message in job.error
    assert not Page.objects.exists() and not Question.objects.exists()


def test_it_refuses_the_page_limit_of_a_300_page_paper(settings, english):
    settings.PDF_MAX_PAGES = 250
    document = upload(fixtures_pdf.text_pages(300))
    with pytest.raises(PdfImportError, match="300 pages; at most 250"):
        import_document(document=document)
    assert not Page.objects.exists()


def test_it_refuses_a_text_file_named_pdf_at_upload(english):
    with pytest.raises(PdfImportError, match="not a PDF"):
        upload(fixtures_pdf.not_a_pdf(), "paper.pdf")
    assert not SourceDocument.objects.exists()


@pytest.mark.parametrize("content", [fixtures_pdf.corrupt_pdf(), b"%PDF-1.7\n<html><script>alert(1)</script></html>"],
                         ids=["corrupt", "html-starting-with-pdf-header"])  # fmt: skip
def test_it_refuses_at_upload_what_starts_like_a_pdf_but_does_not_open(content, english):
    with pytest.raises(PdfImportError, match="not a PDF that can be opened"):
        upload(content, "notice.html")
    assert not SourceDocument.objects.exists()


def test_it_refuses_a_stored_file_that_is_not_a_pdf():
    document = upload(fixtures_pdf.two_column_exam().pdf)
    with open(document.file.path, "wb") as stored:
        stored.write(fixtures_pdf.not_a_pdf())
    with pytest.raises(PdfImportError):
        import_document(document=document)
    document.refresh_from_db()
    assert "not a PDF" in document.error


def test_it_refuses_an_upload_over_the_size_limit(settings, english):
    settings.MAX_UPLOAD_BYTES = 1000
    with pytest.raises(PdfImportError, match="larger than the limit"):
        upload(fixtures_pdf.text_pages(3))
    assert not SourceDocument.objects.exists()


def test_it_hashes_the_upload_while_copying_it(exam, tmp_path):
    path = tmp_path / "paper.pdf"
    path.write_bytes(exam.pdf)
    document = register_pdf_upload(uploaded_file_or_path=path)
    assert document.sha256 == hashlib.sha256(exam.pdf).hexdigest() and document.size == len(exam.pdf)
    assert document.original_name == "paper.pdf" and document.kind == SourceDocument.Kind.PDF


def test_the_command_imports_files_and_prints_a_summary_each(exam, tmp_path, capsys, english):
    good = tmp_path / "good.pdf"
    good.write_bytes(exam.pdf)
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(fixtures_pdf.encrypted_pdf())
    with pytest.raises(CommandError, match="1 of 2"):
        call_command("import_pdf", str(good), str(bad), "--subject", "physics", "--grade", "8")
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["questions"] == 8 and first["pages"] == 2
    assert "password" in second["error"]
    assert set(Question.objects.values_list("subject", "grade")) == {("physics", 8)}


# --- OCR ------------------------------------------------------------------------------


class FakeOCR(ocr.OCRBackend):
    """Answers every page with the scanned page's lines, at plausible places."""

    name = "fake-ocr"
    calls = 0

    def recognize(self, image):
        FakeOCR.calls += 1
        scale = image.width / 595
        lines = [
            ocr.OCRLine(text, (60 * scale, (86 + 28 * i) * scale, 400 * scale, (102 + 28 * i) * scale))
            for i, text in enumerate(fixtures_pdf.SCANNED_LINES)
        ]
        return ocr.OCRResult(lines=lines)


@pytest.fixture
def fake_ocr(settings):
    settings.OCR_BACKEND = "tests.test_pdf_import.FakeOCR"
    FakeOCR.calls = 0
    return FakeOCR


def test_the_setting_swaps_the_ocr_backend(fake_ocr):
    document = upload(fixtures_pdf.scanned_page(), "scan.pdf")
    summary = import_document(document=document)
    assert summary.ocr_pages == 1 and fake_ocr.calls == 1
    page = Page.objects.get(document=document)
    assert page.text_source == "fake-ocr" and "最大的数" in page.text
    question = Question.objects.get(source_document=document)
    assert question.qtype == "multiple_choice" and [o["label"] for o in question.options] == list("ABCD")
    assert not question.figures.exists()  # the scan itself is not a figure


def test_a_scan_without_a_working_ocr_backend_fails_with_the_reason(settings, monkeypatch, english):
    settings.OCR_BACKEND = "annotation.ocr.TesseractBackend"
    monkeypatch.setenv("PATH", "/nonexistent")
    document = upload(fixtures_pdf.scanned_page(), "scan.pdf")
    with pytest.raises(PdfImportError):
        import_document(document=document)
    document.refresh_from_db()
    assert "Page 1 has no text layer and needs OCR" in document.error and "tesseract" in document.error
    assert not Page.objects.exists()


def test_a_backend_that_is_not_an_ocr_backend_is_refused():
    with pytest.raises(ocr.OCRUnavailable, match="not a subclass"):
        ocr.get_ocr_backend("annotation.models.Page")
    with pytest.raises(ocr.OCRUnavailable, match="cannot be imported"):
        ocr.get_ocr_backend("annotation.nothing.Here")


def test_the_default_backend_reads_chinese_from_a_scanned_page(settings):
    assert settings.OCR_BACKEND == "annotation.ocr.RapidOCRBackend"
    document = upload(fixtures_pdf.scanned_page(), "scan.pdf")
    assert import_document(document=document).ocr_pages == 1
    page = Page.objects.get(document=document)
    assert page.text_source == "rapidocr" and "最大的数" in page.text.replace(" ", "")
    question = Question.objects.get(source_document=document)
    assert question.qtype == "multiple_choice" and "最大的数" in question.text
    assert [o["label"] for o in question.options] == list("ABCD")


def test_tesseract_says_clearly_when_it_is_not_installed(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ocr.OCRUnavailable, match="tesseract"):
        ocr.TesseractBackend().recognize(Image.new("RGB", (10, 10)))


def test_tesseract_tsv_becomes_lines():
    tsv = (
        "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
        "5\t1\t1\t1\t1\t1\t10\t20\t12\t14\t90\t已\n"
        "5\t1\t1\t1\t1\t2\t24\t20\t12\t14\t90\t知\n"
        "5\t1\t1\t1\t1\t3\t40\t21\t10\t13\t90\tx\n"
        "5\t1\t1\t1\t2\t1\t10\t50\t30\t14\t90\tA.\n"
        "5\t1\t1\t1\t2\t2\t50\t50\t10\t14\t90\t2\n"
    )
    assert ocr.parse_tesseract_tsv(tsv) == [
        ocr.OCRLine("已知x", (10, 20, 50, 34)),
        ocr.OCRLine("A. 2", (10, 50, 60, 64)),
    ]


# --- Mathpix against a local fake server -----------------------------------------------


class FakeMathpix(BaseHTTPRequestHandler):
    seen: list = []
    status = 200

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeMathpix.seen.append({"headers": dict(self.headers), "body": body})
        answer = {
            "text": "1．已知 $x^{2}=4$",
            "line_data": [
                {"type": "text", "text": "1．已知 $x^{2}=4$", "cnt": [[10, 20], [200, 20], [200, 44], [10, 44]],
                 "included": True, "confidence": 0.98},
                {"type": "diagram", "text": "", "cnt": [[10, 60], [90, 60], [90, 120], [10, 120]], "included": True},
            ],
        }  # fmt: skip
        payload = json.dumps(answer, ensure_ascii=False).encode()
        self.send_response(FakeMathpix.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def mathpix_server(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeMathpix)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeMathpix.seen, FakeMathpix.status = [], 200
    settings.MATHPIX_API_URL = f"http://127.0.0.1:{server.server_port}/v3/text"
    settings.MATHPIX_APP_ID, settings.MATHPIX_APP_KEY = "studio-app", "key-123"
    yield server
    server.shutdown()
    server.server_close()


def test_mathpix_sends_the_image_with_credentials_and_reads_lines(mathpix_server):
    result = ocr.MathpixBackend().recognize(Image.new("RGB", (240, 140), "white"))
    assert result.lines == [ocr.OCRLine("1．已知 $x^{2}=4$", (10, 20, 200, 44), 0.98)]
    assert result.markdown == "1．已知 $x^{2}=4$"
    request = FakeMathpix.seen[0]
    assert request["headers"]["app_id"] == "studio-app" and request["headers"]["app_key"] == "key-123"
    assert request["body"]["src"].startswith("data:image/png;base64,")


def test_mathpix_reports_a_server_error_as_worth_retrying(mathpix_server):
    FakeMathpix.status = 503
    with pytest.raises(ocr.OCRServiceError):
        ocr.MathpixBackend().recognize(Image.new("RGB", (20, 20)))


def test_mathpix_without_credentials_is_a_configuration_error(settings):
    settings.MATHPIX_APP_ID, settings.MATHPIX_APP_KEY = "", ""
    with pytest.raises(ocr.OCRUnavailable, match="MATHPIX_APP_ID"):
        ocr.MathpixBackend().recognize(Image.new("RGB", (20, 20)))


# --- small pieces -----------------------------------------------------------------------


def test_a_lowered_small_run_becomes_a_subscript_and_a_flagged_one_a_superscript():
    base = Span("a", (0, 0, 6, 12), baseline=10, size=10.5)
    lowered = Span("1", (6, 6, 10, 14), baseline=12.5, size=6)
    flagged = Span("n", (10, 0, 14, 8), baseline=10, size=10.5, flags=1)
    assert line_text([base, lowered]) == "$a_{1}$"
    assert line_text([base, flagged]) == "$a^{n}$"
    assert line_text([Span("10", (0, 0, 12, 12), 10, 10.5), Span("³", (12, 0, 16, 8), 10, 10.5)]) == "$10^{3}$"


def _lines(*texts):
    return [Line(text, (0, i * 20, 100, i * 20 + 12), 1, (1, 0, 0, i * 20)) for i, text in enumerate(texts)]


def test_a_stem_line_naming_points_is_not_an_option_line():
    lines = _lines("一、选择题", "1．甲从", "A、B 两地同时出发，则（  ）", "A.-1B.0", "C.2 D.3")
    (question,) = segment(lines).questions
    assert question.text == "甲从A、B 两地同时出发，则（  ）"
    assert [(o["label"], o["text"]) for o in question.options] == [("A", "-1"), ("B", "0"), ("C", "2"), ("D", "3")]


def test_section_header_variants_set_the_type_and_a_choice_run_answers_several():
    paper = ["第一部分 选择题", "1．甲", "A．1 B．2 C．3 D．4", "2．乙", "A．1 B．2 C．3 D．4"]
    paper += ["第二大题：填空题", "3．丙____", "四、判断题", "4．丁", "参考答案", "1-2 CB", "3．5"]
    parsed = segment(_lines(*paper))
    assert [(q.number, q.qtype) for q in parsed.questions] == [
        (1, "multiple_choice"), (2, "multiple_choice"), (3, "fill_in_blank"), (4, "free_response"),
    ]  # fmt: skip
    assert [q.answers for q in parsed.questions] == [["C"], ["B"], ["5"], []]


def test_a_lost_question_number_does_not_swallow_the_rest():
    parsed = segment(_lines("一、解答题", "1．甲", "2．乙", "4．丁", "5．戊", "9．这是第五题里的一行"))
    assert [q.number for q in parsed.questions] == [1, 2, 4, 5]
    assert parsed.questions[-1].text == "戊9．这是第五题里的一行"
    # Said once (the skip and the gap are the same missing number), naming the questions on both sides.
    assert parsed.notes == [{"code": "gap", "params": {"label": "3", "before": "2", "after": "4"}}]
    assert parsed.warnings == ["Question 3 was not found (between 2 and 4)."]


def test_answers_split_by_blank_and_sub_question():
    assert split_answer("（1）3；（2）-1", "free_response") == ["3", "-1"]
    assert split_answer("2；5", "fill_in_blank") == ["2", "5"]
    assert split_answer("B", "multiple_choice") == ["B"]
