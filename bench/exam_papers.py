r"""Exam PDFs laid out the way real Chinese papers are, built from real question text, with known truth.

    python -m bench.exam_papers --out /tmp/papers --count 20 [--seed 0]

The questions come from the records in ``../shared/realdata/records/`` (GAOKAO-Bench objective questions
and GAOKAO-MM with its PNG figures), read at run time: nothing of them is kept in the repository. What
varies is the layout, drawn per paper from a seeded ``random.Random`` so that paper ``i`` of seed ``s`` is
always the same PDF, byte for byte (no date, no random file id), with the same truth:

- page: A4 portrait (1 or 2 columns) or A3 landscape (2 or 3 columns);
- numbering: ``1.`` ``1、`` ``1．`` ``（1）``, a number in a badge on its own line, or a paper numbered
  only by Chinese section numerals (一、二、…, each a whole question);
- section headings with stated counts ("一、选择题：本题共8小题，每小题5分，共40分。");
- options ``A.`` ``A．`` ``(A)`` ``A、``, one per line, two per line or four in a row (a row that does not fit
  falls back to fewer, as a typesetter does);
- answers inline (【答案】【解析】/【详解】), in a separate section at the end (a key several to a line,
  ``1.B 2.A 3.C``, or a table, then worked solutions by number), or none;
- shared stems ("阅读下列材料，回答 5～7 题" and the passage before the questions it introduces);
- figures: the GAOKAO-MM PNGs, or shapes drawn as vector paths, with captions (图1, 第5题图), below the
  question or beside its text;
- a title block with numbered instructions (注意事项：1．… 2．…), running headers (a school name) and
  footers (第1页 共4页, - 1 -);
- variants: "scanned" (each page rasterised, skewed a little, speckled and re-embedded as an image-only
  page) and "outlined" (glyphs drawn as vector paths with no text layer, via MuPDF's SVG output with
  text as paths read back as a PDF: cheap, a few ms a page).

Truth per paper (``Paper.truth``) has the shape of ``../shared/realdata/exams/expected.json`` entries, so
``bench/real_papers.py`` scores both alike, plus what only a generated paper can know: the exact question
text (stem and option texts as printed, for a character error rate), its answer, and the paper's layout
features (to say which of them the importer fails on).

LaTeX in the records is printed as plain text (``\frac{a}{b}`` as a/b, ``x^{2}`` as x2, as a Word paper's
text layer reads): the truth is what the page shows. Records whose math is a table or an array are not
used. Only PyMuPDF, Pillow and numpy: no Django, so tests import it directly.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image

from bench.exam_records import CJK, LATIN, Item, font, load_groups

A4 = (595.0, 842.0)
A3_LANDSCAPE = (1191.0, 842.0)
CHOICE, FILL, FREE = "选择题", "填空题", "解答题"
SECTION_NUMERALS = "一二三四五六七八九十"


# --------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------

NUMBERING = {"dot": "{n}.", "dun": "{n}、", "full": "{n}．", "paren": "（{n}）", "badge": "{n}", "numeral": "{c}、"}
OPTION_STYLES = {"A.": "{L}.", "A．": "{L}．", "(A)": "({L})", "A、": "{L}、"}
SCHOOLS = ("市第一中学", "师范大学附属中学", "实验中学", "外国语学校", "区教育研究院", "育才中学")
PLACES = ("海淀", "江宁", "南山", "武昌", "鼓楼", "天河", "雁塔", "西湖")
INSTRUCTIONS = (
    "答卷前，考生务必将自己的姓名、准考证号填写在答题卡上。",
    "回答选择题时，选出每小题答案后，用铅笔把答题卡上对应题目的答案标号涂黑。",
    "回答非选择题时，将答案写在答题卡上，写在本试卷上无效。",
    "考试结束后，将本试卷和答题卡一并交回。",
)


@dataclass
class Style:
    """One paper's layout, drawn once from its seed; ``features`` names it for the score by feature."""

    page: str  # "A4" (portrait) or "A3" (landscape)
    columns: int
    numbering: str  # a key of NUMBERING
    option_style: str  # a key of OPTION_STYLES
    option_layout: str  # "line", "two" or "row": the widest that fits is used per question, up to this
    answers: str  # "inline", "section" or "none"
    key: str  # "line" or "table": the choice answers in a separate section
    solution_word: str  # 【解析】 or 【详解】
    sections: bool  # headings with stated counts
    instructions: bool  # a title block with numbered 注意事项
    header: str  # a running header ("" for none)
    footer: str  # "of" 第1页 共4页, "dash" - 1 -, "subject" …第1页（共4页）, or ""
    figure_place: str  # "below" or "beside"
    shared_stems: bool
    variant: str  # "text", "scanned" or "outlined"
    size: float
    first: int = 1  # the first question's number: a 理综 paper's physics part starts at 14, its chemistry at 7

    @property
    def features(self) -> list[str]:
        found = [f"page={self.page}", f"columns={self.columns}", f"numbering={self.numbering}",
                 f"options={self.option_style}", f"answers={self.answers}", f"variant={self.variant}"]  # fmt: skip
        if self.answers == "section":
            found.append(f"key={self.key}")
        if self.sections:
            found.append("section headings")
        if self.instructions:
            found.append("numbered instructions")
        if self.header:
            found.append("running header")
        if self.footer:
            found.append(f"footer={self.footer}")
        if self.first > 1:
            found.append("numbers start past 1")
        return found


