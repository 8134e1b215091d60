"""Builds the test PDFs at test time with PyMuPDF, so the repository carries no
binary fixtures and every layout feature the importer handles is visible here.

Text uses PyMuPDF's built-in CJK font (``china-s``), so the Chinese is in the
text layer with real positions, as in a typeset exam paper.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import pymupdf
from PIL import Image, ImageDraw

FONT = "china-s"
SIZE = 10.5
LEADING = 16
A4 = (595, 842)
HEADER = "2026学年第一学期九年级数学期末试卷"


def width_of(text: str, size: float = SIZE) -> float:
    # The built-in CJK font sets every glyph, Latin too, one em wide.
    return pymupdf.get_text_length(text, fontname=FONT, fontsize=size)


def raster_figure_png(width: int = 360, height: int = 240) -> bytes:
    """A bar chart drawn with Pillow: stands in for a scanned figure embedded in the paper."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    draw.line([(30, height - 30), (width - 20, height - 30)], fill="black", width=3)
    draw.line([(30, 20), (30, height - 30)], fill="black", width=3)
    for i, bar in enumerate([80, 150, 110, 60]):
        x = 60 + i * 70
        draw.rectangle([x, height - 30 - bar, x + 40, height - 30], outline="black", fill=(90, 140, 220), width=2)
    return _png(image)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


@dataclass
class Column:
    x0: float
    x1: float


@dataclass
class Writer:
    """Places lines top to bottom in columns, like a typesetter with a cursor."""

    doc: pymupdf.Document
    columns: list[Column]
    header: str = HEADER
    top: float = 70
    bottom: float = 790
    page: pymupdf.Page | None = None
    column: int = 0
    y: float = 0
    pages: list[pymupdf.Page] = field(default_factory=list)

    def new_page(self) -> None:
        self.page = self.doc.new_page(width=A4[0], height=A4[1])
        self.pages.append(self.page)
        self.column, self.y = 0, self.top
        # The running header with its rule, and the footer with the page number:
        # the importer must drop both.
        self.centered(self.header, 40, size=9)
        self.page.draw_line((40, 48), (555, 48), width=0.5)

    def next_column(self) -> None:
        if self.column + 1 < len(self.columns):
            self.column += 1
            self.y = self.top
        else:
            self.new_page()

    def centered(self, text: str, y: float, size: float = SIZE) -> None:
        assert self.page is not None
        self.page.insert_text(((A4[0] - width_of(text, size)) / 2, y), text, fontname=FONT, fontsize=size)

    @property
    def x(self) -> float:
        return self.columns[self.column].x0

    def line(self, *parts: str | tuple[str, str], indent: float = 0) -> float:
        """One line made of runs; ("sup", "2") is a raised small run, ("latin", "21") a run in a Latin
        font. Returns the baseline."""
        assert self.page is not None
        self.y += LEADING
        x = self.x + indent
        for part in parts:
            kind, text = part if isinstance(part, tuple) else ("text", part)
            if kind == "sup":
                size = SIZE * 0.6
                self.page.insert_text((x, self.y - SIZE * 0.38), text, fontname=FONT, fontsize=size)
            elif kind == "latin":  # a run in a Latin font, as Word sets digits and letters: a span of its own
                size = SIZE
                self.page.insert_text((x, self.y), text, fontname="tiro", fontsize=size)
                x += pymupdf.get_text_length(text, fontname="tiro", fontsize=size) - width_of(text, size)
            else:
                size = SIZE
                self.page.insert_text((x, self.y), text, fontname=FONT, fontsize=size)
            x += width_of(text, size)
        return self.y

    def options(self, *options: str, per_line: int = 4) -> None:
        """Options at tab stops, ``per_line`` to a line, as exam typesetting does."""
        assert self.page is not None
        step = (self.columns[self.column].x1 - self.x - 12) / per_line
        for start in range(0, len(options), per_line):
            self.y += LEADING
            for i, option in enumerate(options[start : start + per_line]):
                self.page.insert_text((self.x + 12 + i * step, self.y), option, fontname=FONT, fontsize=SIZE)

    def image(self, png: bytes, width: float, height: float) -> pymupdf.Rect:
        assert self.page is not None
        rect = pymupdf.Rect(self.x + 30, self.y + 6, self.x + 30 + width, self.y + 6 + height)
        self.page.insert_image(rect, stream=png)
        self.y = rect.y1
        return rect

    def circle_figure(self, size: float = 90) -> pymupdf.Rect:
        """A circle with a diameter and a chord, drawn as vectors, with vertex labels."""
        assert self.page is not None
        cx, cy, r = self.x + 30 + size / 2, self.y + 10 + size / 2, size / 2 - 6
        self.page.draw_circle((cx, cy), r, width=1)
        self.page.draw_line((cx - r, cy), (cx + r, cy), width=1)
        self.page.draw_line((cx - r, cy), (cx + r * 0.3, cy - r * 0.95), width=1)
        self.page.draw_line((cx + r * 0.3, cy - r * 0.95), (cx + r, cy), width=1)
        self.page.insert_text((cx - r - 9, cy + 4), "A", fontname=FONT, fontsize=8)
        self.page.insert_text((cx + r + 2, cy + 4), "B", fontname=FONT, fontsize=8)
        self.y += size + 14
        return pymupdf.Rect(cx - r, cy - r, cx + r, cy + r)

    def finish(self) -> bytes:
        total = len(self.doc)
        for number, page in enumerate(self.doc, start=1):
            text = f"第 {number} 页 共 {total} 页"
            page.insert_text(((A4[0] - width_of(text, 9)) / 2, 815), text, fontname=FONT, fontsize=9)
        return self.doc.tobytes(garbage=3, deflate=True)


