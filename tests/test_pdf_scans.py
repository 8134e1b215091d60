"""Scanned papers (issue 23): the figures of a scan drawn in thin light strokes, a rule down the gutter, a last
column of a few lines, an answer key's cells boxed apart by OCR, and a question number whose dot OCR misread."""

from __future__ import annotations

import io

import pymupdf
from PIL import Image, ImageDraw

from annotation.pdf import figures, reading
from annotation.pdf.layout import PageText, Span, line_text
from annotation.pdf.segment import segment
from bench import exam_papers, real_papers
from tests.test_generated_papers import needs_records
from tests.test_pdf_segment_kinds import lines

CHOICES = "A．甲 B．乙 C．丙 D．丁"


def test_a_misread_dot_after_the_next_question_number_still_starts_it():
    """OCR reads a scan's "4．" as "4：" now and then: it is question 4 where 4 comes next, and only there."""
    parsed = segment(
        lines(
            "1．下列关于物质的说法正确的是（）",
            CHOICES,
            "2：下列叙述中，错误的是（）",
            CHOICES,
            "3．甲乙两数之比为",
            "5：下列说法正确的是",  # not the next number: the stem's text
            "4：3，则甲数是多少？",
            CHOICES,  # a ratio starting a line: no question 4
        )  # fmt: skip
    )
    assert [q.number for q in parsed.questions] == [1, 2, 3]
    assert parsed.questions[1].text.startswith("下列叙述中")
    assert "5：下列说法正确的是" in parsed.questions[2].text and "4：3" in parsed.questions[2].text


def _span(text: str, x0: float, x1: float, top: float, bottom: float) -> Span:
    height = bottom - top
    return Span(text, (x0, top, x1, bottom), baseline=bottom - 0.15 * height, size=0.85 * height)


def test_a_table_cells_short_digit_a_gap_away_is_no_exponent_and_a_raised_digit_by_its_base_is():
    """OCR boxes a key table's digit shorter and higher than the 题号 beside it: it was read as 题号¹."""
    row = [_span("题号", 57, 84, 463, 481), _span("1", 104, 115, 465, 476), _span("2", 136, 150, 464, 480),
           _span("3", 168, 185, 464, 479), _span("4", 204, 217, 465, 476)]  # fmt: skip
    assert line_text(row) == "题号 1 2 3 4"
    assert line_text([_span("设 x", 50, 75, 100, 118), _span("2", 75.5, 80, 98, 106)]) == "设 $x^{2}$"


def _ink_of(rows: list[tuple[int, int, int, int]], size: tuple[int, int] = (1000, 1400)) -> Image.Image:
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    for box in rows:
        draw.rectangle(box, fill=0)
    return image


def test_a_last_column_of_a_few_lines_is_a_column_on_a_page_image():
    """A scan's second page: the left column full, the right one holding the end of the answers, a few lines
    at its top. The blank under the short column is no gutter; the gutter is between the columns."""
    left = [(90, 100 + 40 * i, 480, 120 + 40 * i) for i in range(30)]
    right = [(540, 100 + 40 * i, 930, 120 + 40 * i) for i in range(4)]
    gutters = reading.image_gutters(_ink_of(left + right))
    assert len(gutters) == 1 and 480 <= gutters[0] <= 540, gutters
    # A page of one column stays one column.
    assert reading.image_gutters(_ink_of([(90, 100 + 40 * i, 910, 120 + 40 * i) for i in range(30)])) == []


def test_text_filling_only_the_top_of_a_page_is_not_cut_in_two():
    """The last page of an A3 paper: a few questions across the left half, the rest blank. Every x under them is
    blank for most of the page, as a gutter under a title is: the page was cut through the middle of its lines."""
    lines = [(90, 100 + 40 * i, 900 - (i % 3) * 60, 120 + 40 * i) for i in range(10)]
    assert reading.image_gutters(_ink_of(lines, size=(2000, 1400))) == []


def _scanned_page(draw_page) -> pymupdf.Page:  # noqa: ANN001
    image = Image.new("L", (1240, 1754), 250)  # A4 at 150 dpi, paper a little grey
    draw_page(ImageDraw.Draw(image))
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    out = io.BytesIO()
    image.save(out, format="PNG")
    page.insert_image(page.rect, stream=out.getvalue())
    return doc[0]


def test_a_scanned_figure_of_thin_light_strokes_is_found_and_a_gutter_rule_joins_nothing():
    """A flow chart drawn in thin grey lines beside the text, a rule down the gutter: the figure was lost
    (too light on the coarse image), or joined with the rule into one blob larger than any figure."""

    def draw(d: ImageDraw.ImageDraw) -> None:
        d.line((620, 60, 620, 1700), fill=150, width=2)  # the gutter's rule, grey as scanned
        for top in (700, 820, 940):  # the chart's boxes (1 pt strokes, grey), arrows between them
            d.rectangle((900, top, 1100, top + 60), outline=120, width=2)
        d.line((1000, 760, 1000, 820), fill=120, width=2)
        d.line((1000, 880, 1000, 940), fill=120, width=2)

    page = _scanned_page(draw)
    # One question line beside the chart, read by OCR; 开始 inside the chart's first box.
    text = PageText(1, 595, 842, [Span("执行如图所示的程序框图，输出的结果是", (310, 340, 420, 354), 352, 12),
                                  Span("开始", (470, 340, 500, 354), 352, 12)], ocr=True)  # fmt: skip
    boxes = figures.scan_figures(page, text, figures.page_em(text))
    assert len(boxes) == 1, boxes
    x0, y0, x1, y1 = boxes[0]
    assert 405 <= x0 <= 435 and x1 <= 550 and y0 >= 320 and y1 <= 500  # the chart, not the rule at x 298


@needs_records
def test_a_generated_scan_with_light_figures_a_gutter_rule_and_a_short_last_column_reads_whole(tmp_path):
    """A generated two-column scan (its truth known): badges beside figures, flow charts beside the text, a
    ruled gutter, an answer key table and a second page whose right column holds only the last solution. It
    read 4 of 9 questions and no answer of the key table."""
    paper = exam_papers.generate(0, 229)
    assert "variant=scanned" in paper.truth["features"]
    path = tmp_path / paper.truth["file"]
    path.write_bytes(paper.pdf)
    score = real_papers.score_paper(path, paper.truth)
    assert (score.recall, score.precision) == (1.0, 1.0), score.missing
    assert score.crossed == 0 and score.ocr_pages == 2
    assert score.key_total == 6 and score.key_ok == 6  # the key table's letters, each on its question