def draw_style(rng: random.Random, scanned_share: float, outlined_share: float) -> Style:
    page = rng.choice(["A4", "A4", "A3"])
    columns = rng.choice([1, 1, 2]) if page == "A4" else rng.choice([2, 3])
    numbering = rng.choices(list(NUMBERING), weights=[3, 3, 4, 1, 1, 1])[0]
    answers = rng.choices(["inline", "section", "none"], weights=[4, 4, 2])[0]
    roll = rng.random()
    variant = "scanned" if roll < scanned_share else "outlined" if roll < scanned_share + outlined_share else "text"
    return Style(
        page=page,
        columns=columns,
        numbering=numbering,
        option_style=rng.choice(list(OPTION_STYLES)),
        option_layout=rng.choice(["line", "two", "row"]),
        answers=answers,
        key=rng.choice(["line", "table"]),
        solution_word=rng.choice(["【解析】", "【详解】"]),
        sections=numbering != "numeral" and rng.random() < 0.75,
        instructions=rng.random() < 0.4,
        header=rng.choice(["", f"{rng.choice(PLACES)}{rng.choice(SCHOOLS)}2024—2025学年度高三年级第一次模拟考试"]),
        footer=rng.choice(["", "of", "dash", "subject"]),
        figure_place=rng.choice(["below", "beside"]),
        shared_stems=rng.random() < 0.5,
        variant=variant,
        size=rng.choice([10.0, 10.5, 11.0]),
        first=1 if numbering == "numeral" or rng.random() < 0.75 else rng.choice([6, 7, 13, 14, 16]),
    )


@cache
def _latin_width(char: str) -> float:
    return pymupdf.get_text_length(char, fontname=LATIN, fontsize=1)


def text_width(text: str, size: float) -> float:
    return sum(_latin_width(c) if c.isascii() else 1.0 for c in text) * size


def wrap(text: str, width: float, size: float, first_width: float | None = None) -> list[str]:
    """Greedy line breaking by measured width; a Latin word is not split unless it is wider than a line."""
    lines, line, used = [], "", 0.0
    limit = first_width if first_width is not None else width
    for token in re.findall(r"[A-Za-z0-9]+|.", text):
        w = text_width(token, size)
        if used + w > limit and line:
            lines.append(line.rstrip())
            line, used, limit = "", 0.0, width
            if token.isspace():
                continue
        if w > limit:  # a token wider than a whole line goes character by character
            for c in token:
                cw = text_width(c, size)
                if used + cw > limit and line:
                    lines.append(line)
                    line, used, limit = "", 0.0, width
                line, used = line + c, used + cw
            continue
        line, used = line + token, used + w
    if line.strip():
        lines.append(line.rstrip())
    return lines


@dataclass
class Figure:
    picture: Path | None  # a record's PNG, or None for shapes drawn as paths
    caption: str
    seed: int
    number: int  # the question's


