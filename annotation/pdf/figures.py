"""Figures on a page, and formulas set as images.

Figures: embedded images (a hatching made of hundreds of tiles counts as one),
clusters of vector drawings, and on scanned pages the ink that OCR did not read
as text; each is cropped with its labels and its caption (图1, (a), 甲).

Formulas: Word and MathType papers set each formula as a small image inside a
text line (30-50 to a page). Such an image is no figure: it stands in a line
of text, about as high as the line (a fraction up to about three lines), and
on a page that has several. It becomes a span of the page's text at its place
in the line: its LaTeX where the OCR backend reads formulas, else a
placeholder token that the importer turns into ``[[formula:N]]`` with the
image kept as the question's figure N of kind formula (shown inline).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from annotation.images import RENDER_SIDE_PX, sharpness, standard_side
from annotation.ocr import OCRBackend, OCRUnavailable, get_ocr_backend
from annotation.pdf.layout import Box, PageText, Span, union
from k12vista.lazy import lazy_module

if TYPE_CHECKING:
    import pymupdf
else:
    pymupdf = lazy_module("pymupdf")  # loaded at the first PDF: about 130 MiB (k12vista/lazy.py)

MIN_SIDE_PT = 20  # smaller than this is a bullet, a rule or a blank line, not a figure
MAX_PAGE_SHARE = 0.6  # an image covering most of the page is the scan itself
LABEL_REACH_PT = 10  # vertex labels (A, B, O) sit just outside the drawing
CAPTION_REACH_EM = 2.2  # a caption (图1, (a)) sits within about two lines under its figure
TILE_MIN = 4  # touching images, at least this many, are one picture cut in tiles
# A formula image is at most this many ems high standing in a line, more on a page that has several.
FORMULA_EM, FORMULA_EM_MANY, FORMULA_MANY = 2.4, 3.4, 3
FORMULA_GAP_EM = 1.5  # how far the text beside an inline formula may be
DEFAULT_EM = 10.5
# 图1, 图 3-2 电路, 图甲; and the sub-figure marks (a), （乙）, 甲. (A)-(D) under pictures are options, not captions.
FIGURE_NUMBER = re.compile(r"^(?:图\s*[0-9０-９一二三四五六七八九十甲乙丙丁]|第\s*\d{1,3}\s*(?:小)?题\s*图)")
SUB_FIGURE = re.compile(r"^(?:[（(]\s*[a-h甲乙丙丁1-9一二三四五六]\s*[)）]|[甲乙丙丁]图?)$")
QUESTION_FIGURE = re.compile(r"^题\s*图$")  # "the question's figure", alone under it: no number to link it by
NAMED_CAPTION = re.compile(f"{FIGURE_NUMBER.pattern}|{QUESTION_FIGURE.pattern}")
PLACEHOLDER = "[[formula-p{page}-{index}]]"  # in the page's text until the importer numbers it for its question
PLACEHOLDER_RE = re.compile(r"\[\[formula-p(\d+)-(\d+)\]\]")


@dataclass(frozen=True)
class FigureRegion:
    page: int
    bbox: Box
    origin: str  # "embedded" or "drawing", as Figure.Origin; "formula" for a formula set as an image
    # Pixels per point of the source under the box (an embedded image or a scan); None for vector drawings.
    source_scale: float | None = None
    token: str = ""  # a formula's placeholder in the page text
    latex: str = ""  # a formula read by the OCR backend
    caption: str = ""  # 图1, 第5题图: what the paper calls it (the importer links it to its question by this)

    @property
    def is_formula(self) -> bool:
        return self.origin == "formula"

    def source_size(self) -> tuple[int, int] | None:
        if self.source_scale is None:
            return None
        return (round((self.bbox[2] - self.bbox[0]) * self.source_scale),
                round((self.bbox[3] - self.bbox[1]) * self.source_scale))  # fmt: skip


def _side_ok(box: Box, page_area: float) -> bool:
    width, height = box[2] - box[0], box[3] - box[1]
    return min(width, height) >= MIN_SIDE_PT and width * height <= MAX_PAGE_SHARE * page_area


def _overlaps(a: Box, b: Box, slack: float = 0.0) -> bool:
    return a[0] - slack < b[2] and b[0] - slack < a[2] and a[1] - slack < b[3] and b[1] - slack < a[3]


def _inside(box: Box, outer: Box, slack: float = 0.0) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return outer[0] - slack <= cx <= outer[2] + slack and outer[1] - slack <= cy <= outer[3] + slack


def page_em(page_text: PageText) -> float:
    sizes = [s.size for s in page_text.spans if s.text.strip() and s.size > 3]
    return median(sizes) if sizes else DEFAULT_EM


def _with_labels(box: Box, page_text: PageText, em: float, runs: list[tuple[Box, str]]) -> Box:
    """Grows a figure's box over the short labels next to it and its caption under it, so the crop keeps them."""
    reach = (box[0] - LABEL_REACH_PT, box[1] - LABEL_REACH_PT, box[2] + LABEL_REACH_PT, box[3] + LABEL_REACH_PT)
    labels = [s.bbox for s in page_text.spans
              if LABEL.match(s.text) and _overlaps(s.bbox, reach) and _alone(s, page_text)]  # fmt: skip
    grown = union([box, *labels])
    below = (grown[0] - em, grown[3], grown[2] + em, grown[3] + CAPTION_REACH_EM * em)
    captions = [b for b, text in runs if is_caption(text) and _inside(b, below)]
    return union([grown, *captions])