TWO_COLUMNS = [Column(45, 285), Column(310, 550)]
THREE_COLUMNS = [Column(40, 200), Column(218, 378), Column(396, 556)]


@dataclass
class ExamLayout:
    """What the two-column exam holds, for assertions: figure rects in PDF points by page."""

    pdf: bytes
    raster_rect: pymupdf.Rect
    drawing_rect: pymupdf.Rect


def two_column_exam() -> ExamLayout:
    """A two-column math paper: three sections, eight questions, answers at the end.

    Question 4 runs from the left column into the right one; question 7 runs from
    page 1 onto page 2. Question 1 has a raised small ``2`` (x squared).
    """
    w = Writer(pymupdf.open(), TWO_COLUMNS)
    w.new_page()
    w.centered("九年级数学期末考试（满分40分）", 66, size=14)
    w.y = 80
    w.line("一、选择题（本大题共4小题，每小题3分）")
    w.line("1．已知 x", ("sup", "2"), "=4，则 x 的值是（  ）")
    w.options("A．2", "B．-2", "C．±2", "D．4")
    w.line("2．某班四个小组的人数如图所示，人数")
    w.line("最多的是（  ）")
    raster = w.image(raster_figure_png(), 150, 100)
    w.options("A．第一组", "B．第二组", "C．第三组", "D．第四组", per_line=2)
    w.line("3．计算 2+3×4 的结果是（  ）")
    w.options("A．14", "B．20", "C．24", "D．11", per_line=1)
    w.line("4．如图，AB 是⊙O 的直径，点 C")
    drawing = w.circle_figure()
    w.y = w.bottom - LEADING  # the question continues at the top of the right column
    w.line("在⊙O 上，则∠ACB 的度数")
    w.next_column()
    w.line("是（  ）")
    w.options("A．30°", "B．45°", "C．60°", "D．90°")
    w.line("二、填空题（本大题共2小题，每小题4分）")
    w.line("5．分解因式：ab-a=________．")
    w.line("6．若一次函数 y=kx+3 的图像经过")
    w.line("点(1,5)，则 k=________．")
    w.line("三、解答题（本大题共2小题，共20分）")
    w.line("7．已知抛物线 y=ax", ("sup", "2"), "+bx+c 经过点")
    w.y = w.bottom - LEADING
    w.line("A(-1,0)，B(3,0)，C(0,3)．")
    w.new_page()  # question 7 goes on at the top of page 2
    w.line("（1）求抛物线的解析式；")
    w.line("（2）求抛物线的顶点坐标．")
    w.line("8．在△ABC 中，AB=AC，D 是 BC")
    w.line("的中点．")
    w.line("（1）求证：AD⊥BC；")
    w.line("（2）若 BC=6，AD=4，求 AB 的长．")
    w.next_column()
    w.line("参考答案")
    w.line("1．C")
    w.line("2．B")
    w.line("3．【解析】2+3×4=14，故选 A．")
    w.line("4．D")
    w.line("5．a(b-1)")
    w.line("6．2")
    w.line("7．【答案】（1）y=-x", ("sup", "2"), "+2x+3；")
    w.line("（2）(1,4)")
    w.line("【解析】设 y=a(x+1)(x-3)，代入")
    w.line("C(0,3)")
    w.line("得 a=-1．")
    w.line("8．（1）见解析；（2）5")
    return ExamLayout(pdf=w.finish(), raster_rect=raster, drawing_rect=drawing)