class Writer:
    """Places lines top to bottom in columns, like a typesetter with a cursor."""

    def __init__(self, style: Style, rng: random.Random) -> None:
        self.style, self.rng = style, rng
        self.doc = pymupdf.open()
        self.width, self.height = A4 if style.page == "A4" else A3_LANDSCAPE
        margin = 56.0 if style.page == "A4" else 60.0
        gap = 28.0
        span = (self.width - 2 * margin - gap * (style.columns - 1)) / style.columns
        self.columns = [(margin + i * (span + gap), margin + i * (span + gap) + span) for i in range(style.columns)]
        self.top, self.bottom = 64.0, self.height - 58.0
        self.size = style.size
        self.leading = style.size * 1.75
        self.page: pymupdf.Page | None = None
        self.writer: pymupdf.TextWriter | None = None  # a page's text, written at once (insert_text per run is slow)
        self.column, self.y = 0, self.top
        self.float_x, self.float_bottom = 0.0, 0.0  # a figure beside the text narrows the lines next to it
        self.new_page()

    # The cursor ----------------------------------------------------------------------------

    def new_page(self) -> None:
        self.flush()
        self.page = self.doc.new_page(width=self.width, height=self.height)
        self.writer = pymupdf.TextWriter(self.page.rect)
        self.column, self.y, self.float_bottom = 0, self.top, 0.0
        if self.style.header:
            size = 8.5
            self.put((self.width - text_width(self.style.header, size)) / 2, 40, self.style.header, size)
            self.page.draw_line((40, 46), (self.width - 40, 46), width=0.5)
        if self.style.columns > 1 and self.rng.random() < 0.5:
            for x0, _ in self.columns[1:]:
                self.page.draw_line((x0 - 14, self.top - 8), (x0 - 14, self.bottom), width=0.4)

    def next_column(self) -> None:
        self.float_bottom = 0.0
        if self.column + 1 < len(self.columns):
            self.column, self.y = self.column + 1, self.top
        else:
            self.new_page()

    def ensure(self, height: float) -> None:
        if self.y + height > self.bottom and self.y > self.top:
            self.next_column()

    @property
    def x0(self) -> float:
        return self.columns[self.column][0]

    @property
    def x1(self) -> float:
        return self.float_x if self.y < self.float_bottom else self.columns[self.column][1]

    def clear_float(self) -> None:
        if self.y < self.float_bottom:
            self.y = self.float_bottom
        self.float_bottom = 0.0

    # Text ------------------------------------------------------------------------------------

    def flush(self) -> None:
        if self.page is not None and self.writer is not None:
            self.writer.write_text(self.page)
            self.writer = None

    def put(self, x: float, y: float, text: str, size: float | None = None) -> float:
        """Writes one line at a baseline, Latin runs in Helvetica and the rest in the CJK font."""
        assert self.writer is not None
        size = size or self.size
        for run in re.findall(r"[\x20-\x7e]+|[^\x20-\x7e]+", text):
            if run.strip():
                self.writer.append((x, y), run, font=font(LATIN if run.isascii() else CJK), fontsize=size)
            x += text_width(run, size)
        return x

    def line(self, text: str, indent: float = 0.0, size: float | None = None) -> None:
        size = size or self.size
        self.ensure(self.leading)
        self.y += self.leading
        self.put(self.x0 + indent, self.y - self.leading * 0.3, text, size)

    def paragraph(self, text: str, first: str = "", indent: float = 0.0, hang: float = 0.0) -> None:
        """``first`` (a number) then ``text`` wrapped to the column; later lines indented by ``hang``."""
        head = text_width(first, self.size)
        pieces = wrap(text, self.x1 - self.x0 - indent - hang, self.size, self.x1 - self.x0 - indent - head)
        for i, piece in enumerate(pieces or [""]):
            self.ensure(self.leading)
            if i == 0:
                self.line(first + piece, indent)
            else:
                # The width may change when the line passes the bottom of a figure beside the text.
                self.line(piece, indent + hang)

    def centered(self, text: str, size: float) -> None:
        x0, x1 = self.columns[self.column][0], self.columns[self.column][1]
        # A title wider than its column is set smaller to fit it, as a typesetter would: it does not run
        # past the page's margin and across the gutter.
        size = min(size, (x1 - x0) / max(text_width(text, 1.0), 1e-6))
        self.ensure(size * 2)
        self.y += size * 2
        self.put(x0 + (x1 - x0 - text_width(text, size)) / 2, self.y - size * 0.5, text, size)

    def badge(self, number: int) -> None:
        """The question number in a filled circle on a line of its own (a style of many school papers)."""
        assert self.page is not None
        self.ensure(self.leading * 2)
        self.y += self.leading
        r = self.size * 0.8
        cx, cy = self.x0 + r + 1, self.y - self.leading * 0.3 - self.size * 0.35
        self.page.draw_circle((cx, cy), r, color=(0.2, 0.3, 0.6), fill=(0.2, 0.3, 0.6))
        text, size = str(number), self.size * 0.85
        badge = pymupdf.TextWriter(self.page.rect, color=(1, 1, 1))
        badge.append((cx - text_width(text, size) / 2, cy + size * 0.35), text, font=font(LATIN), fontsize=size)
        badge.write_text(self.page)

    # Figures ---------------------------------------------------------------------------------

    def figure_size(self, figure: Figure) -> tuple[float, float]:
        width = min(150.0, (self.columns[self.column][1] - self.x0) * 0.42)
        if figure.picture is not None:
            with Image.open(figure.picture) as image:
                aspect = image.height / image.width
        else:
            aspect = 0.75
        return width, min(width * aspect, 130.0)

    def draw_figure(self, figure: Figure, rect: pymupdf.Rect) -> None:
        assert self.page is not None
        if figure.picture is not None:
            self.page.insert_image(rect, filename=str(figure.picture))
        else:
            _draw_shape(self.page, rect, random.Random(figure.seed))
        size = self.size * 0.85
        self.put(rect.x0 + (rect.width - text_width(figure.caption, size)) / 2, rect.y1 + size * 1.4,
                 figure.caption, size)  # fmt: skip

    def figure_below(self, figure: Figure) -> None:
        width, height = self.figure_size(figure)
        self.clear_float()
        where = (self.page, self.column)
        self.ensure(height + self.size * 2.5)
        if (self.page, self.column) != where:
            # Carried over to the next column or page: a typesetter names the question it belongs to.
            figure.caption = f"第{figure.number}题图"
        x0 = self.x0 + (self.columns[self.column][1] - self.x0 - width) / 2
        rect = pymupdf.Rect(x0, self.y + 4, x0 + width, self.y + 4 + height)
        self.draw_figure(figure, rect)
        self.y = rect.y1 + self.size * 2

    def figure_beside(self, figure: Figure) -> None:
        width, height = self.figure_size(figure)
        self.clear_float()
        self.ensure(height + self.size * 2.5)
        x1 = self.columns[self.column][1]
        rect = pymupdf.Rect(x1 - width, self.y + 6, x1, self.y + 6 + height)
        self.draw_figure(figure, rect)
        self.float_x, self.float_bottom = rect.x0 - 10, rect.y1 + self.size * 2