def text_runs(page_text: PageText) -> list[tuple[Box, str]]:
    """Runs set one against the next on a baseline, joined: a caption "第" "4" "题图" (its digits in a
    Latin font) reads as one."""
    runs: list[tuple[list[float], list[str], Span]] = []
    for span in sorted(page_text.spans, key=lambda s: (round(s.baseline), s.bbox[0])):
        if runs:
            box, texts, last = runs[-1]
            if abs(span.baseline - last.baseline) <= 1 and span.bbox[0] - last.bbox[2] < 0.3 * max(span.size, 1):
                # Grown in place: a page's runs are read for every figure on it (union per span was most
                # of the figure search's time on text pages).
                box[0], box[1] = min(box[0], span.bbox[0]), min(box[1], span.bbox[1])
                box[2], box[3] = max(box[2], span.bbox[2]), max(box[3], span.bbox[3])
                texts.append(span.text)
                runs[-1] = (box, texts, span)
                continue
        runs.append((list(span.bbox), [span.text], span))
    return [((box[0], box[1], box[2], box[3]), "".join(texts)) for box, texts, _ in runs]


# A vertex, a point, a quantity beside a drawing: a few Latin or Greek letters, digits, primes (no Chinese).
LABEL = re.compile(r"^\s*[A-Za-zα-ωΑ-Ω0-9'′°+\-−·]{1,3}\s*$")


def _alone(span: Span, page_text: PageText) -> bool:
    """No text runs on from it in its line: a label, not an option letter ("A" then "．小磁体...")."""
    for other in page_text.spans:
        if other is span or min(other.bbox[3], span.bbox[3]) - max(other.bbox[1], span.bbox[1]) <= 0:
            continue
        if max(other.bbox[0] - span.bbox[2], span.bbox[0] - other.bbox[2]) < 0.3 * max(span.size, 1):
            return False
    return True


def is_caption(text: str) -> bool:
    text = text.strip()
    return (
        (len(text) <= 20 and bool(FIGURE_NUMBER.match(text)))
        or (len(text) <= 4 and bool(SUB_FIGURE.match(text)))
        or bool(QUESTION_FIGURE.match(text))
    )


# --- embedded images ---------------------------------------------------------------------


@dataclass
class _Image:
    bbox: Box
    scale: float | None  # source pixels per point
    tiles: int = 1


