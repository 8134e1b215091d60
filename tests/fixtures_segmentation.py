"""A made-up paper the importer cuts wrongly, for the segmentation screen's tests.

One column: question 1, then a picture that belongs to question 2 but stands above it (the importer
gives it to question 1), question 2 followed by a question printed without its number (the importer
reads it into question 2: a missed question), and questions 3 (with its answer inline) and 4, which a
person may merge.
"""

from __future__ import annotations

import pymupdf

from tests import fixtures_pdf
from tests.fixtures_pdf import FONT, SIZE

FIGURE = (220.0, 120.0, 370.0, 220.0)
# Where each line's text sits (its baseline y), so a test can draw boxes round them.
LINES = {"1": 100, "2": 250, "missed": 290, "3": 330, "answer3": 346, "4": 376}
MISSED = "已知 a=2，求 a+1 的值。"


def repair_paper() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)

    def line(y: float, text: str) -> None:
        page.insert_text((60, y), text, fontname=FONT, fontsize=SIZE)

    line(70, "一、解答题")
    line(LINES["1"], "1．计算 2+3 的值。")
    page.insert_image(pymupdf.Rect(*FIGURE), stream=fixtures_pdf.raster_figure_png())
    line(LINES["2"], "2．如图，求三角形的面积。")
    line(LINES["missed"], MISSED)
    line(LINES["3"], "3．解方程 x+1=4。")
    line(LINES["answer3"], "【答案】x=3")
    line(LINES["4"], "4．写出解的过程。")
    return doc.tobytes()


def box_round(key: str, x1: float = 300) -> list[float]:
    """A box round one line of the paper, in PDF points."""
    y = LINES[key]
    return [55, y - 13, x1, y + 5]