def three_column_page() -> bytes:
    """Six short questions in three columns, two to a column, one page."""
    w = Writer(pymupdf.open(), THREE_COLUMNS)
    w.new_page()
    w.line("二、填空题")
    for number in range(1, 7):
        w.line(f"{number}．第{number}题的题干写在")
        w.line("这里，答案是______．")
        if number % 2 == 0 and number < 6:
            w.next_column()
    return w.finish()


SCANNED_LINES = ["一、选择题", "1．下列各数中，最大的数是（  ）", "A．-1    B．0    C．2    D．3"]


def scanned_page(dpi: int = 150) -> bytes:
    """A page that is only a picture of text: no text layer, so it needs OCR."""
    source = pymupdf.open()
    page = source.new_page(width=A4[0], height=A4[1])
    for i, text in enumerate(SCANNED_LINES):
        page.insert_text((60, 100 + i * 28), text, fontname=FONT, fontsize=14)
    png = page.get_pixmap(dpi=dpi).tobytes("png")
    scan = pymupdf.open()
    scan.new_page(width=A4[0], height=A4[1]).insert_image(pymupdf.Rect(0, 0, *A4), stream=png)
    return scan.tobytes(deflate=True)


def text_pages(count: int) -> bytes:
    """``count`` pages with one line each: cheap, for the page limit."""
    doc = pymupdf.open()
    for number in range(1, count + 1):
        doc.new_page(width=A4[0], height=A4[1]).insert_text((60, 100), f"第{number}页", fontname=FONT, fontsize=12)
    return doc.tobytes()


def encrypted_pdf() -> bytes:
    doc = pymupdf.open()
    doc.new_page().insert_text((60, 100), "保密试卷", fontname=FONT, fontsize=12)
    return doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner-secret")


def zero_page_pdf() -> bytes:
    """Written by hand: PyMuPDF refuses to save a document without pages."""
    return (
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n"
        b"trailer << /Root 1 0 R >>\n%%EOF\n"
    )


def corrupt_pdf() -> bytes:
    """Starts like a PDF, then nothing MuPDF can repair."""
    return b"%PDF-1.7\n" + b"\x00\x13garbage\xff" * 200


def not_a_pdf() -> bytes:
    return "这不是PDF，只是一个改了扩展名的文本文件。\n".encode()


def exam_pages(count: int, *, per_column: int = 5, figure_every: int = 4) -> bytes:
    """A long two-column paper of ``count`` pages, numbered on, for benchmarks.

    Each column holds ``per_column`` multiple-choice questions; every
    ``figure_every``-th question has a vector figure.
    """
    w = Writer(pymupdf.open(), TWO_COLUMNS)
    w.new_page()
    w.line("一、选择题")
    number = 0
    while len(w.pages) <= count:
        for _ in range(per_column):
            number += 1
            w.line(f"{number}．已知 x", ("sup", "2"), f"={number}，下列关于 x 的")
            w.line("说法中正确的是（  ）")
            if number % figure_every == 0:
                w.circle_figure(size=70)
            if number % 2:
                w.options("A．1", "B．2", "C．3", "D．4")
            else:
                w.options("A．第一种情况", "B．第二种情况", "C．第三种情况", "D．第四种情况", per_line=2)
        w.next_column()
    w.doc.delete_page(-1)  # the page the last next_column opened
    return w.finish()