def _embedded(page: pymupdf.Page) -> list[_Image]:
    """The page's images, touching tiles joined into one (a hatching drawn as 6 pt squares)."""
    found = []
    for info in page.get_image_info():
        box = tuple(info["bbox"])
        width = box[2] - box[0]
        if width <= 0 or box[3] <= box[1]:
            continue
        found.append(_Image(box, info.get("width", 0) / width if info.get("width") else None))
    tiny = [im for im in found if max(im.bbox[2] - im.bbox[0], im.bbox[3] - im.bbox[1]) < MIN_SIDE_PT / 2]
    if len(tiny) < TILE_MIN:
        return found
    rest = [im for im in found if im not in tiny]
    groups: list[_Image] = []
    for image in sorted(tiny, key=lambda im: (im.bbox[1], im.bbox[0])):
        touching = [g for g in groups if _overlaps(g.bbox, image.bbox, slack=0.6)]
        for group in touching:
            groups.remove(group)
        boxes = [image.bbox, *(g.bbox for g in touching)]
        groups.append(_Image(union(boxes), image.scale, 1 + sum(g.tiles for g in touching)))
    return (
        rest
        + [g for g in groups if g.tiles >= TILE_MIN]
        + [_Image(g.bbox, g.scale) for g in groups if g.tiles < TILE_MIN]
    )


def _beside_text(box: Box, page_text: PageText, em: float) -> bool:
    """Text on the same line just left or right of the box: the image stands inside a line."""
    height = box[3] - box[1]
    for span in page_text.spans:
        if not span.text.strip():
            continue
        overlap = min(box[3], span.bbox[3]) - max(box[1], span.bbox[1])
        if overlap < 0.5 * min(height, span.bbox[3] - span.bbox[1]):
            continue
        gap = max(span.bbox[0] - box[2], box[0] - span.bbox[2])
        if -2 <= gap <= FORMULA_GAP_EM * em:
            return True
    return False


def _line_of(box: Box, page_text: PageText) -> tuple[float, float, float, float] | None:
    """(top, bottom, baseline, size) of the text line the box stands in, if any."""
    beside = [s for s in page_text.spans if s.text.strip() and min(box[3], s.bbox[3]) - max(box[1], s.bbox[1]) > 0]
    if not beside:
        return None
    main = max(beside, key=lambda s: s.size)
    return main.bbox[1], main.bbox[3], main.baseline, main.size


@dataclass
class _Part:
    bbox: Box
    images: list[_Image]


def figure_regions(page: pymupdf.Page, page_text: PageText) -> list[FigureRegion]:
    """The page's figures and, after them, its formulas set as images (origin "formula", in reading order).

    Drawings, pictures and tiles that overlap are one figure (a frame around a picture, a graph hatched
    with an image); a formula-shaped image on a figure is its label, cropped with it.
    """
    area = page.rect.width * page.rect.height
    em = page_em(page_text)
    images = _embedded(page)
    inline = [im for im in images if im.tiles == 1 and _formula_shaped(im.bbox, em, FORMULA_EM_MANY)
              and _beside_text(im.bbox, page_text, em)]  # fmt: skip
    # A picture with its caption under it (图2, 第5题图) is a figure, however flat: a flow chart one line
    # high set beside the text was taken for a formula, and its placeholder and caption went into the text.
    runs = text_runs(page_text)  # once a page: every figure reads them
    captioned = _captioned(inline + [im for im in images if _small(im.bbox)], runs, em)
    inline = [im for im in inline if id(im) not in captioned]
    limit = FORMULA_EM_MANY if len(inline) >= FORMULA_MANY else FORMULA_EM
    formulas = [im for im in inline if _formula_shaped(im.bbox, em, limit)]
    parts = [_Part(im.bbox, [im]) for im in images
             if im not in formulas and (_side_ok(im.bbox, area) or id(im) in captioned)]  # fmt: skip
    for rect in page.cluster_drawings():
        box = (rect.x0, rect.y0, rect.x1, rect.y1)
        if _side_ok(box, area) and not _is_table(box, page_text):
            parts.append(_Part(box, []))
    if page_text.ocr and not images_in_body(images, area):
        parts += [_Part(box, []) for box in scan_figures(page, page_text, em)]
    merged = _merge(parts)
    # What touches a figure is part of it: labels set as formula images, stray small pictures.
    labels = [im for im in images if (im in formulas or _small(im.bbox)) and id(im) not in captioned]
    for part in merged:
        for image in labels:
            # Its middle on the figure (or just beside it): a picture of "(A)" under it is an option's, not its.
            if _inside(image.bbox, part.bbox, slack=6):
                part.bbox = union([part.bbox, image.bbox])
                part.images.append(image)
    on_figures = {id(im) for part in merged for im in part.images}
    formulas = [im for im in formulas if id(im) not in on_figures]
    regions = []
    for part in merged:
        if not _side_ok(part.bbox, area) and not any(id(im) in captioned for im in part.images):
            continue
        box = _with_labels(part.bbox, page_text, em, runs)
        caption = _caption_of(box, runs)
        if page_text.ocr and part.images:
            # A picture on a page read by OCR (outlined text): its own box; OCR's lines next to it are too coarse
            # to tell a label from an option line.
            regions.append(FigureRegion(page_text.number, part.bbox, "embedded", _scale_of(part), caption=caption))
        elif page_text.ocr:
            regions.append(FigureRegion(page_text.number, box, "drawing", _scan_scale(page), caption=caption))
        elif part.images:
            regions.append(FigureRegion(page_text.number, box, "embedded", _scale_of(part), caption=caption))
        else:
            regions.append(FigureRegion(page_text.number, box, "drawing", caption=caption))
    ordered = sorted(formulas, key=lambda im: (round(im.bbox[1] / 4), im.bbox[0]))
    regions += [FigureRegion(page_text.number, im.bbox, "formula", im.scale, PLACEHOLDER.format(page=page_text.number,
                             index=i)) for i, im in enumerate(ordered)]  # fmt: skip
    return regions


