"""From positioned text runs to lines in reading order.

Exam papers are set in two or three columns, with running headers and page
numbers, and with exponents as small raised runs. This module finds the
columns, drops the running text, rebuilds exponents as LaTeX and returns the
lines in the order a person reads them: page by page, and within a page band
by band (a full-width line such as a title starts a band), column by column,
top to bottom.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in PDF points, y downwards

SUPERSCRIPT_FLAG = 1  # bit 0 of a span's flags in MuPDF
MARGIN = 0.1  # running text lives in the top and bottom tenth of a page
PAGE_NUMBER = re.compile(
    r"^\s*(?:[-—–]\s*\d+\s*[-—–]|\d+|\d+\s*/\s*\d+|第\s*\d+\s*页(?:\s*[,，]?\s*共\s*\d+\s*页)?"
    r"|共\s*\d+\s*页\s*第\s*\d+\s*页|page\s*\d+(?:\s*of\s*\d+)?)\s*$",
    re.IGNORECASE,
)
UNICODE_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


@dataclass(frozen=True)
class Span:
    """A run of text with one font and size, as the text layer or OCR gives it."""

    text: str
    bbox: Box
    baseline: float
    size: float
    flags: int = 0


@dataclass
class PageText:
    number: int  # 1-based
    width: float
    height: float
    spans: list[Span]
    ocr: bool = False  # boxes from OCR: its columns are looked for apart from text-layer pages
    gutters: list[float] | None = None  # known already (OCR read the page column by column), in points


@dataclass(frozen=True)
class Line:
    text: str
    bbox: Box
    page: int
    key: tuple  # (page, band, column, y): sorts lines and figures in reading order


@dataclass
class PageLayout:
    number: int
    gutters: list[float] = field(default_factory=list)  # x of the gaps between columns
    band_tops: list[float] = field(default_factory=list)  # y where each full-width line starts a band

    def column_of(self, box: Box) -> int:
        """Column index, or -1 for something that crosses a gutter."""
        x0, _, x1, _ = box
        for gutter in self.gutters:
            if x0 < gutter - 2 and x1 > gutter + 2:
                return -1
        centre = (x0 + x1) / 2
        return sum(1 for gutter in self.gutters if gutter < centre)

    def key_of(self, box: Box) -> tuple:
        column = self.column_of(box)
        band = sum(1 for top in self.band_tops if top <= box[1] + 0.5)
        # A full-width line comes before the columns of the band it starts.
        return (self.number, band, column, box[1])


# --- running headers and footers ---------------------------------------------------


def _running_key(span: Span) -> tuple[int, str]:
    # Page numbers change from page to page; the rest of a header does not.
    return round(span.bbox[1] / 3), re.sub(r"\d+", "#", span.text.strip())


def _in_margin(span: Span, page: PageText) -> bool:
    return span.bbox[3] < page.height * MARGIN or span.bbox[1] > page.height * (1 - MARGIN)


def strip_running_text(pages: list[PageText]) -> list[PageText]:
    """Drops page numbers, and text repeated at the same place in the margin of most pages."""
    seen = Counter(key for page in pages for key in {_running_key(s) for s in page.spans if _in_margin(s, page)})
    repeats = max(2, (len(pages) + 1) // 2)
    stripped = []
    for page in pages:
        body = [s for s in page.spans if not _in_margin(s, page)]
        starts, own = _body_lines(page, lambda s: seen[_running_key(s)] >= repeats)
        kept = [
            s
            for s in page.spans
            if id(s) in starts
            or not _is_running(s, page, body, repeated=seen[_running_key(s)] >= repeats and id(s) not in own)
        ]
        stripped.append(PageText(page.number, page.width, page.height, kept, page.ocr, page.gutters))
    return stripped


def _body_lines(page: PageText, repeated: Callable[[Span], bool]) -> tuple[set[int], set[int]]:
    """The runs of margin lines that are the body's: a line that starts a question ("6" "、已知集合" " A={x|…"
    at the top of a column), whose number and first words may repeat at that place on another page ("3"
    "、已知集合"), and a line mostly of this page's own words with a number in it ("据此完成第" "6" "题。")."""
    margin = sorted((s for s in page.spans if _in_margin(s, page)), key=lambda s: (round(s.baseline), s.bbox[0]))
    found: set[int] = set()
    own: set[int] = set()  # repeated runs in a line of this page's own words: not repeated for that
    line: list[Span] = []
    for span in [*margin, None]:
        glued = (span is not None and line and abs(span.baseline - line[-1].baseline) <= 1
                 and span.bbox[0] - line[-1].bbox[2] < 0.5 * max(span.size, line[-1].size))  # fmt: skip
        if glued:
            line.append(span)  # type: ignore[arg-type]
            continue
        if line and QUESTION_START.match(_joined(line)):
            found |= {id(s) for s in line}
        elif line and 2 * sum(len(s.text.strip()) for s in line if not repeated(s)) >= len(_joined(line)):
            own |= {id(s) for s in line}
        line = [span] if span is not None else []
    return found, own