def _draw_shape(page: pymupdf.Page, rect: pymupdf.Rect, rng: random.Random) -> None:
    """A geometry figure or a graph drawn as vector paths, as typeset papers carry them."""
    kind = rng.choice(["triangle", "axes", "circuit"])
    shape = page.new_shape()
    x0, y0, x1, y1 = rect.x0, rect.y0, rect.x1, rect.y1
    if kind == "triangle":
        points = [(x0 + rng.uniform(0, 0.3) * rect.width, y1 - 4), (x1 - 4, y1 - 4),
                  (x0 + rng.uniform(0.3, 0.8) * rect.width, y0 + 4)]  # fmt: skip
        shape.draw_polyline([*points, points[0]])
        shape.finish(width=0.8)
        for (x, y), name in zip(points, "BCA", strict=True):
            page.insert_text((x - 8 if x < x1 - 10 else x + 2, y + (10 if y > y0 + 10 else -2)), name,
                             fontname="tiro", fontsize=8)  # fmt: skip
    elif kind == "axes":
        ox, oy = x0 + rect.width * 0.2, y0 + rect.height * 0.75
        shape.draw_line((x0 + 2, oy), (x1 - 2, oy))
        shape.draw_line((ox, y1 - 2), (ox, y0 + 2))
        shape.finish(width=0.6)
        a, b = rng.uniform(0.2, 0.6), rng.uniform(0.5, 2.0)
        points = [(x, oy - a * rect.height * (1 - ((x - ox) / rect.width * b - 0.5) ** 2)) for x in
                  np.linspace(x0 + 6, x1 - 6, 40).tolist()]  # fmt: skip
        shape.draw_polyline(points)
        shape.finish(width=0.9)
        page.insert_text((ox - 8, oy + 9), "O", fontname="tiro", fontsize=8)
    else:
        shape.draw_rect(pymupdf.Rect(x0 + 8, y0 + 8, x1 - 8, y1 - 8))
        shape.finish(width=0.8)
        cx, cy = (x0 + x1) / 2, y0 + 8
        shape.draw_circle((cx, cy), 7)
        shape.finish(width=0.8, fill=(1, 1, 1))
        shape.draw_rect(pymupdf.Rect(x0 + 2, (y0 + y1) / 2 - 8, x0 + 14, (y0 + y1) / 2 + 8))
        shape.finish(width=0.8, fill=(1, 1, 1))
    shape.commit()