def _captioned(images: list[_Image], runs: list[tuple[Box, str]], em: float) -> set[int]:
    """The ids of the images, at least three ems wide, with a caption that names a figure (图2, 第5题图,
    题图) under them within about two lines (where a caption goes: ``_with_labels``)."""
    wide = [im for im in images if im.bbox[2] - im.bbox[0] >= 3 * em]
    if not wide:
        return set()
    # Named captions only: a sub-figure's mark ((b), 甲) also stands under a strip of option letters.
    captions = [b for b, text in runs if len(text.strip()) <= 20 and NAMED_CAPTION.match(text.strip())]
    found = set()
    for image in wide:
        box = image.bbox
        below = (box[0] - em, box[3], box[2] + em, box[3] + CAPTION_REACH_EM * em)
        if any(_inside(b, below) for b in captions):
            found.add(id(image))
    return found


def _caption_of(box: Box, runs: list[tuple[Box, str]]) -> str:
    """The figure's own caption (图1, 第5题图), from the text inside its grown box; "" where it has none."""
    found = [text.strip() for b, text in runs if _inside(b, box) and FIGURE_NUMBER.match(text.strip())]
    return found[0][:20] if found else ""


def _merge(parts: list[_Part]) -> list[_Part]:
    merged: list[_Part] = []
    for part in parts:
        joined = _Part(part.bbox, list(part.images))
        for other in [m for m in merged if _overlaps(m.bbox, part.bbox)]:
            merged.remove(other)
            joined = _Part(union([joined.bbox, other.bbox]), joined.images + other.images)
        merged.append(joined)
    if len(merged) < len(parts):
        return _merge(merged)  # a union can reach a part it did not touch before
    return merged


def _scale_of(part: _Part) -> float | None:
    """Source pixels per point of a figure that is one picture (with its frame and labels): the picture's."""
    pictures = [im for im in part.images if im.tiles == 1 and im.scale]
    if not pictures:
        return None
    biggest = max(pictures, key=lambda im: (im.bbox[2] - im.bbox[0]) * (im.bbox[3] - im.bbox[1]))
    box = part.bbox
    covered = (biggest.bbox[2] - biggest.bbox[0]) * (biggest.bbox[3] - biggest.bbox[1])
    return biggest.scale if covered >= 0.5 * (box[2] - box[0]) * (box[3] - box[1]) else None


def _small(box: Box) -> bool:
    return min(box[2] - box[0], box[3] - box[1]) < MIN_SIDE_PT


