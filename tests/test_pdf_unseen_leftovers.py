"""Issue 23's leftovers: question numbers in filled badges read by OCR, a notice followed by shared material,
and a flat captioned picture beside the text (taken for a formula image before)."""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest
from PIL import Image, ImageDraw, ImageFont

from annotation.pdf import figures, importer, reading
from tests import fixtures_pdf
from tests.test_pdf_robust import analysis_of
from tests.test_pdf_segment_kinds import paper

FONT = "china-s"


def _as_outlines(doc: pymupdf.Document) -> bytes:
    """Each page with its glyphs drawn as vector paths and no text layer (an outlined paper): MuPDF's SVG
    with text as paths, read back."""
    out = pymupdf.open()
    for page in doc:
        svg = pymupdf.open(stream=page.get_svg_image(text_as_path=True).encode(), filetype="svg")
        out.insert_pdf(pymupdf.open("pdf", svg.convert_to_pdf()))
    return out.tobytes()


def badge_paper(first: int = 9, count: int = 5) -> bytes:
    """Choice questions numbered in filled discs, white digits (two-digit ones too), text on the next line."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 70), "一、选择题", fontname=FONT, fontsize=11)
    y = 100.0
    for number in range(first, first + count):
        page.draw_circle((68, y), 8.5, color=(0.2, 0.3, 0.6), fill=(0.2, 0.3, 0.6))
        text = str(number)
        page.insert_text((68 - 2.6 * len(text), y + 3.3), text, fontname="helv", fontsize=9, color=(1, 1, 1))
        page.insert_text((60, y + 24), "下列关于物体运动的说法正确的是（  ）", fontname=FONT, fontsize=11)
        page.insert_text((80, y + 44), "A．甲    B．乙    C．丙    D．丁", fontname=FONT, fontsize=11)
        y += 72
    return _as_outlines(doc)


def test_white_numbers_in_filled_badges_are_read_by_ocr_and_number_the_questions(settings):
    """The text detector missed or misread white digits in a small dark disc (9 lost, 11 read as 1); turned
    into print (dark on white) before OCR they are read, and the questions are numbered by them."""
    assert settings.OCR_BACKEND == "annotation.ocr.RapidOCRBackend"
    parsed = analysis_of(badge_paper()).parsed
    assert [q.number for q in parsed.questions] == [9, 10, 11, 12, 13]
    assert all(q.option_count == 4 for q in parsed.questions)
    assert all(q.text.startswith("下列关于物体运动") for q in parsed.questions)


def test_only_light_text_on_a_solid_fill_is_turned_into_print():
    image = Image.new("L", (400, 120), 255)
    draw = ImageDraw.Draw(image)
    draw.ellipse((10, 10, 40, 40), fill=60)  # a badge …
    draw.text((19, 13), "7", fill=255, font=ImageFont.load_default(size=16))  # … with its number
    draw.ellipse((60, 10, 90, 40), fill=0)  # a bullet: no text inside
    draw.rectangle((110, 10, 130, 110), fill=0)  # a bar of a chart
    draw.rectangle((150, 10, 180, 40), outline=0, width=1)  # a thin frame around white
    draw.text((200, 20), "dark text", fill=0)
    before = np.asarray(image)
    after = np.asarray(reading.dark_fills_as_print(image.convert("RGB"), dpi=120).convert("L"))
    badge = after[10:41, 10:41]
    assert badge.min() < 100 and (badge > 200).mean() > 0.8  # dark digits on white now
    assert (after[:, 50:] == before[:, 50:]).all()  # the bullet, the bar, the frame and the text as they were


def test_on_a_scan_only_a_round_badge_is_turned_into_print_not_a_blot_of_heavy_type():
    """A scan numbered in filled badges loses its numbers as an outlined page did; but an old scan's heavy
    type has solid blots with holes (a 口 inked shut but for its counter), which stay as they are."""
    image = Image.new("L", (400, 120), 255)
    draw = ImageDraw.Draw(image)
    draw.ellipse((10, 10, 40, 40), fill=60)  # a badge …
    draw.text((19, 13), "7", fill=255, font=ImageFont.load_default(size=16))  # … with its number
    draw.rectangle((60, 10, 90, 40), fill=0)  # a square blot …
    draw.rectangle((70, 20, 78, 28), fill=255)  # … with a counter left open
    before = np.asarray(image)
    after = np.asarray(reading.dark_fills_as_print(image.convert("RGB"), dpi=120, discs_only=True).convert("L"))
    badge = after[10:41, 10:41]
    assert badge.min() < 100 and (badge > 200).mean() > 0.8
    assert (after[:, 50:] == before[:, 50:]).all()
    # Not on a scan, the blot is a fill like any other.
    anywhere = np.asarray(reading.dark_fills_as_print(image.convert("RGB"), dpi=120).convert("L"))
    assert not (anywhere[:, 50:] == before[:, 50:]).all()


def test_a_notice_then_shared_material_then_badges():
    """A notice numbered 1．2．3． ends at the material for questions 1-2 (it went into the notice, and the
    badges after it with it: no question at all), and the badges number the questions."""
    content = paper(
        [
            (60, "注意事项："),
            (60, "1．答卷前，考生务必将自己的姓名填写在答题卡上。"),
            (60, "2．回答选择题时，选出每小题答案后涂黑。"),
            (60, "3．考试结束后，将本试卷和答题卡一并交回。"),
            (60, "阅读下列材料，回答1~2题。"),
            (60, "某地区夏季高温多雨，冬季温和少雨，河流水量季节变化大。"),
            (62, "1"),
            (60, "该地区的气候类型是（  ）"),
            (60, "A．甲 B．乙 C．丙 D．丁"),
            (62, "2"),
            (60, "该地区河流的主要补给水源是（  ）"),
            (60, "A．甲 B．乙 C．丙 D．丁"),
            (62, "3"),
            (60, "下列说法正确的是（  ）"),
            (60, "A．甲 B．乙 C．丙 D．丁"),
        ]
    )
    parsed = analysis_of(content).parsed
    assert [q.number for q in parsed.questions] == [1, 2, 3]
    assert [bool(q.shared) for q in parsed.questions] == [True, True, False]
    assert "高温多雨" in parsed.questions[1].shared
    assert parsed.questions[2].text == "下列说法正确的是（  ）"


def flat_figure_paper() -> tuple[bytes, pymupdf.Rect]:
    """A flow chart one line high set beside the text, its caption 题图 under it (as GAOKAO records have)."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 70), "一、选择题", fontname=FONT, fontsize=10.5)
    page.insert_text((60, 100), "1．磷酸亚铁锂电池是新能源汽车的动力电池之一", fontname=FONT, fontsize=10.5)
    picture = pymupdf.Rect(310, 90, 460, 109)
    page.insert_image(picture, stream=fixtures_pdf.raster_figure_png(300, 38), keep_proportion=False)
    page.insert_text((376, 124), "题图", fontname=FONT, fontsize=9)
    page.insert_text((60, 118), "其回收流程如图所示，下列说法错误的是（  ）", fontname=FONT, fontsize=10.5)
    page.insert_text((60, 146), "A．甲    B．乙    C．丙    D．丁", fontname=FONT, fontsize=10.5)
    page.insert_text((60, 176), "2．下列单位中属于国际单位制基本单位的是（  ）", fontname=FONT, fontsize=10.5)
    page.insert_text((60, 194), "A．牛顿    B．焦耳    C．千克    D．瓦特", fontname=FONT, fontsize=10.5)
    return doc.tobytes(), picture