def _joined(line: list[Span]) -> str:
    return "".join(s.text.strip() for s in line)


def _centered_header(span: Span, page: PageText) -> bool:
    """A line centred in the top margin, neither a question, a heading nor an answer section: the paper's header."""
    centre = (span.bbox[0] + span.bbox[2]) / 2
    return (
        span.bbox[3] < page.height * MARGIN * 0.7
        and abs(centre - page.width / 2) < page.width * 0.04
        and not QUESTION_START.match(span.text)
        and not re.search(r"题|答案|解析|[一二三四五六七八九十][、．.]", span.text)
    )


QUESTION_START = re.compile(r"^\s*\d{1,3}\s*[．.、]")


def _inside_a_line(span: Span, page: PageText) -> bool:
    """A number set right against other text on its line ("21" + "．如图…", "倾角" + "30" + "度") is
    part of that line, not a page number, even where the whole line lies in the margin."""
    reach = 0.5 * span.size
    return any(
        s is not span
        and _overlap(s.bbox, span.bbox) > 0.5 * min(s.bbox[3] - s.bbox[1], span.bbox[3] - span.bbox[1])
        and (-reach <= s.bbox[0] - span.bbox[2] < reach or -reach <= span.bbox[0] - s.bbox[2] < reach)
        for s in page.spans
    )


def _badge(span: Span, page: PageText) -> bool:
    """A lone number right above a line of text, at its left edge: a question's number in a badge at the top
    of a column, not the page's number (that stands apart, centred or at the outer edge)."""
    if not span.text.strip().isdigit():
        return False
    height = max(1.0, span.bbox[3] - span.bbox[1])
    return any(
        0 <= s.bbox[1] - span.bbox[3] <= height
        and abs(s.bbox[0] - span.bbox[0]) <= 1.5 * height
        and not s.text.strip().isdigit()
        for s in page.spans
    )


def _is_running(span: Span, page: PageText, body: list[Span], *, repeated: bool) -> bool:
    if not _in_margin(span, page):
        return False
    # "14." at the top of a column repeats as "#." on every page; it starts a question, it is no header.
    page_number = PAGE_NUMBER.match(span.text) and not _inside_a_line(span, page)
    running = (page_number or (repeated and not QUESTION_START.match(span.text))) and not _badge(span, page)
    if not running and not _centered_header(span, page):
        return False
    # An exponent on the first line can reach into the margin; it shares its line with body text.
    return not any(b.bbox[1] < span.bbox[3] and span.bbox[1] < b.bbox[3] for b in body)


# --- columns ------------------------------------------------------------------------


def find_gutters(spans: list[Span], width: float, *, step: float = 2.0, min_gap: float = 6.0) -> list[float]:
    """x positions of the empty vertical bands between columns of one page (see ``gutters_of``)."""
    return gutters_of([(0, span) for span in spans], width, step=step, min_gap=min_gap)