def _formula_shaped(box: Box, em: float, limit: float) -> bool:
    width, height = box[2] - box[0], box[3] - box[1]
    # Smaller than a letter is a dot or a stray pixel, no formula.
    return 0.5 * em <= height <= limit * em and 0.3 * em <= width <= 30 * em


def images_in_body(images: list[_Image], area: float) -> bool:
    """Images other than the page's own scan."""
    return any((im.bbox[2] - im.bbox[0]) * (im.bbox[3] - im.bbox[1]) <= MAX_PAGE_SHARE * area for im in images)


TABLE_CHARS = 30


def _is_table(box: Box, page_text: PageText) -> bool:
    """Ruled lines around much text are a table (or a framed question), and so are ruled lines around a grid
    of short cells (an answer key: 题号 7 8 9 / 答案 D D A): its text is read, it is no figure."""
    inside = []
    for span in page_text.spans:
        cx, cy = (span.bbox[0] + span.bbox[2]) / 2, (span.bbox[1] + span.bbox[3]) / 2
        if box[0] <= cx <= box[2] and box[1] <= cy <= box[3] and span.text.strip():
            inside.append(span)
    return sum(len(s.text.strip()) for s in inside) > TABLE_CHARS or _grid(inside)


def _grid(spans: list[Span]) -> bool:
    """Two rows or more of three cells or more, standing one under the other: a graph's tick labels make one
    such row at most (its other axis's labels stand one a row)."""
    rows: dict[int, list[float]] = {}
    for span in spans:
        rows.setdefault(round(span.baseline / 3), []).append((span.bbox[0] + span.bbox[2]) / 2)
    wide = [sorted(xs) for xs in rows.values() if len(xs) >= 3]
    return any(
        sum(1 for x in a if any(abs(x - y) <= 6 for y in b)) >= 3 for i, a in enumerate(wide) for b in wide[i + 1 :]
    )


# --- figures on scanned pages ----------------------------------------------------------------

SCAN_DPI = 50  # a figure is found on a coarse image; it is cropped from the page at full size
SCAN_MIN_SIDE_EM = 2.5  # smaller ink left over is a stain, a stray mark or a formula OCR missed
SCAN_INK_LEVEL = 200  # grey below this is ink on the coarse image, where a thin stroke is light grey
# A straight line this share of the page long and a few pixels thick is a rule, not a figure.
SCAN_RULE_SHARE, SCAN_RULE_PX = 0.3, 3
# A heading standing alone near a figure (答案, 解析, 第二题) is the paper's, never a label on the figure;
# so is a sub-question's number, "(2)" set apart from its answer.
STRUCTURE_WORD = re.compile(r"答|解|题|分|卷|^\s*[(（]\s*\d{1,2}\s*[)）]\s*$")
SCAN_LABEL_CHARS = 3  # a flow chart's box (开始, 输入：), a point's name: longer words are the question's


def _scan_scale(page: pymupdf.Page) -> float | None:
    """Pixels per point of the scan the page is made of."""
    infos = page.get_image_info()
    if not infos:
        return None
    biggest = max(infos, key=lambda i: (i["bbox"][2] - i["bbox"][0]) * (i["bbox"][3] - i["bbox"][1]))
    width = biggest["bbox"][2] - biggest["bbox"][0]
    return biggest["width"] / width if width > 0 else None