def test_a_flat_captioned_picture_beside_the_text_is_a_figure_not_a_formula():
    content, picture = flat_figure_paper()
    with pymupdf.open(stream=content) as pdf:
        regions = figures.figure_regions(pdf[0], reading.text_layer(pdf[0], 1))
    assert not [r for r in regions if r.is_formula]
    (figure,) = regions
    assert figure.bbox[0] <= picture.x0 and figure.bbox[2] >= picture.x1 and figure.bbox[3] >= 120  # with 题图
    analysis = analysis_of(content)
    first = analysis.parsed.questions[0]
    assert "[[formula" not in first.text and "题图" not in first.text
    assert first.option_count == 4
    assert [len(analysis.figures.get(i, [])) for i in range(2)] == [1, 0]


@pytest.mark.parametrize("caption", ["题图", "第1题图", "图1"])
def test_captions_name_a_figure(caption):
    assert figures.is_caption(caption)
    assert not figures.is_caption("如图所示的题图中")


def test_a_text_page_with_its_one_line_under_the_header_is_not_ocrd():
    """The end of a solution at the top of a last page, under the running header: no picture, no outlines,
    so OCR can find nothing the text layer lacks (it was OCR'd, seconds and the models' load for nothing)."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 40), "天河中学2024—2025学年度高三年级第一次模拟考试", fontname=FONT, fontsize=9)
    page.insert_text((60, 70), "故⑤错误。故选：C。", fontname=FONT, fontsize=10.5)
    page.insert_text((280, 810), "第3页 共3页", fontname=FONT, fontsize=9)
    with pymupdf.open(stream=doc.tobytes()) as pdf:
        text, source, _ = importer.read_page(pdf[0], 1)
        assert not reading.has_usable_text(text)
        assert source == "text-layer" and "故选：C" in "".join(s.text for s in text.spans)
        outlined = pymupdf.open()
        outlined.insert_pdf(pymupdf.open(stream=_as_outlines(pdf)))
        assert reading.has_unread_ink(outlined[0])  # the same page outlined is OCR'd
