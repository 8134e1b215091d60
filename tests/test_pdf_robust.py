"""No PDF that PyMuPDF opens crashes the importer: text past the page's edges, fonts of no size,
rotated pages, page boxes that do not start at 0, empty pages. One page that cannot be read or laid
out is said, and the rest of the paper goes on. The papers are built here, at test time."""

from __future__ import annotations

import contextlib

import pymupdf
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation.models import Question, SourceDocument
from annotation.pdf import import_document, importer, reading, register_pdf_upload
from annotation.pdf.layout import PageText, Span, gutters_of, reading_order
from k12vista.jobs import execute_job
from k12vista.models import Job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


class BlankOCR:
    """An OCR backend that reads nothing: pages without text stay empty, quickly."""

    name = "blank-ocr"

    def recognize(self, image):
        from annotation import ocr

        return ocr.OCRResult(lines=[])


@pytest.fixture(autouse=True)
def _blank_ocr(monkeypatch):
    monkeypatch.setattr(importer, "get_ocr_backend", lambda: BlankOCR())


def wide_line_paper(*, pages: int = 1) -> bytes:
    """Numbered questions in one column, and on each page one line that runs far past the right edge
    (a web page printed to an A4 PDF)."""
    doc = pymupdf.open()
    for p in range(pages):
        page = doc.new_page(width=595, height=842)
        for i in range(8):
            number = p * 8 + i + 1
            page.insert_text((60, 90 + 60 * i), f"{number}．下列说法正确的是（  ）", fontname="china-s", fontsize=11)
            page.insert_text((60, 110 + 60 * i), "A．甲 B．乙 C．丙 D．丁", fontname="china-s", fontsize=11)
        # A glyph that starts on the page and ends well past its edge.
        page.insert_text((560, 700), "宽", fontname="china-s", fontsize=90)
    return doc.tobytes()


def analysis_of(content: bytes) -> importer.Analysis:
    pdf = reading.open_pdf(content)
    with pdf:
        texts, regions = [], []
        for index, page in enumerate(pdf):
            text, _, found = importer.read_page(page, index + 1)
            texts.append(text)
            regions += found
        return importer.analyse(texts, regions)


def test_a_line_past_the_right_edge_of_the_page_is_read_up_to_the_edge():
    """The IndexError in gutters_of: a run ending past the page's width reached past its coverage bins."""
    analysis = analysis_of(wide_line_paper())
    assert [q.number for q in analysis.parsed.questions] == list(range(1, 9))
    # Geometry handed on from the text layer lies inside the page.
    assert all(line.bbox[2] <= 595 and line.bbox[0] >= 0 for q in analysis.parsed.questions for line in q.lines)


def test_gutters_are_found_whatever_the_runs_extent():
    spans = [(1, Span("文字", (x0, 10 * i, x1, 10 * i + 8), 10 * i + 7, 8.0)) for i, (x0, x1) in
             enumerate([(-50, 200), (300, 900), (40, 280), (310, 560), (50, 250), (320, 5000), (60, 270)])]  # fmt: skip
    assert isinstance(gutters_of(spans, 595.0), list)
    assert gutters_of(spans, 0.0) == [] and gutters_of(spans, float("nan")) == []


def test_a_page_that_cannot_be_laid_out_is_said_and_the_others_go_on(monkeypatch):
    from annotation.pdf import layout

    real = layout.page_layout

    def broken_on_page_2(page, gutters=None):
        if page.number == 2:
            raise ValueError("no columns here")
        return real(page, gutters)

    monkeypatch.setattr(layout, "page_layout", broken_on_page_2)
    analysis = analysis_of(wide_line_paper(pages=3))
    assert [q.number for q in analysis.parsed.questions] == list(range(1, 25))  # page 2 read as one column
    assert {"code": "page_layout", "params": {"page": 2, "error": "ValueError: no columns here"}} in (
        analysis.parsed.notes
    )


def test_the_import_and_its_continuation_take_a_page_wider_than_a4(annotator):
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("web.pdf", wide_line_paper(pages=2)))
    summary = import_document(document=document, user=annotator)
    assert summary.questions == 16 and document.error == ""
    # "Continue import" (the retry job) goes through the same path and creates nothing new.
    job = importer.retry_pdf_import(document=document, user=annotator)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    document.refresh_from_db()
    assert document.error == "" and Question.objects.filter(source_document=document).count() == 16


def test_a_page_that_cannot_be_read_is_said_and_the_rest_is_imported(monkeypatch):
    real = importer.read_page

    def broken_on_page_1(page, number):
        if number == 1:
            raise RuntimeError("code=2: broken content stream")
        return real(page, number)

    monkeypatch.setattr(importer, "read_page", broken_on_page_1)
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("web.pdf", wide_line_paper(pages=2)))
    summary = import_document(document=document)
    assert summary.questions == 8
    assert summary.notes[0] == {
        "code": "page_unreadable", "params": {"page": 1, "error": "RuntimeError: code=2: broken content stream"},
    }  # fmt: skip
    assert SourceDocument.objects.get(pk=document.pk).page_count == 2


def test_a_crash_is_kept_as_a_note_worded_for_the_reader(monkeypatch, annotator, login):
    def crash(**kwargs):
        raise KeyError("boom")

    monkeypatch.setattr("annotation.pdf.importer._save_questions", crash)
    document = register_pdf_upload(
        uploaded_file_or_path=SimpleUploadedFile("web.pdf", wide_line_paper()), user=annotator
    )
    with pytest.raises(KeyError):
        import_document(document=document)
    document.refresh_from_db()
    assert document.error.startswith("The import stopped (KeyError")
    assert document.import_report["error"]["code"] == "import_stopped"
    body = login(annotator).get(f"/annotate/imports/{document.pk}/").content.decode()
    assert "导入已中断（KeyError: &#x27;boom&#x27;）；再次运行即可继续。" in body and "The import stopped" not in body


