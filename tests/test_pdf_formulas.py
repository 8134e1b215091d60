"""Formulas set as small images (Word/MathType exports), real figures with their captions, figures on
scanned pages, and the quality flags measured on the source's pixels: on synthetic PDFs built here."""

import io
import re

import pymupdf
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image, ImageDraw

from annotation import ocr
from annotation.models import Figure, Question
from annotation.pdf import import_document, register_pdf_upload
from annotation.pdf.figures import figure_regions
from annotation.pdf.reading import text_layer
from tests import fixtures_pdf
from tests.fixtures_pdf import FONT, SIZE, width_of

pytestmark = pytest.mark.usefixtures("tmp_media")


def formula_png(text: str = "v0", scale: int = 3) -> bytes:
    """A formula as MathType pastes it: a small picture of a few glyphs, about a line high."""
    image = Image.new("RGB", (12 * scale * max(1, len(text) // 2), 13 * scale), "white")
    ImageDraw.Draw(image).text((2, 2), text, fill="black")
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


FORMULA = ("formula",)


def _line(page: pymupdf.Page, x: float, y: float, *parts) -> list[pymupdf.Rect]:
    """Text runs and inline formula images along one baseline; returns the images' rects."""
    rects = []
    for part in parts:
        if part == FORMULA:
            rect = pymupdf.Rect(x + 1, y - 10, x + 15, y + 3)
            page.insert_image(rect, stream=formula_png())
            rects.append(rect)
            x = rect.x1 + 1
        else:
            page.insert_text((x, y), part, fontname=FONT, fontsize=SIZE)
            x += width_of(part)
    return rects


def word_paper() -> tuple[bytes, dict]:
    """A Word-style physics page: question 1 refers to 图1 (a raster figure with its caption) and has three
    inline formula images; question 2 has none and no figure; question 3's option B is a formula image."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 70), "一、选择题", fontname=FONT, fontsize=SIZE)
    formulas = _line(page, 60, 100, "1．如图1所示，小球的初速度为", FORMULA, "，加速度为", FORMULA, "，经过时间")
    formulas += _line(page, 60, 118, FORMULA, "后速度为零，则小球的位移为（  ）")
    figure = pymupdf.Rect(200, 130, 350, 230)
    page.insert_image(figure, stream=fixtures_pdf.raster_figure_png())
    page.insert_text((265, 246), "图1", fontname=FONT, fontsize=9)
    page.insert_text((60, 275), "A．1 m    B．2 m    C．3 m    D．4 m", fontname=FONT, fontsize=SIZE)
    page.insert_text((60, 305), "2．下列单位中属于国际单位制基本单位的是（  ）", fontname=FONT, fontsize=SIZE)
    page.insert_text((60, 323), "A．牛顿    B．焦耳    C．千克    D．瓦特", fontname=FONT, fontsize=SIZE)
    page.insert_text((60, 353), "3．一物体做自由落体运动，下落高度与时间的关系是（  ）", fontname=FONT, fontsize=SIZE)
    formulas += _line(page, 60, 371, "A．h = gt    B．", FORMULA, "    C．h = 2gt    D．h = gt/4")
    # Many formula images on one page, as Word papers have them: more lines of question 3.
    for i in range(4):
        formulas += _line(page, 60, 395 + 18 * i, f"（{i + 1}）由", FORMULA, "可知，高度与", FORMULA, "成正比。")
    return doc.tobytes(deflate=True), {"figure": figure, "formulas": formulas}


def _import(content: bytes, name: str = "word.pdf"):
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile(name, content))
    summary = import_document(document=document, subject="physics", grade=10)
    return document, summary


def _question(document, start: str) -> Question:
    return next(q for q in Question.objects.filter(source_document=document) if q.text.startswith(start))


def test_small_images_inside_text_lines_are_formulas_and_a_captioned_picture_is_a_figure():
    content, placed = word_paper()
    with pymupdf.open(stream=content) as pdf:
        regions = figure_regions(pdf[0], text_layer(pdf[0], 1))
    formulas = [r for r in regions if r.is_formula]
    figures = [r for r in regions if not r.is_formula]
    assert len(formulas) == len(placed["formulas"]) == 12
    assert len(figures) == 1
    # The caption 图1 under the picture is cropped with it.
    assert figures[0].bbox[3] >= 240 and figures[0].bbox[1] <= placed["figure"].y0


@pytest.mark.django_db
def test_formula_images_stay_in_the_text_at_their_place_and_are_flagged():
    document, summary = _import(word_paper()[0])
    first = _question(document, "如图1所示")
    # No holes: each formula stands where it was in the line, as a placeholder for its image.
    assert re.search(r"初速度为\s*\[\[formula:(\d+)\]\]\s*，加速度为\s*\[\[formula:(\d+)\]\]", first.text), first.text
    assert re.search(r"经过时间\s*\[\[formula:\d+\]\]\s*后速度为零", first.text), first.text
    kinds = list(first.figures.order_by("position").values_list("kind", flat=True))
    assert kinds == [Figure.Kind.FIGURE] + [Figure.Kind.FORMULA] * 3
    numbers = {int(n) for n in re.findall(r"\[\[formula:(\d+)\]\]", first.text)}
    assert numbers == {1, 2, 3}
    codes = set(first.flags.values_list("code", flat=True))
    assert "formula_image" in codes and "figure_missing" not in codes
    assert summary.figures == 1 + 0  # question 1's picture; formulas are no figures
    # A question whose text points at no figure is not flagged for lacking one.
    second = _question(document, "下列单位中")
    assert not second.figures.exists() and "figure_missing" not in set(second.flags.values_list("code", flat=True))
    third = _question(document, "一物体做自由落体运动")
    option_b = next(o for o in third.options if o["label"] == "B")
    assert re.fullmatch(r"\s*\[\[formula:\d+\]\]\s*", option_b["text"]), third.options
    assert third.figures.filter(kind=Figure.Kind.FIGURE).count() == 0


@pytest.mark.django_db
def test_the_formula_placeholder_shows_the_image_inline_on_the_question_page(researcher, login):
    document, _ = _import(word_paper()[0])
    first = _question(document, "如图1所示")
    body = login(researcher).get(f"/annotate/questions/{first.hash_id}/").content.decode()
    formula = first.figures.filter(kind=Figure.Kind.FORMULA).first()
    assert f'class="formula-image" src="{formula.image.url}"' in body
    assert "[[formula:" not in body.split('class="question-text"')[1].split("</div>")[0]
    # The image is served through the question's file rule.
    assert login(researcher).get(formula.image.url).status_code == 200


class FormulaReadingOCR(ocr.OCRBackend):
    """A backend that reads formulas (as Mathpix or a vision model does)."""

    name = "formula-ocr"
    reads_formulas = True
    calls = 0

    def recognize(self, image):
        FormulaReadingOCR.calls += 1
        return ocr.OCRResult(markdown="$v_{0}$")


@pytest.mark.django_db
def test_a_backend_that_reads_formulas_puts_their_latex_in_the_text(settings):
    settings.OCR_BACKEND = "tests.test_pdf_formulas.FormulaReadingOCR"
    FormulaReadingOCR.calls = 0
    document, _ = _import(word_paper()[0])
    first = _question(document, "如图1所示")
    assert "初速度为 $v_{0}$" in first.text.replace("  ", " ") or "初速度为$v_{0}$" in first.text, first.text
    assert "[[formula:" not in first.text and not first.figures.filter(kind=Figure.Kind.FORMULA).exists()
    assert FormulaReadingOCR.calls == 12
    assert "formula_image" not in set(first.flags.values_list("code", flat=True))


def test_the_reading_of_a_formula_image_is_its_math_only():
    assert ocr.formula_of("$v_{0}$") == "v_{0}"
    assert ocr.formula_of("\\(a+b\\)") == "a+b"
    assert ocr.formula_of("x^2") == "x^2"
    assert ocr.formula_of("$a$ 和 $b$") is None
    assert ocr.formula_of("") is None
    assert ocr.RapidOCRBackend().read_formula(Image.new("RGB", (10, 10))) is None


@pytest.mark.django_db
def test_quality_flags_are_measured_on_the_embedded_images_own_pixels(settings):
    """A 60x40 px picture printed 150x100 pt is enlarged to the standard size; it is still 60x40 px."""
    settings.FIGURE_MIN_SIDE_PX = 100
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 100), "1．如图所示，电路中电流表的读数为（  ）", fontname=FONT, fontsize=SIZE)
    page.insert_image(pymupdf.Rect(200, 115, 350, 215), stream=fixtures_pdf.raster_figure_png(60, 40))
    page.insert_text((60, 240), "A．1 A    B．2 A    C．3 A    D．4 A", fontname=FONT, fontsize=SIZE)
    document, _ = _import(doc.tobytes(), "small.pdf")
    question = Question.objects.get(source_document=document)
    figure = question.figures.get()
    assert (figure.source_width, figure.source_height) == (60, 40)
    assert max(figure.width, figure.height) > 100  # enlarged for the page
    assert "low_resolution" in set(question.flags.values_list("code", flat=True))


def scanned_paper_with_a_figure() -> tuple[bytes, pymupdf.Rect]:
    source = pymupdf.open()
    page = source.new_page(width=595, height=842)
    for i, text in enumerate(fixtures_pdf.SCANNED_LINES):
        page.insert_text((60, 100 + i * 28), text, fontname=FONT, fontsize=14)
    drawn = pymupdf.Rect(80, 200, 240, 320)
    page.draw_rect(drawn, width=1.5)
    page.draw_line((80, 320), (240, 200), width=1.5)
    page.draw_circle((160, 260), 30, width=1.5)
    page.insert_text((150, 340), "图1", fontname=FONT, fontsize=12)
    png = page.get_pixmap(dpi=150).tobytes("png")
    scan = pymupdf.open()
    scan.new_page(width=595, height=842).insert_image(pymupdf.Rect(0, 0, 595, 842), stream=png)
    return scan.tobytes(deflate=True), drawn


class ScanOCR(ocr.OCRBackend):
    """The scanned page's lines and the caption under its figure, at their places."""

    name = "scan-ocr"

    def recognize(self, image):
        scale = image.width / 595
        lines = [ocr.OCRLine(t, (60 * scale, (86 + 28 * i) * scale, 400 * scale, (104 + 28 * i) * scale))
                 for i, t in enumerate(fixtures_pdf.SCANNED_LINES)]  # fmt: skip
        lines.append(ocr.OCRLine("图1", (148 * scale, 328 * scale, 176 * scale, 344 * scale)))
        return ocr.OCRResult(lines=lines)


@pytest.mark.django_db
def test_a_figure_on_a_scanned_page_is_found_in_its_pixels_and_cropped_with_its_caption(settings, monkeypatch):
    settings.OCR_BACKEND = "tests.test_pdf_formulas.ScanOCR"
    # One column: the backend here answers for the whole page, not for column strips.
    monkeypatch.setattr("annotation.pdf.reading.image_gutters", lambda image: [])
    content, drawn = scanned_paper_with_a_figure()
    document, summary = _import(content, "scan.pdf")
    assert summary.ocr_pages == 1
    question = Question.objects.get(source_document=document)
    figure = question.figures.get()
    x0, y0, x1, y1 = figure.bbox
    assert x0 <= drawn.x0 + 2 and y0 <= drawn.y0 + 2 and x1 >= drawn.x1 - 2 and y1 >= 340  # with 图1
    assert x1 - x0 < 250 and y1 - y0 < 200  # the figure, not the page
    assert "图1" not in question.text
    # The scan's own pixels: 150 dpi over the box.
    assert figure.source_width == pytest.approx((x1 - x0) * 150 / 72, abs=3)


@pytest.mark.django_db
def test_each_question_keeps_a_box_per_column_and_page_it_was_read_from():
    document, _ = _import(fixtures_pdf.two_column_exam().pdf, "two.pdf")
    boxes = {q.text[:12]: q.boxes for q in Question.objects.filter(source_document=document)}
    across_columns = [b for b in boxes.values() if len({box[0] for box in b}) == 1 and len(b) >= 2
                      and b[0][1] < 290 < b[1][1]]  # fmt: skip
    across_pages = [b for b in boxes.values() if len({box[0] for box in b}) == 2]
    assert across_columns and across_pages  # question 4 (left column into right) and 7 (page 1 onto 2)
    assert all(b and all(len(box) == 5 for box in b) for b in boxes.values())


# --- the crash of issue 11: a Word paper's Mathematical Italic letters ------------------------------------


WORD_LINES = [
    "1．已知 𝑥𝑥＋𝑦𝑦＝1，且 𝑥𝑥＞0，求 $\\foo " + "𝑥" * 9 + "𠀀" * 12 + "$ 的值（  ）",
    "A．1    B．2    C．3    D．4",
    "2．函数 𝑓𝑓(𝑥𝑥)＝𝑥𝑥＋1 的零点是（  ）",
    "A．-1    B．0    C．1    D．2",
]


def _word_text_layer(page, number):
    """The text layer MuPDF gives for a Word export: math letters as Mathematical Italic code points, doubled,
    and outside the Basic Multilingual Plane (two UTF-16 units each, which KaTeX's excerpt cut in half)."""
    from annotation.pdf.layout import PageText, Span, normalize_text

    spans = [Span(normalize_text(text), (60, 90 + 20 * i, 500, 102 + 20 * i), 100 + 20 * i, SIZE)
             for i, text in enumerate(WORD_LINES)]  # fmt: skip
    return PageText(number, page.rect.width, page.rect.height, spans)


@pytest.mark.django_db
def test_a_word_paper_with_mathematical_italic_letters_imports_and_a_retry_makes_no_new_document(monkeypatch):
    from annotation.models import Flag, SourceDocument

    monkeypatch.setattr("annotation.pdf.reading.text_layer", _word_text_layer)
    content = fixtures_pdf.text_pages(1)
    document, summary = _import(content, "word-math.pdf")
    assert not summary.failed and summary.questions == 2
    document.refresh_from_db()
    assert document.error == ""
    first = _question(document, "已知")
    assert first.text.startswith("已知 x＋y＝1，且 x＞0")  # plain letters, the doubling undone
    assert "𝑥" not in first.text
    flags = Flag.objects.filter(question__source_document=document)
    for flag in flags:
        flag.message.encode("utf-8")  # a lone surrogate would raise here (and fail the insert on PostgreSQL)
    assert flags.filter(code=Flag.Code.LATEX_ERROR, question=first).exists()
    # A retry of the import continues the same document and creates nothing twice.
    second = import_document(document=document)
    assert second.questions == 0 and second.existing == 2
    assert Question.objects.filter(source_document=document).count() == 2
    assert SourceDocument.objects.count() == 1


def answer_key_paper() -> bytes:
    """Two fill-in questions and an answer key whose first entry is a formula image (a fraction pasted from
    MathType), as the key of a Word paper often is."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 70), "一、填空题", fontname=FONT, fontsize=SIZE)
    page.insert_text((60, 100), "1．计算：二分之一加三分之一等于________。", fontname=FONT, fontsize=SIZE)
    page.insert_text((60, 130), "2．一个正方形的边长是5厘米，它的周长是________厘米。", fontname=FONT, fontsize=SIZE)
    page.insert_text((60, 180), "参考答案", fontname=FONT, fontsize=SIZE)
    _line(page, 60, 210, "1．", FORMULA)
    page.insert_text((60, 240), "2．20", fontname=FONT, fontsize=SIZE)
    return doc.tobytes(deflate=True)


@pytest.mark.django_db
def test_an_answer_key_entry_set_as_a_formula_image_is_the_questions_image_shown_on_its_page(researcher, login):
    document, _ = _import(answer_key_paper(), "key.pdf")
    first = _question(document, "计算")
    assert len(first.answers) == 1
    # The page-local token is numbered for the question and its image stored with it.
    assert re.fullmatch(r"\s*\[\[formula:(\d+)\]\]\s*", first.answers[0]), first.answers
    number = int(re.search(r"\d+", first.answers[0]).group())
    formula = first.figures.get(position=number)
    assert formula.kind == Figure.Kind.FORMULA
    assert _question(document, "一个正方形").answers == ["20"]
    # The OCR reviewer is asked to type it, as for a formula image in the text.
    assert "formula_image" in set(first.flags.values_list("code", flat=True))
    body = login(researcher).get(f"/annotate/questions/{first.hash_id}/").content.decode()
    # The answers' list (question_detail.html) shows the image, not the token.
    assert f'<ol data-math><li><img class="formula-image" src="{formula.image.url}"' in body
    assert "[[formula" not in body