# --------------------------------------------------------------------------------------------
# Papers
# --------------------------------------------------------------------------------------------


@dataclass
class Question:
    """One question as the paper prints it, and its truth."""

    item: Item
    qtype: str
    number: int = 0
    label: str = ""
    stem: str = ""
    options: list[str] = field(default_factory=list)
    answer: str = ""
    solution: str = ""
    figure: Figure | None = None
    passage: str = ""  # the shared stem printed before this question's group
    shared: str = ""  # what the page prints for the group this question is in (intro and passage)
    features: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The question's own text as printed: its stem, then its options without their letters."""
        return self.stem + "".join(self.options)


def _as_type(item: Item, qtype: str) -> tuple[str, list[str], str, str]:
    """Stem, options, answer and solution of a choice record asked as ``qtype``."""
    blank = re.compile(r"\s*[（(]\s*[)）]\s*")
    if qtype == CHOICE:
        return item.stem, item.options, item.answer, item.analysis
    bare = blank.sub("", item.stem).rstrip("，,：:")
    if qtype == FILL:
        answer = item.options["ABCD".index(item.answer[0])]
        stem = blank.sub("________", item.stem) if blank.search(item.stem) else item.stem + "________"
        return stem, [], answer, item.analysis
    return bare + "请写出判断的过程。", [], "", item.analysis