# --- any geometry -------------------------------------------------------------------------

QUESTION_TEXTS = ["下列说法正确的是（  ）", "A．甲 B．乙 C．丙 D．丁", "求物体的加速度。", "【答案】B", "参考答案"]

texts = st.one_of(
    st.builds(lambda n, t: f"{n}．{t}", st.integers(0, 40), st.sampled_from(QUESTION_TEXTS)),
    st.sampled_from([*QUESTION_TEXTS, "一、选择题（共5小题）", "第 1 页", "x²", "缺第2-4题"]),
    st.text(alphabet="甲乙丙丁ABCD1234.．、()（）", min_size=1, max_size=12),
)
runs = st.tuples(
    st.floats(-300, 1200, allow_nan=False),  # x: off the page on either side too
    st.floats(-300, 1500, allow_nan=False),  # y
    st.sampled_from([0.0, 0.01, 0.5, 3.0, 10.5, 11.0, 24.0, 90.0]),  # size: zero and tiny too
    texts,
)
pages = st.fixed_dictionaries(
    {
        "size": st.sampled_from([(595, 842), (842, 595), (1191, 842), (100, 100), (3, 3), (2000, 400)]),
        "rotation": st.sampled_from([0, 90, 180, 270]),
        "offset": st.sampled_from([(0, 0), (50, 80), (-40, -40)]),  # a MediaBox that does not start at 0
        "crop": st.sampled_from([None, (30, 30, 300, 400), (0, 0, 595, 100)]),  # a CropBox inside it
        "columns": st.integers(0, 3),  # 0: an empty page unless runs add text
        "runs": st.lists(runs, max_size=12),
    }
)


def build(specs: list[dict]) -> bytes:
    doc = pymupdf.open()
    for spec in specs:
        width, height = spec["size"]
        page = doc.new_page(width=width, height=height)
        dx, dy = spec["offset"]
        if (dx, dy) != (0, 0):
            page.set_mediabox(pymupdf.Rect(dx, dy, dx + width, dy + height))
        for column in range(spec["columns"]):
            x = 20 + column * width / max(spec["columns"], 1)
            for row in range(6):
                number = column * 6 + row + 1
                point = pymupdf.Point(x, 40 + row * 30)
                page.insert_text(point, f"{number}．{QUESTION_TEXTS[row % 3]}", fontname="china-s", fontsize=10)
        for x, y, size, text in spec["runs"]:
            if size <= 0:
                # insert_text refuses a zero size; a zero-size font is written into the content stream.
                page.insert_text((0, 0), " ", fontname="china-s", fontsize=1)
                xref = page.get_contents()[-1]
                stream = doc.xref_stream(xref) + f"\nBT /china-s 0 Tf {x:.1f} {y:.1f} Td (12) Tj ET\n".encode()
                doc.update_stream(xref, stream)
                continue
            page.insert_text((x, y), text, fontname="china-s", fontsize=size)
        if spec["crop"] is not None:
            x0, y0, x1, y1 = spec["crop"]
            mediabox = page.mediabox
            box = pymupdf.Rect(mediabox.x0 + x0, mediabox.y0 + y0, mediabox.x0 + x1, mediabox.y0 + y1) & mediabox
            with contextlib.suppress(ValueError):  # PyMuPDF refuses a CropBox outside the MediaBox: none then
                page.set_cropbox(box)
        page.set_rotation(spec["rotation"])
    return doc.tobytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(pages, min_size=1, max_size=3))
def test_any_geometry_gives_a_report_and_never_raises(specs):
    analysis = analysis_of(build(specs))
    report = analysis.parsed.report
    assert isinstance(report["notes"], list) and isinstance(report["numbers"], list)
    assert len(report["warnings"]) == len(report["notes"])
    # Every line handed on lies on its page.
    for question in analysis.parsed.questions:
        for line in question.lines:
            x0, y0, x1, y1 = line.bbox
            assert 0 <= x0 <= x1 and 0 <= y0 <= y1


def test_degenerate_page_texts_are_read_without_raising():
    nan, inf = float("nan"), float("inf")
    page_texts = [
        PageText(1, 0.0, 0.0, [Span("1．甲（  ）", (0, 0, 10, 10), 9, 10.0)]),
        PageText(2, 595.0, 842.0, [Span("2．乙", (nan, 0, 10, 10), 9, 10.0), Span("3．丙", (0, 0, inf, 10), 9, 0.0)]),
        PageText(3, -10.0, 842.0, []),
        PageText(4, 595.0, 842.0, [Span("4．丁", (700, 900, 600, 800), 850, -3.0)]),
        PageText(
            5,
            595.0,
            842.0,
            [Span(f"{i}．戊", (500, 10 * i, 9000, 10 * i + 8), 10 * i + 7, 0.0) for i in range(5, 20)],
            gutters=[-5.0, 300.0, 9000.0],
        ),  # fmt: skip
    ]
    problems: list = []
    lines, layouts = reading_order(page_texts, problems)
    assert set(layouts) == {1, 2, 3, 4, 5}
    assert all(0 <= line.bbox[0] <= line.bbox[2] <= 595 for line in lines)