def gap_paper() -> bytes:
    """One column, questions 1, 2 and 4: question 3 is lost (as a figure or a bad scan would lose it)."""
    w = Writer(pymupdf.open(), [Column(60, 535)])
    w.new_page()
    w.line("一、选择题")
    for number, stem in [(1, "甲"), (2, "乙"), (4, "丁")]:
        w.line(f"{number}．{stem}的题干写在这里，正确的是（  ）")
        w.line("A．1    B．2    C．3    D．4")
    return w.finish()


def _small_graph(page: pymupdf.Page, x: float, y: float, size: float = 60) -> None:
    """Two axes and a curve: one picture of a picture-option row."""
    page.draw_line((x, y + size), (x + size, y + size), width=0.8)
    page.draw_line((x, y), (x, y + size), width=0.8)
    page.draw_bezier((x, y + size), (x + size * 0.3, y), (x + size * 0.6, y + size * 0.8), (x + size, y + 5), width=1)


def picture_options_paper() -> bytes:
    """Option kinds of real papers, on one column, with the answers in a section that has no heading.

    1: four pictures in a row, each labelled A-D just below it (the letters sit in the figures' boxes);
    2: options lettered "(A)"; the first line's dot lost ("A 甲…  B．乙…");
    3: a table whose rows are lettered, then the choice row "A．A  B．B  C．C  D．D";
    4: starts on page 2 with its number in the top margin, set apart from its "．" ("4" + "．如图…"),
       and a figure box reaching over the left of its second stem line;
    5: (1) with its own options and (2) a calculation: a free-response question.
    Then "1．B【解析】…": the numbering starts again with the answers, under no heading.
    """
    w = Writer(pymupdf.open(), [Column(60, 535)])
    w.new_page()
    w.line("一、选择题（本题共 5 小题）")
    w.line("1．下列图像中能正确表示匀加速运动的是（  ）")
    top = w.y + 8
    for i, letter in enumerate("ABCD"):
        x = 90 + i * 110
        _small_graph(w.page, x, top)
        w.page.insert_text((x + 26, top + 72), letter, fontname=FONT, fontsize=SIZE)
    w.y = top + 80
    w.line("2．关于惯性，下列说法正确的是（  ）")
    w.line("A 质量越大惯性越大     B．速度越大惯性越大")
    w.line("C．静止的物体没有惯性     D．失重时惯性消失")
    w.line("3．下列除杂方法正确的是（  ）")
    w.line("选项  物质（杂质）  除杂试剂")
    w.line("A    FeCl2（FeCl3）  铁粉")
    w.line("B    NaCl（MgCl2）  NaOH 溶液")
    w.line("C    Cl2（HCl）  浓硫酸")
    w.line("D    NO（NO2）  水")
    w.line("A．A     B．B     C．C     D．D")
    w.new_page()
    w.y = 46  # the first line of the page sits in the top margin, where running headers live
    w.line(("latin", "4"), "．如图，一物体沿光滑斜面从顶端由静止滑下，斜面")
    w.page.draw_rect(pymupdf.Rect(62, w.y + 3, 150, w.y + 90), width=0.8)  # drawn a little too tall
    w.page.draw_line((70, w.y + 80), (140, w.y + 20), width=0.8)
    w.line("的倾角", ("latin", " 30 "), "度，则物体的加速度大小为（  ）")
    w.y += 80
    w.line("A．g     B．g/2     C．g/3     D．2g")
    w.line("5．（18 分）一小球从高处自由下落。")
    w.line("（1）小球做的是（  ）")
    w.line("A．匀速运动     B．匀加速运动     C．变加速运动     D．圆周运动")
    w.line("（2）求小球下落 2 s 时的速度大小。")
    w.line("1．B【解析】匀加速运动的速度随时间均匀增大，故选 B。")
    w.line("2．A【解析】质量是惯性大小的唯一量度。")
    w.line("3．A【解析】铁粉将 FeCl3 还原为 FeCl2。")
    w.line("4．B【解析】由牛顿第二定律 a=g sin30°=g/2。")
    w.line("5．（1）B（2）v=gt=20 m/s")
    return w.finish()