def scan_figures(page: pymupdf.Page, page_text: PageText, em: float) -> list[Box]:
    """Boxes of the ink that is not text: what OCR read is blanked out, what stays in large blobs is a figure.

    A figure's own labels were read by OCR too; they fall inside its box, so the crop keeps them and the
    importer leaves them out of the question text.
    """
    from scipy import ndimage

    pix = page.get_pixmap(dpi=SCAN_DPI, colorspace=pymupdf.csGRAY, alpha=False)
    grey = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width)
    # A figure's thin strokes are light grey on the coarse image: ink is what stands well below the
    # paper's own shade (a yellowed scan's paper is darker than white).
    ink = grey < min(SCAN_INK_LEVEL, int(np.median(grey)) - 50)
    scale = SCAN_DPI / 72
    pad = 1.5
    for span in page_text.spans:
        x0, y0, x1, y1 = (int(v * scale) for v in span.bbox)
        ink[max(0, int(y0 - pad)) : int(y1 + pad) + 1, max(0, int(x0 - pad)) : int(x1 + pad) + 1] = False
    _drop_rules(ink, ndimage)
    # Strokes of one drawing are joined over small gaps; separate drawings stay apart.
    joined = ndimage.binary_dilation(ink, iterations=max(2, round(0.6 * em * scale)))
    labels, count = ndimage.label(joined)
    boxes = []
    area = page.rect.width * page.rect.height
    for where in ndimage.find_objects(labels)[:count]:
        ys, xs = where
        box = (xs.start / scale, ys.start / scale, xs.stop / scale, ys.stop / scale)
        sides = (box[2] - box[0], box[3] - box[1])
        inked = int(ink[where].sum())
        if min(sides) < SCAN_MIN_SIDE_EM * em or sides[0] * sides[1] > MAX_PAGE_SHARE * area or inked < 40:
            continue
        rows, cols = np.nonzero(ink[where])
        tight = ((xs.start + cols.min()) / scale, (ys.start + rows.min()) / scale,
                 (xs.start + cols.max() + 1) / scale, (ys.start + rows.max() + 1) / scale)  # fmt: skip
        if _formula_shaped(tight, em, FORMULA_EM) and _beside_text(tight, page_text, em):
            continue  # a formula OCR did not read, standing in its line (an answer's fraction): text, no figure
        boxes.append(box)
    grown = [_with_scan_labels(box, page_text, em) for box in boxes]
    kept = []
    for i, (box, wider) in enumerate(zip(boxes, grown, strict=True)):
        # Grown into a neighbour (a row of picture options, each with its letter): each keeps its own ink.
        if any(_overlaps(wider, other) for j, other in enumerate(grown) if j != i):
            wider = box
        # An answer key's or a data table's rules, their cells reaching past the ink found: its text is read.
        if not _is_table((wider[0] - em, wider[1] - em, wider[2] + em, wider[3] + em), page_text):
            kept.append(wider)
    return kept


def _with_scan_labels(box: Box, page_text: PageText, em: float) -> Box:
    """A scanned figure's box grown over the words OCR read on it (开始, 输入, 否 in a flow chart, P and d/2
    beside a capacitor): blanked out before the ink was looked at, they are what its edges are made of.
    Only short words standing alone in their line: a question's text beside the figure runs on."""
    reach = (box[0] - em, box[1] - em, box[2] + em, box[3] + em)
    near = [
        s.bbox
        for s in page_text.spans
        if len(s.text.strip()) <= SCAN_LABEL_CHARS
        and not STRUCTURE_WORD.search(s.text)
        and _overlaps(s.bbox, reach)
        and _alone(s, page_text)
    ]
    return union([box, *near])