def gutters_of(spans: list[tuple[int, Span]], width: float, *, step: float = 2.0, min_gap: float = 6.0) -> list[float]:
    """x positions of the empty vertical bands between columns, from (page, span) pairs.

    The pages of one paper share their columns, so they are looked for on all
    pages of a size at once: a page whose last column holds three lines would
    not show it alone. Coverage is counted in rows (distinct baselines), not
    runs, and runs are joined over word spaces. A gap counts when almost no row
    crosses it (a centred title may) and several rows start just right of it and
    end left of it, which tells a column from the space between two options on
    a line. Works alike on text-layer runs and OCR boxes.
    """
    if len(spans) < 6 or not width > 0:
        return []
    bins = int(width / step) + 2
    # Runs reaching past the page's edges (a web page printed wider than A4) count up to the edge.
    pieces = [(row, min(max(x0, 0.0), width), min(max(x1, 0.0), width)) for row, x0, x1 in _row_pieces(spans)]
    cover = _rows_covering(pieces, bins, step)
    rows = len({row for row, _, _ in pieces})
    # A title, a subtitle and a footer centred on the page may cross a gutter: two rows, or one in twenty.
    tolerance = max(2, rows // 20)
    first = int(min(x0 for _, x0, _ in pieces) / step) + 1
    last = min(int(max(x1 for _, _, x1 in pieces) / step), bins - 1)
    gutters = []
    i = first
    while i < last:
        if cover[i] > tolerance:
            i += 1
            continue
        j = i
        while j < last and cover[j] <= tolerance:
            j += 1
        # Its emptiest stretch first; else the whole low run, where one line crosses it (a header off
        # centre) and leaves the emptiest stretch too narrow or away from where the next column starts.
        for x0, x1 in (_core(cover, i, j, step), (i * step, j * step)):
            if x1 - x0 >= min_gap and _is_column_edge(pieces, x0, x1):
                gutters.append((x0 + x1) / 2)
                break
        i = j
    return gutters


def _rows_covering(pieces: list[tuple[tuple[int, int], float, float]], bins: int, step: float) -> list[int]:
    """How many distinct rows cover each bin: each row's runs merged into bin ranges, counted by their
    ends (a set of rows per bin, filled bin by bin, was most of the reading order's time)."""
    by_row: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for row, x0, x1 in pieces:
        a, b = int(x0 / step), min(bins - 1, int(x1 / step))
        if a <= b:
            by_row.setdefault(row, []).append((a, b))
    change = [0] * (bins + 1)
    for ranges in by_row.values():
        ranges.sort()
        start, end = ranges[0]
        for a, b in ranges[1:]:
            if a > end + 1:
                change[start] += 1
                change[end + 1] -= 1
                start, end = a, b
            else:
                end = max(end, b)
        change[start] += 1
        change[end + 1] -= 1
    cover, running = [], 0
    for delta in change[:bins]:
        running += delta
        cover.append(running)
    return cover


def _row_pieces(spans: list[tuple[int, Span]]) -> list[tuple[tuple[int, int], float, float]]:
    """Runs of a row joined over word spaces (TeX sets them as gaps, not characters): (row, x0, x1)."""
    pieces: list[list] = []
    for page, span in sorted(spans, key=lambda ps: (ps[0], round(ps[1].baseline / 3), ps[1].bbox[0])):
        row = (page, round(span.baseline / 3))
        if pieces and pieces[-1][0] == row and span.bbox[0] - pieces[-1][2] < 0.8 * max(span.size, pieces[-1][3]):
            pieces[-1][2] = max(pieces[-1][2], span.bbox[2])
            pieces[-1][3] = max(pieces[-1][3], span.size)
        else:
            pieces.append([row, span.bbox[0], span.bbox[2], span.size])
    return [(row, x0, x1) for row, x0, x1, _ in pieces]


def _core(cover: list[int], i: int, j: int, step: float) -> tuple[float, float]:
    """The longest stretch of a low run at its lowest coverage: the gutter itself, not a sparse column beside it."""
    low = min(cover[i:j])
    best, start = (i, i), None
    for k in range(i, j + 1):
        if k < j and cover[k] == low:
            start = k if start is None else start
        elif start is not None:
            if k - start > best[1] - best[0]:
                best = (start, k)
            start = None
    return best[0] * step, best[1] * step


LAST_COLUMN_ROWS, LAST_COLUMN_GAP = 12, 24.0  # rows ending left of a gutter, its width in points
MIN_COLUMN_LINE = 50.0  # points: wider than a caption or a label, narrower than a line of a narrow column


def _is_column_edge(pieces: list[tuple[tuple[int, int], float, float]], x0: float, x1: float) -> bool:
    # Rows of text start there, not only labels (figure captions beside the text: "第9题图", "图6").
    starts = {row for row, start, end in pieces if x1 - 1 <= start <= x1 + 30 and end - start >= MIN_COLUMN_LINE}
    left = {row for row, _, end in pieces if end <= x0 + 1}
    right = {row for row, start, _ in pieces if start >= x1 - 1}
    if len(starts) >= 3 and len(left) >= 3 and len(right) >= 3:
        return True
    # A paper's last column may hold a line or two (the last question, after a figure that ends the column
    # before it): a band as wide as a gutter is set, that a whole column of rows ends left of.
    return len(starts) >= 1 and len(left) >= LAST_COLUMN_ROWS and x1 - x0 >= LAST_COLUMN_GAP


def page_layout(page: PageText, gutters: list[float] | None = None) -> PageLayout:
    """The page's columns: the paper's gutters that this page keeps clear, else its own."""
    if gutters is None:
        gutters = find_gutters(page.spans, page.width)
    pieces = _row_pieces([(0, s) for s in page.spans])
    rows = len({row for row, _, _ in pieces}) or 1
    # A page set in one column (an answer key after two-column questions) crosses the paper's gutters.
    kept = [g for g in gutters if sum(1 for _, x0, x1 in pieces if x0 < g - 2 and x1 > g + 2) <= max(2, rows * 0.15)]
    layout = PageLayout(page.number, gutters=kept)
    if layout.gutters:
        wide = [s.bbox[1] for s in page.spans if layout.column_of(s.bbox) == -1]
        layout.band_tops = sorted(wide)
    return layout


def paper_gutters(pages: list[PageText]) -> dict[int, list[float]]:
    """Gutters by page, found on all pages of the same size and orientation together."""
    by_size: dict[tuple[int, int, bool], list[PageText]] = {}
    for page in pages:
        by_size.setdefault((round(page.width / 10), round(page.height / 10), page.ocr), []).append(page)
    found = {p.number: p.gutters for p in pages if p.gutters is not None}
    for group in by_size.values():
        group = [p for p in group if p.gutters is None]
        if not group:
            continue
        gutters = gutters_of([(p.number, s) for p in group for s in p.spans], group[0].width)
        found.update({p.number: gutters for p in group})
    return found


# --- lines --------------------------------------------------------------------------


def _overlap(a: Box, b: Box) -> float:
    return min(a[3], b[3]) - max(a[1], b[1])


def group_lines(spans: list[Span]) -> list[list[Span]]:
    """Runs that share a line.

    Runs on one baseline are one line first, whatever their boxes (a number set
    beside a tall formula is on the formula's line, not on the row of a piecewise
    function above it). Then lines join where they overlap vertically by at least
    half the smaller one (exponents, subscripts).
    """
    rows: list[list[Span]] = []
    for span in sorted(spans, key=lambda s: (s.baseline, s.bbox[0])):
        if rows and abs(rows[-1][0].baseline - span.baseline) <= 0.5:
            rows[-1].append(span)
        else:
            rows.append([span])
    lines: list[list[Span]] = []
    for row in sorted(rows, key=lambda r: (min(s.bbox[1] for s in r), min(s.bbox[0] for s in r))):
        main_row = max(row, key=lambda s: s.size)
        height = main_row.bbox[3] - main_row.bbox[1]
        for line in reversed(lines[-4:]):
            main = max(line, key=lambda s: s.size)
            if _overlap(main.bbox, main_row.bbox) >= 0.5 * min(height, main.bbox[3] - main.bbox[1]):
                line += row
                break
        else:
            lines.append(list(row))
    return [sorted(line, key=lambda s: s.bbox[0]) for line in lines]


CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
MATH_ALPHANUMERIC = re.compile(r"[\U0001d400-\U0001d7ff]+")


# Word writes symbols of the Symbol font as private-use code points U+F020-U+F0FF (the font's own
# codes plus 0xF000); these are the ones exam papers use, as the characters they draw.
SYMBOL_FONT = {
    0x2B: "+", 0x2D: "−", 0x3D: "=", 0x3C: "<", 0x3E: ">", 0x44: "Δ", 0x46: "Φ", 0x47: "Γ", 0x4C: "Λ",
    0x50: "Π", 0x51: "Θ", 0x53: "Σ", 0x57: "Ω", 0x61: "α", 0x62: "β", 0x63: "χ", 0x64: "δ", 0x65: "ε",
    0x66: "φ", 0x67: "γ", 0x68: "η", 0x6A: "φ", 0x6B: "κ", 0x6C: "λ", 0x6D: "μ", 0x6E: "ν", 0x70: "π",
    0x71: "θ", 0x72: "ρ", 0x73: "σ", 0x74: "τ", 0x75: "υ", 0x77: "ω", 0x78: "ξ", 0x79: "ψ", 0x7A: "ζ",
    0xA2: "′", 0xA3: "≤", 0xA5: "∞", 0xAC: "←", 0xAD: "↑", 0xAE: "→", 0xAF: "↓", 0xB0: "°", 0xB1: "±",
    0xB2: "″", 0xB3: "≥", 0xB4: "×", 0xB5: "∝", 0xB6: "∂", 0xB7: "•", 0xB8: "÷", 0xB9: "≠", 0xBA: "≡",
    0xBB: "≈", 0xBC: "…", 0xC5: "⊕", 0xD0: "∠", 0xD6: "√", 0xD7: "·", 0xDB: "⇔", 0xDE: "⇒",
    0xE6: "(", 0xE7: "", 0xE8: "(", 0xE9: "[", 0xEA: "", 0xEB: "[", 0xF6: ")", 0xF7: "", 0xF8: ")",
    0xF9: "]", 0xFA: "", 0xFB: "]",
}  # fmt: skip
SYMBOL_PUA = str.maketrans({0xF000 + code: char for code, char in SYMBOL_FONT.items()})
PRIVATE_USE = re.compile("[\uf020-\uf0ff]")


def normalize_text(text: str) -> str:
    """Mathematical italic letters (𝑥) as plain letters, and Word's doubled glyphs (𝐺𝐺 for G) undone;
    Symbol-font private-use code points as the symbols they draw.

    Only the Mathematical Alphanumeric block is folded (NFKC), so full-width
    punctuation and circled numbers stay as printed.
    """

    def fold(match: re.Match) -> str:
        run = match.group()
        if len(run) % 2 == 0 and run[0::2] == run[1::2]:
            run = run[0::2]
        return unicodedata.normalize("NFKC", run)

    if PRIVATE_USE.search(text):
        text = text.translate(SYMBOL_PUA)
    return MATH_ALPHANUMERIC.sub(fold, text)


def _script(span: Span, main: Span) -> str:
    """ "^" for a raised small run, "_" for a lowered one, "" for ordinary text (and for any Chinese)."""
    if CJK.search(span.text):
        return ""  # a small raised Chinese run is a note or a label, never an exponent
    if span.flags & SUPERSCRIPT_FLAG:
        return "^"
    if span.size >= 0.85 * main.size or not span.text.strip().isascii():
        return ""
    if span.baseline < main.baseline - 0.15 * main.size:
        return "^"
    if span.baseline > main.baseline + 0.1 * main.size:
        return "_"
    return ""


def _attach_script(text: str, script: str, mark: str) -> str:
    """``x`` + raised ``2`` -> ``$x^{2}$``: the base is the letters and digits just before."""
    base = re.search(r"[A-Za-z0-9]+$", text)
    head, body = (text[: base.start()], base.group()) if base else (text, "{}")
    return f"{head}${body}{mark}{{{script.strip()}}}$"


def line_text(spans: list[Span]) -> str:
    main = max(spans, key=lambda s: (s.size, len(s.text)))
    text = ""
    previous: Span | None = None
    for span in spans:
        # A raised run hugs its base: one a visible gap away is a run of its own (OCR boxes a table cell's
        # digit shorter and higher than the 题号 beside it).
        apart = previous is not None and span.bbox[0] - previous.bbox[2] > 0.25 * main.size
        mark = "" if apart and not span.flags & SUPERSCRIPT_FLAG else _script(span, main)
        if mark and span.text.strip():
            text = _attach_script(text, span.text, mark)
        else:
            # A visible gap between runs is a space (options set at tab stops).
            if previous is not None and span.bbox[0] - previous.bbox[2] > 0.25 * main.size and not text.endswith(" "):
                text += " "
            text += span.text
        previous = span
    return unicode_superscripts(text.strip())


def unicode_superscripts(text: str) -> str:
    """``x²`` typed as a character becomes ``$x^{2}$`` too."""
    return re.sub(
        r"([A-Za-z0-9)]*)([⁰¹²³⁴⁵⁶⁷⁸⁹]+)",
        lambda m: f"${m.group(1) or '{}'}^{{{m.group(2).translate(UNICODE_SUPERSCRIPTS)}}}$",
        text,
    )


def union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def page_lines(page: PageText, layout: PageLayout) -> list[Line]:
    """The page's lines, each built inside one column so that columns never merge."""
    by_column: dict[int, list[Span]] = {}
    for span in page.spans:
        by_column.setdefault(layout.column_of(span.bbox), []).append(span)
    lines = []
    for spans in by_column.values():
        for group in group_lines(spans):
            text = line_text(group)
            if text:
                box = union([s.bbox for s in group])
                lines.append(Line(text=text, bbox=box, page=page.number, key=layout.key_of(box)))
    return sorted(lines, key=lambda line: line.key)


def reading_order(pages: list[PageText], problems: list[tuple[int, str]] | None = None,
                  ) -> tuple[list[Line], dict[int, PageLayout]]:  # fmt: skip
    """All lines of the document in reading order, and each page's layout (for placing figures).

    A page that cannot be laid out in columns is read as one column, and one that
    cannot be read at all is left out; each is added to ``problems`` as (page,
    error) and the other pages go on.
    """
    problems = [] if problems is None else problems
    pages = strip_running_text([clip_to_page(page) for page in pages])
    try:
        gutters = paper_gutters(pages)
    except (ArithmeticError, IndexError, ValueError, TypeError) as exc:
        problems.append((0, f"{type(exc).__name__}: {exc}"))
        gutters = {}
    lines: list[Line] = []
    layouts = {}
    for page in pages:
        try:
            layout = page_layout(page, gutters.get(page.number) or [])
            found = page_lines(page, layout)
        except (ArithmeticError, IndexError, ValueError, TypeError) as exc:
            problems.append((page.number, f"{type(exc).__name__}: {exc}"))
            layout = PageLayout(page.number)
            try:
                found = page_lines(page, layout)
            except (ArithmeticError, IndexError, ValueError, TypeError):
                found = []
        layouts[page.number] = layout
        lines += found
    return lines, layouts


def clip_to_page(page: PageText) -> PageText:
    """The page with every run inside it: boxes clipped to the page, runs wholly outside it, with no
    size or with a box that is no number left out. Nothing after this has to think about geometry."""
    width = page.width if math.isfinite(page.width) and page.width > 0 else 0.0
    height = page.height if math.isfinite(page.height) and page.height > 0 else 0.0
    spans = []
    for span in page.spans:
        x0, y0, x1, y1 = span.bbox
        # Almost every run lies on its page already (NaN fails these comparisons, so it is looked at below).
        if 0.0 <= x0 <= x1 <= width and 0.0 <= y0 <= y1 <= height and 0.0 < span.size < math.inf:
            if span.text.strip() and math.isfinite(span.baseline):
                spans.append(span)
            continue
        if not all(math.isfinite(v) for v in (x0, y0, x1, y1, span.baseline, span.size)):
            continue
        x0, x1 = sorted((x0, x1))
        y0, y1 = sorted((y0, y1))
        box = (max(x0, 0.0), max(y0, 0.0), min(x1, width), min(y1, height))
        if box[2] < box[0] or box[3] < box[1] or not span.text.strip():
            continue
        if box == span.bbox and span.size > 0:
            spans.append(span)
            continue
        # A run of no size (zero-size fonts) is given its box's height, so lines still group it.
        size = span.size if span.size > 0 else max(box[3] - box[1], 1.0)
        spans.append(Span(span.text, box, min(max(span.baseline, box[1]), box[3]), size, span.flags))
    gutters = [g for g in page.gutters if 0 < g < width] if page.gutters is not None else None
    return PageText(page.number, width, height, spans, page.ocr, gutters)