def _pick(rng: random.Random, style: Style, count: int) -> list[Question]:
    groups = [g for g in load_groups() if style.shared_stems or not g[0].passage]
    rng.shuffle(groups)
    questions: list[Question] = []
    if style.numbering == "numeral":
        return [Question(group[0], FREE) for group in groups[: min(count, 8)]]
    choice_count = max(2, round(count * rng.uniform(0.45, 0.7)))
    for group in groups:
        if len(questions) >= count:
            break
        if len(questions) < choice_count:
            shared = group[0].passage if style.shared_stems else ""
            for i, item in enumerate(group):
                questions.append(Question(item, CHOICE, passage=shared if i == 0 else ""))
                if shared:
                    questions[-1].features.append("shared stem")
        elif len(group) == 1 and not group[0].passage:
            qtype = FILL if len(questions) < choice_count + max(1, (count - choice_count) // 2) else FREE
            if qtype == FILL and len(group[0].answer) > 1:
                qtype = FREE  # a fill-in blank takes one answer
            questions.append(Question(group[0], qtype))
    return questions


@dataclass
class Paper:
    pdf: bytes
    truth: dict


def paper_rng(seed: int, index: int) -> random.Random:
    digest = hashlib.blake2b(f"exam-paper:{seed}:{index}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def generate(seed: int, index: int, *, scanned_share: float = 0.04, outlined_share: float = 0.04) -> Paper:
    """Paper ``index`` of ``seed``: the same layout and truth every time."""
    rng = paper_rng(seed, index)
    style = draw_style(rng, scanned_share, outlined_share)
    questions = _pick(rng, style, rng.randint(6, 16))
    writer = Writer(style, rng)
    _title(writer, rng)
    for n, q in enumerate(questions, style.first):
        q.number = n
        q.label = SECTION_NUMERALS[n - 1] if style.numbering == "numeral" else ""
        q.stem, q.options, q.answer, q.solution = _as_type(q.item, q.qtype)
        if q.item.picture is not None or rng.random() < 0.15:
            caption = rng.choice([f"第{n}题图", f"图{n}", "题图"])
            q.figure = Figure(q.item.picture, caption, rng.randrange(1 << 30), n)
            q.features.append(f"figure {style.figure_place}")
    _body(writer, questions, rng)
    if style.answers == "section":
        _answer_section(writer, questions, rng)
    writer.flush()
    _footers(writer, rng)
    writer.doc.subset_fonts()  # the CJK font whole is 1.7 MB a paper
    pdf = writer.doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    writer.doc.close()
    if style.variant == "scanned":
        pdf = scanned(pdf, rng)
    elif style.variant == "outlined":
        pdf = outlined(pdf)
    truth = {
        "file": f"generated_{seed}_{index:04d}.pdf",
        "seed": seed,
        "index": index,
        "generated": True,
        "features": style.features,
        "header": style.header,  # the running header printed on every page (not question text)
        "question_count": len(questions),
        "questions": [
            {
                "number": q.number,
                **({"label": q.label} if q.label else {}),
                "type": q.qtype,
                "options": len(q.options) or None,
                "answer": q.answer,
                "has_solution": style.answers != "none",
                "figures": 1 if q.figure else 0,
                "text": q.text,
                "stem": q.stem,
                "option_texts": q.options,
                # Material every question of its group shares, as printed (intro and passage): a reader
                # may show it with each of them.
                "shared_stem": q.shared,
                "solution": q.solution if style.answers != "none" else "",
                "features": q.features,
                "source": q.item.source,
            }
            for q in questions
        ],
    }
    return Paper(pdf, truth)


def _title(w: Writer, rng: random.Random) -> None:
    if rng.random() < 0.5:
        w.line("绝密★启用前", size=w.size * 0.9)
    titles = ["2025年普通高等学校招生全国统一考试", "高三年级综合能力测试", "2024—2025学年第二学期期中考试"]
    w.centered(rng.choice(titles), w.size * 1.5)
    w.centered(rng.choice(["理科综合", "综合测试", "文理综合", "学科素养测试"]), w.size * 1.3)
    if w.style.instructions:
        w.line("注意事项：")
        for i, text in enumerate(INSTRUCTIONS[: rng.randint(2, 4)], 1):
            w.paragraph(text, first=f"{i}．", indent=w.size, hang=w.size * 1.5)


SECTION_HEADINGS = {
    CHOICE: ("选择题", "在每小题给出的四个选项中，只有一项是符合题目要求的。"),
    FILL: ("填空题", "把答案填在题中的横线上。"),
    FREE: ("解答题", "解答应写出文字说明、证明过程或演算步骤。"),
}


def _heading(w: Writer, index: int, qtype: str, count: int, rng: random.Random) -> None:
    name, rule = SECTION_HEADINGS[qtype]
    each = rng.choice([4, 5, 6])
    total = f"每小题{each}分，共{count * each}分"
    stated = rng.choice([f"（本题共{count}小题，{total}）", f"：本题共{count}小题，{total}。", f"（共{count}小题）"])
    w.ensure(w.leading * 4)
    w.paragraph(f"{SECTION_NUMERALS[index]}、{name}{stated}{rule if rng.random() < 0.6 else ''}")


def _number(style: Style, q: Question) -> str:
    return NUMBERING[style.numbering].format(n=q.number, c=q.label)


def _body(w: Writer, questions: list[Question], rng: random.Random) -> None:
    style = w.style
    sections = [t for t in (CHOICE, FILL, FREE) if any(q.qtype == t for q in questions)]
    gap = rng.choice(["", " ", "  "])
    for i, q in enumerate(questions):
        if style.sections and (i == 0 or q.qtype != questions[i - 1].qtype):
            _heading(w, sections.index(q.qtype), q.qtype, sum(x.qtype == q.qtype for x in questions), rng)
        if q.passage:
            group = [x for x in questions if x.item.passage == q.item.passage and x.item.source == q.item.source]
            span = f"{group[0].number}～{group[-1].number}" if len(group) > 1 else f"第{q.number}"
            intro = rng.choice([f"阅读下列材料，回答{span}题。", f"据此完成{span}题。", f"读图，完成{span}题。"])
            w.paragraph(intro)
            w.paragraph(q.passage, first="　　" if rng.random() < 0.5 else "")
            for member in group:
                member.shared = intro + q.passage
        w.ensure(w.leading * 3)
        if q.figure and style.figure_place == "beside":
            w.figure_beside(q.figure)
        if style.numbering == "badge":
            w.badge(q.number)
            w.paragraph(q.stem)
        else:
            head = _number(style, q) + gap
            w.paragraph(q.stem, first=head, hang=0 if rng.random() < 0.5 else text_width(head, w.size))
        if q.options:
            q.features.append("options " + _options(w, q, rng))
        if q.figure and style.figure_place == "below":
            w.figure_below(q.figure)
        w.clear_float()
        if style.answers == "inline":
            _inline_answer(w, q)


def _option_label(style: Style, letter: str) -> str:
    return OPTION_STYLES[style.option_style].format(L=letter)


def _options(w: Writer, q: Question, rng: random.Random) -> str:
    """The options in the widest layout that fits, up to the paper's; says which was used."""
    style = w.style
    labels = [_option_label(style, "ABCD"[i]) + rng.choice(["", " "]) for i in range(len(q.options))]
    cells = [label + text for label, text in zip(labels, q.options, strict=True)]
    width = w.x1 - w.x0 - w.size * 2
    widest = max(text_width(c, w.size) for c in cells) + w.size
    order = ["row", "two", "line"]
    for layout in order[order.index(style.option_layout) :]:
        per = {"row": 4, "two": 2, "line": 1}[layout]
        if per == 1 or widest * per <= width:
            break
    step = width / per
    for start in range(0, len(cells), per):
        row = cells[start : start + per]
        if per == 1:
            w.paragraph(row[0][len(labels[start]) :], first=labels[start], indent=w.size * 2,
                        hang=text_width(labels[start], w.size))  # fmt: skip
            continue
        w.ensure(w.leading)
        w.y += w.leading
        for i, cell in enumerate(row):
            w.put(w.x0 + w.size * 2 + i * step, w.y - w.leading * 0.3, cell)
    return layout


def _inline_answer(w: Writer, q: Question) -> None:
    if q.answer:
        w.paragraph(q.answer, first="【答案】")
    if q.solution:
        w.paragraph(q.solution, first=w.style.solution_word)


def _answer_section(w: Writer, questions: list[Question], rng: random.Random) -> None:
    style = w.style
    if rng.random() < 0.5:
        w.next_column()
    w.centered(rng.choice(["参考答案", "参考答案及评分标准", "答案与解析"]), w.size * 1.3)
    choices = [q for q in questions if q.qtype == CHOICE]
    if choices:
        if style.key == "table":
            _key_table(w, choices)
        else:
            sep = rng.choice([".", "．", "、"])
            entries = [f"{q.number}{sep}{q.answer}" for q in choices]
            per = rng.choice([4, 5, 6, 10])
            for start in range(0, len(entries), per):
                w.paragraph("  ".join(entries[start : start + per]))
    detailed = rng.random() < 0.5
    for q in questions:
        if q.qtype == CHOICE and not detailed:
            continue
        head = _number(style, q) if style.numbering != "badge" else f"{q.number}．"
        if q.qtype == FILL:
            w.paragraph(q.answer, first=head + "【答案】")
            w.paragraph(q.solution, first=style.solution_word)
        else:
            w.paragraph(q.solution, first=head + (style.solution_word if rng.random() < 0.5 else ""))


def _key_table(w: Writer, choices: list[Question]) -> None:
    """题号 and 答案 in a ruled table, as many columns a row as fit."""
    assert w.page is not None
    cell, head = w.size * 3.2, w.size * 3.5
    per = max(1, int((w.columns[w.column][1] - w.x0 - head) // cell))
    for start in range(0, len(choices), per):
        row = choices[start : start + per]
        w.ensure(w.leading * 2.5)
        top = w.y + 4
        for r, (name, values) in enumerate((("题号", [str(q.number) for q in row]), ("答案", [q.answer for q in row]))):
            y = top + (r + 1) * w.leading
            w.put(w.x0 + 4, y - w.leading * 0.3, name)
            for i, value in enumerate(values):
                x = w.x0 + head + i * cell
                w.put(x + (cell - text_width(value, w.size)) / 2, y - w.leading * 0.3, value)
        right = w.x0 + head + len(row) * cell
        for r in range(3):
            w.page.draw_line((w.x0, top + r * w.leading), (right, top + r * w.leading), width=0.5)
        for x in [w.x0, w.x0 + head, *[w.x0 + head + (i + 1) * cell for i in range(len(row))]]:
            w.page.draw_line((x, top), (x, top + 2 * w.leading), width=0.5)
        w.y = top + 2 * w.leading + 6


def _footers(w: Writer, rng: random.Random) -> None:
    total = w.doc.page_count
    for i in range(1, total + 1):
        page = w.doc.load_page(i - 1)
        text = {"of": f"第{i}页 共{total}页", "dash": f"- {i} -", "subject": f"综合试题 第{i}页（共{total}页）",
                "": ""}[w.style.footer]  # fmt: skip
        if text:
            w.page, w.writer = page, pymupdf.TextWriter(page.rect)
            w.put((w.width - text_width(text, 9)) / 2, w.height - 28, text, 9)
            w.flush()


# --------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------


def scanned(pdf: bytes, rng: random.Random, dpi: int = 150) -> bytes:
    """Each page as a scanner gives it back: grey, skewed by under a degree, speckled, JPEG, no text."""
    source, out = pymupdf.open("pdf", pdf), pymupdf.open()
    noise = np.random.default_rng(rng.randrange(1 << 30))
    for number in range(source.page_count):
        page = source.load_page(number)
        pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
        image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
        image = image.rotate(rng.uniform(-0.8, 0.8), resample=Image.Resampling.BILINEAR, fillcolor=255)
        pixels = np.asarray(image, dtype=np.int16) + noise.normal(0, 9, (image.height, image.width))
        specks = noise.random((image.height, image.width)) < 0.0015
        pixels[specks] = 0
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=70)
        target = out.new_page(width=page.rect.width, height=page.rect.height)
        target.insert_image(target.rect, stream=buffer.getvalue())
    data = out.tobytes(garbage=3, deflate=True, no_new_id=True)
    source.close()
    out.close()
    return data


def outlined(pdf: bytes) -> bytes:
    """Glyphs drawn as vector paths and no text layer: MuPDF's SVG of each page, text as paths, read back."""
    source, out = pymupdf.open("pdf", pdf), pymupdf.open()
    for number in range(source.page_count):
        page = source.load_page(number)
        svg = pymupdf.open(stream=page.get_svg_image(text_as_path=True).encode(), filetype="svg")
        out.insert_pdf(pymupdf.open("pdf", svg.convert_to_pdf()))
    data = out.tobytes(garbage=3, deflate=True, no_new_id=True)
    source.close()
    out.close()
    return data


def write_papers(out: Path, count: int, seed: int = 0, **shares: float) -> list[dict]:
    """``count`` papers and their ``expected.json`` into ``out``, laid out like ``../shared/realdata/exams``."""
    out.mkdir(parents=True, exist_ok=True)
    truths = []
    for index in range(count):
        paper = generate(seed, index, **shares)
        (out / paper.truth["file"]).write_bytes(paper.pdf)
        truths.append(paper.truth)
    (out / "expected.json").write_text(json.dumps(truths, ensure_ascii=False, indent=1), encoding="utf-8")
    return truths


def normalized(text: str) -> str:
    """Text compared without layout: NFKC (full-width forms as half-width), no whitespace."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scanned", type=float, default=0.04, help="share of scanned papers")
    parser.add_argument("--outlined", type=float, default=0.04, help="share of papers with outlined glyphs")
    args = parser.parse_args(argv)
    truths = write_papers(args.out, args.count, args.seed, scanned_share=args.scanned, outlined_share=args.outlined)
    print(f"{len(truths)} papers, {sum(t['question_count'] for t in truths)} questions in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