def _drop_rules(ink: np.ndarray, ndimage: Any) -> None:
    """Removes long straight rules: the line between two columns, a header's or footer's rule. Dilated,
    one would join every figure, badge and stain along it into one blob bigger than any figure. A scanned
    rule is light and broken into pieces: thin pieces on one line that together run a good share of the
    page are a rule; a figure's own short strokes are not."""
    labels, count = ndimage.label(ink, structure=np.ones((3, 3)))
    pieces: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (axis, position) -> (label, length)
    for index, (ys, xs) in enumerate(ndimage.find_objects(labels)[:count], 1):
        tall, wide = ys.stop - ys.start, xs.stop - xs.start
        if wide <= SCAN_RULE_PX and tall >= 2 * wide:
            pieces.setdefault((0, (xs.start + xs.stop) // 2 // SCAN_RULE_PX), []).append((index, tall))
        elif tall <= SCAN_RULE_PX and wide >= 2 * tall:
            pieces.setdefault((1, (ys.start + ys.stop) // 2 // SCAN_RULE_PX), []).append((index, wide))
    rules: list[int] = []
    for (axis, position), found in pieces.items():
        # A skewed or wavy rule's pieces fall in neighbouring bins.
        line = found + pieces.get((axis, position - 1), []) + pieces.get((axis, position + 1), [])
        if sum(length for _, length in line) >= SCAN_RULE_SHARE * ink.shape[axis]:
            rules += [index for index, _ in found]
    if rules:
        ink[np.isin(labels, rules)] = False


# --- formulas ----------------------------------------------------------------------------------


def with_formulas(page_text: PageText, regions: list[FigureRegion]) -> PageText:
    """The page's text with each formula image as a span where it stands in its line (LaTeX or a placeholder)."""
    spans = list(page_text.spans)
    for region in regions:
        if not region.is_formula:
            continue
        box = region.bbox
        line = _line_of(box, page_text)
        top, bottom, baseline, size = line or (box[1], box[3], box[3] - 0.15 * (box[3] - box[1]), page_em(page_text))
        # The line's height and size, so the layout reads it as part of the line, never as an exponent.
        text = f"${region.latex}$" if region.latex else region.token
        if any(
            s.text == text and abs(s.bbox[0] - box[0]) < 0.1 and abs(s.bbox[2] - box[2]) < 0.1 for s in page_text.spans
        ):
            continue  # an OCR page read back from an earlier run keeps its formula spans already
        spans.append(Span(text, (box[0], top, box[2], bottom), baseline, size))
    return PageText(page_text.number, page_text.width, page_text.height, spans, page_text.ocr, page_text.gutters)


def formula_reader() -> OCRBackend | None:
    """The configured OCR backend if it reads formulas to LaTeX, else None (the formulas stay images)."""
    try:
        backend = get_ocr_backend()
    except OCRUnavailable:
        return None
    return backend if backend.reads_formulas else None


def read_formulas(page: pymupdf.Page, regions: list[FigureRegion]) -> list[FigureRegion]:
    """The formulas read to LaTeX where the backend can (``OCRBackend.read_formula``); the rest as they were."""
    if not any(region.is_formula for region in regions):
        return regions
    backend = formula_reader()
    read = []
    for region in regions:
        latex = ""
        if region.is_formula and backend is not None:
            latex = (backend.read_formula(render(page, region.bbox)) or "").strip().strip("$").strip()
        read.append(FigureRegion(region.page, region.bbox, region.origin, region.source_scale, region.token, latex)
                    if latex else region)  # fmt: skip
    return read


def placeholders(
    texts: list[str], formulas: dict[str, FigureRegion], first: int
) -> tuple[list[str], list[FigureRegion]]:
    """Each formula token in a question's texts as ``[[formula:N]]``, N its figure position from ``first`` on."""
    used: list[FigureRegion] = []

    def number(match: re.Match) -> str:
        region = formulas.get(match.group())
        if region is None:
            return ""
        if region not in used:
            used.append(region)
        return f"[[formula:{first + used.index(region)}]]"

    return [PLACEHOLDER_RE.sub(number, text) for text in texts], used


# --- cropping ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Crop:
    content: bytes
    source_size: tuple[int, int] | None  # what the source held under the box
    source_sharpness: float | None  # measured on those pixels, not on the enlarged crop


def render(page: pymupdf.Page, box: Box, zoom: float | None = None) -> Image.Image:
    rect = pymupdf.Rect(box) & page.rect
    if zoom is None:
        longest = max(rect.width, rect.height, 1)
        zoom = min(8.0, max(1.0, (standard_side() or RENDER_SIDE_PX) / longest))
    pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), clip=rect, alpha=False)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def crop(page: pymupdf.Page, box: Box) -> bytes:
    """Renders the region so that its longer side comes out near the standard size.

    Returns an uncompressed BMP: the question bank re-encodes every figure it
    stores (images.prepare_figure), so compressing here would be paid twice.
    """
    buffer = io.BytesIO()
    render(page, box).save(buffer, "BMP")
    return buffer.getvalue()


def crop_region(page: pymupdf.Page, region: FigureRegion) -> Crop:
    """The crop, and the source's own pixels under it (an embedded image or a scan) for the quality flags."""
    content = crop(page, region.bbox)
    size = region.source_size()
    if size is None or region.source_scale is None:
        return Crop(content, None, None)
    native = render(page, region.bbox, zoom=max(0.05, min(8.0, region.source_scale)))
    return Crop(content, size, sharpness(native))
