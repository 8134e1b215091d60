"""Opening a PDF safely, rendering its pages and reading their text with positions."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings
from django.utils.translation import gettext_noop
from PIL import Image

from annotation.ocr import OCRBackend
from annotation.pdf.layout import MARGIN, PageText, Span, clip_to_page, normalize_text
from k12vista.lazy import lazy_module
from k12vista.line_reasons import Reason, ReasonError, reason, reason_templates

if TYPE_CHECKING:
    import pymupdf
else:
    pymupdf = lazy_module("pymupdf")  # loaded at the first PDF: about 130 MiB (k12vista/lazy.py)

PAGE_DPI = 110  # page images are for people to compare against; figures are cropped sharper
OCR_DPI = 120  # 10.5 pt characters come out ~17 px high, enough for PP-OCR; 150 dpi costs 1.5x the time
MIN_TEXT_CHARS = 12  # fewer characters than this and the page is taken to be a scan


class PdfImportError(ReasonError):
    """A document that cannot be imported; the message is shown to the uploader as it is. Its reason is a
    code (``self.reason``): an import in a worker keeps it on the document and the job, worded for each reader."""


# Why a PDF cannot be imported, worded where it is shown (k12vista.line_reasons).
reason_templates({
    "pdf_unreadable_file": gettext_noop("The stored file cannot be read (%(error)s)."),
    "pdf_not_pdf": gettext_noop("This file is not a PDF (it does not start with %%PDF-)."),
    "pdf_damaged": gettext_noop("The PDF is damaged and cannot be read (%(error)s)."),
    "pdf_encrypted": gettext_noop("The PDF is encrypted and needs a password; upload a copy without a password."),
    "pdf_no_pages": gettext_noop("The PDF has no pages."),
    "pdf_too_many_pages": gettext_noop("The PDF has %(pages)d pages; at most %(limit)d are accepted."),
    "pdf_needs_ocr": gettext_noop(
        "Page %(n)d has no text layer and needs OCR, which is not available: %(error)s"
    ),
})  # fmt: skip


def open_pdf(source: str | Path | bytes) -> pymupdf.Document:
    """Opens and checks a PDF (a path or its bytes); every refusal is a PdfImportError with a message for people."""
    try:
        if isinstance(source, bytes):
            head = source[:1024]
        else:
            with open(source, "rb") as file:
                head = file.read(1024)
    except OSError as exc:
        raise PdfImportError(reason("pdf_unreadable_file", error=str(exc.strerror))) from exc
    if b"%PDF-" not in head:
        raise PdfImportError(reason("pdf_not_pdf"))
    where = {"stream": source} if isinstance(source, bytes) else {"filename": str(source)}
    try:
        doc = pymupdf.open(**where, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        raise PdfImportError(reason("pdf_damaged", error=str(exc))) from None
    problem = _refusal(doc)
    if problem:
        doc.close()
        raise PdfImportError(problem)
    return doc


def _refusal(doc: pymupdf.Document) -> Reason | None:
    if doc.needs_pass:
        return reason("pdf_encrypted")
    if doc.page_count == 0:
        return reason("pdf_no_pages")
    if doc.page_count > settings.PDF_MAX_PAGES:
        return reason("pdf_too_many_pages", pages=doc.page_count, limit=settings.PDF_MAX_PAGES)
    return None


def render_png(page: pymupdf.Page, *, dpi: int = PAGE_DPI) -> bytes:
    """The page image people compare against. zlib's fastest level: MuPDF's PNG writer spends 30 ms
    a page compressing (most of a text page's import) for files only 7% smaller."""
    pix = page.get_pixmap(dpi=dpi, alpha=False)
    rgb = np.frombuffer(pix.samples_mv, dtype=np.uint8).reshape(pix.height, pix.stride)[:, : 3 * pix.width]
    rgb = rgb.reshape(pix.height, pix.width, 3)
    buffer = io.BytesIO()
    if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all():
        # Most exam pages are black on white: one channel of the same pixels, compressed in 40% of the time.
        Image.fromarray(np.ascontiguousarray(rgb[..., 0])).save(buffer, "PNG", compress_level=1)  # mode L
    else:
        Image.frombuffer("RGB", (pix.width, pix.height), pix.samples_mv, "raw", "RGB", pix.stride, 1).save(
            buffer, "PNG", compress_level=1
        )
    return buffer.getvalue()


def render_image(page: pymupdf.Page, *, dpi: int) -> Image.Image:
    pix = page.get_pixmap(dpi=dpi, alpha=False)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def text_layer(page: pymupdf.Page, number: int) -> PageText:
    """Spans with size, flags and baseline; invisible and white-on-white text is left out."""
    spans = []
    flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP | pymupdf.TEXT_DEHYPHENATE
    for block in page.get_text("dict", flags=flags)["blocks"]:
        for line in block.get("lines", []):
            # Rotated text is the binding margin's 姓名/考号 or a watermark, never the questions.
            if abs(line["dir"][1]) > 0.1:
                continue
            for span in line["spans"]:
                if not span["text"].strip() or span.get("alpha", 255) == 0:
                    continue
                if span["size"] < MIN_VISIBLE_PT:
                    continue  # Word leaves formula residue as 1 pt letters: nobody reads them
                text = normalize_text(span["text"])
                spans.append(Span(text, _line_box(span), span["origin"][1], span["size"], span["flags"]))
    return clip_to_page(PageText(number, page.rect.width, page.rect.height, spans))


MIN_VISIBLE_PT = 3.0


def _line_box(span: dict) -> tuple[float, float, float, float]:
    """The run's box, or one from its baseline and size where a glyph (an overbar, a radical) makes it
    several lines tall: such a box would join the lines it crosses into one."""
    x0, y0, x1, y1 = span["bbox"]
    size, baseline = span["size"], span["origin"][1]
    if y1 - y0 > 1.8 * size and y0 < baseline - 0.2 * size:
        return (x0, max(y0, baseline - 0.95 * size), x1, min(y1, baseline + 0.3 * size))
    return (x0, y0, x1, y1)


def has_usable_text(page_text: PageText) -> bool:
    """A text layer is usable when its body has real characters, not garbage.

    Only text outside the top and bottom margins counts: scanning software often
    stamps a text header or page number on an image-only page. Broken fonts give
    U+FFFD.
    """
    top, bottom = page_text.height * MARGIN, page_text.height * (1 - MARGIN)
    text = "".join(s.text for s in page_text.spans if s.bbox[3] >= top and s.bbox[1] <= bottom)
    visible = [c for c in text if not c.isspace()]
    bad = sum(1 for c in visible if c == "\ufffd")
    return len(visible) >= MIN_TEXT_CHARS and bad <= len(visible) * 0.1


SCAN_SHARE = 0.2  # an image over this share of the page may be the page itself, scanned
OUTLINE_PATHS = 24  # glyphs drawn as paths: a line of outlined text is more paths than this


def has_unread_ink(page: pymupdf.Page) -> bool:
    """Whether OCR could find text the text layer lacks: a picture covering much of the page (a scan) or
    many vector paths (outlined glyphs). A text page with little in its body (the end of a solution at the
    top of the last page, under the running header) has neither, and OCR finds nothing more on it: it cost
    a few seconds a page, and loading the OCR models the first time, for nothing."""
    return _has_page_picture(page) or len(page.get_cdrawings()) >= OUTLINE_PATHS


def _has_page_picture(page: pymupdf.Page) -> bool:
    """A picture over a fifth of the page: the page may be a scan."""
    area = page.rect.width * page.rect.height
    for info in page.get_image_info():
        x0, y0, x1, y1 = info["bbox"]
        if (x1 - x0) * (y1 - y0) >= SCAN_SHARE * area:
            return True
    return False


def ocr_layer(page: pymupdf.Page, number: int, backend: OCRBackend) -> PageText:
    """OCR lines as spans, their pixel boxes turned back into PDF points.

    A page set in columns is read one column strip at a time: a text detector
    joins two columns' lines across a narrow gutter, and nothing after it can
    take them apart again.
    """
    image = render_image(page, dpi=OCR_DPI)
    # On a scan only round badges: an old scan's heavy type holds solid blots with holes that would be
    # inverted too (the real 1985 and 1986 scans lost questions), where a badge is a disc.
    image = dark_fills_as_print(image, dpi=OCR_DPI, discs_only=_has_page_picture(page))
    scale = 72 / OCR_DPI
    spans = []
    edges = [0, *image_gutters(image), image.width]
    for left, right in zip(edges, edges[1:], strict=False):
        strip = image if len(edges) == 2 else image.crop((left, 0, right, image.height))
        for line in backend.recognize(strip).lines:
            x0, y0, x1, y1 = ((line.box[0] + left) * scale, line.box[1] * scale, (line.box[2] + left) * scale,
                              line.box[3] * scale)  # fmt: skip
            height = max(1.0, y1 - y0)
            spans.append(Span(line.text, (x0, y0, x1, y1), baseline=y1 - 0.15 * height, size=0.85 * height))
    gutters = [x * scale for x in edges[1:-1]]
    return clip_to_page(PageText(number, page.rect.width, page.rect.height, spans, ocr=True, gutters=gutters))


SHORT_COLUMN_GUTTER_PX = 8  # clear after the smear, on the half-size image: a gap of about 19 pt at OCR_DPI
DARK = 128  # grey level below which a pixel is ink or a fill
FILL_HEIGHT_PT = (8.0, 40.0)  # a badge or a banded heading: a character tall to about three lines
DISC_MATCH = 0.85  # of a round badge's shape and the ellipse in its box, their overlap over their union


def dark_fills_as_print(image: Image.Image, *, dpi: int, discs_only: bool = False) -> Image.Image:
    """The page with light text on a dark fill (a question number in a filled badge, a heading in a dark
    band) turned into dark text on white, as the rest of the page is printed.

    A text detector trained on print finds white digits in a small disc unreliably (it missed or misread
    one badge in three on generated papers: 9 lost, 11 read as 1), and the segmentation relies on those
    numbers. A fill is a solid dark connected shape, at least 55% of its box, between a character and
    three lines tall, with light holes inside it (its text): the holes become dark and the fill white. Shapes
    without holes (a bullet, a bar of a chart) and larger ones (a photograph) are left alone. ``discs_only``
    (a scan) keeps to round fills: a badge's shape is the ellipse of its box, give or take the scan's blur.
    """
    from scipy import ndimage

    grey_image = image.convert("L")
    grey = np.asarray(grey_image)
    dark = grey < DARK
    # A fill is solid: it holds dark squares of about 6 px (3.5 pt at OCR_DPI) where a glyph's strokes,
    # one or two px thick, hold none. Looked for at half size (a quarter of the time, on every OCR page);
    # most pages have no such square and cost only this.
    half = ndimage.binary_erosion(np.asarray(grey_image.reduce(2)) < DARK, structure=np.ones((3, 3), dtype=bool))
    if not half.any():
        return image
    cores = np.kron(half, np.ones((2, 2), dtype=bool))[: dark.shape[0], : dark.shape[1]] & dark
    low, high = (pt * dpi / 72 for pt in FILL_HEIGHT_PT)
    labels, _ = ndimage.label(dark)
    boxes = ndimage.find_objects(labels)
    out: np.ndarray | None = None
    for index in np.unique(labels[cores]):
        box = boxes[index - 1]
        height, width = box[0].stop - box[0].start, box[1].stop - box[1].start
        if not low <= height <= high or width < 0.6 * height:
            continue
        shape = labels[box] == index
        area = shape.sum()
        if area < 0.55 * height * width or cores[box][shape].sum() < 0.15 * area:
            continue
        inside = ndimage.binary_fill_holes(shape)
        holes = inside & ~shape
        if holes.sum() < 0.02 * inside.sum():
            continue
        if discs_only and not _is_disc(inside):
            continue
        if out is None:
            out = grey.copy()
        # The box and two pixels around it: the fill's anti-aliased rim, left grey, reads as a bracket.
        top, left = max(0, box[0].start - 2), max(0, box[1].start - 2)
        wider = np.s_[top : box[0].stop + 2, left : box[1].stop + 2]
        placed = np.zeros(out[wider].shape, dtype=bool)
        placed[box[0].start - top : box[0].stop - top, box[1].start - left : box[1].stop - left] = inside
        rim = ndimage.binary_dilation(placed, iterations=2) & ~placed
        region = out[wider]
        region[placed] = 255 - region[placed]  # the fill light, its text dark
        region[placed & (out[wider] > 255 - DARK)] = 255  # the fill white, whatever its colour
        region[rim] = 255
    return image if out is None else Image.fromarray(out).convert("RGB")


def _is_disc(inside: np.ndarray) -> bool:
    """A shape (holes filled) that is the disc its box holds: a heavy glyph inked solid on a scan (全, 部) is
    about as square and as full, but its outline is no ellipse."""
    height, width = inside.shape
    if not 0.8 <= width / height <= 1.25:
        return False
    y, x = np.ogrid[:height, :width]
    ellipse = ((y + 0.5 - height / 2) / (height / 2)) ** 2 + ((x + 0.5 - width / 2) / (width / 2)) ** 2 <= 1
    return (inside & ellipse).sum() >= DISC_MATCH * (inside | ellipse).sum()


def image_gutters(image: Image.Image, *, max_ink: float = 0.03, min_column: float = 0.22) -> list[int]:
    """x (pixels) of the white vertical bands between the columns of a page image (see ``_image_gutters``).

    Text is smeared sideways by about a character first; where that closes every
    gap, the page is looked at again with a narrow smear: some papers set their
    columns less than a character apart (about 8 pt), and a detector reading such
    a page whole joins the two columns' lines into one.
    """
    ink = np.asarray(image.convert("L").reduce(2)) < 150
    return _image_gutters(ink, max_ink=max_ink, min_column=min_column, reach=4) or _image_gutters(
        ink, max_ink=max_ink, min_column=min_column, reach=1
    )


def _image_gutters(ink: np.ndarray, *, max_ink: float, min_column: float, reach: int) -> list[int]:
    """x (pixels) of the white vertical bands between the columns of a page image.

    A band is clear of ink on all but ``max_ink`` of the page height (a title or
    a rule across the page may cross it), a few pixels wide, with inked text on
    both sides; the columns it leaves are each at least ``min_column`` of the
    width, so the gap beside a figure or between options is no gutter.
    """
    height, width = ink.shape
    ink = ink.copy()
    # A rule drawn down the gutter is the gutter.
    ink[:, ink.sum(axis=0) > 0.5 * height] = False
    # Smeared sideways by about a character's width, a text line is solid, a gap between columns stays blank.
    sums = np.cumsum(np.pad(ink, ((0, 0), (reach + 1, reach)), constant_values=False), axis=1, dtype=np.int32)
    ink = (sums[:, 2 * reach + 1 :] - sums[:, : -2 * reach - 1]) > 0
    rows_with_ink = ink.sum(axis=0)
    clear = rows_with_ink <= max_ink * height
    # Under a title and the instructions, which cross it, a gutter still runs down most of the page.
    for x in np.flatnonzero(~clear & (rows_with_ink <= 0.4 * height)):
        marks = np.flatnonzero(ink[:, x])
        clear[x] = np.diff(np.concatenate(([-1], marks, [height]))).max() > 0.5 * height
    inked = np.flatnonzero(rows_with_ink > 0.1 * height)
    if inked.size < 2:
        return []
    left_edge, right_edge = inked[0], inked[-1]
    # A band as wide as half a column is no gutter: the blank under text that fills only the top of a page
    # (every x there is clear under the few lines that cross it).
    widest = 0.5 * min_column * (right_edge - left_edge)
    bands = [(end - start, (start + end) // 2) for _, start, end in
             _clear_bands(clear, left_edge, right_edge, 4 if reach >= 4 else 3) if end - start <= widest]  # fmt: skip
    chosen: list[int] = []
    for _, middle in sorted(bands, reverse=True):  # widest first
        edges = sorted([left_edge, right_edge, *chosen, middle])
        if min(b - a for a, b in zip(edges, edges[1:], strict=False)) >= min_column * (right_edge - left_edge):
            chosen.append(middle)
    if not chosen and reach >= 4:
        return _short_last_column(ink, rows_with_ink, max_ink=max_ink, min_column=min_column)
    return sorted(2 * int(x) for x in chosen)


def _clear_bands(clear: np.ndarray, left_edge: int, right_edge: int, narrowest: int) -> list[tuple[int, int, int]]:
    """(width, start, end) of the runs of clear x between the edges, at least ``narrowest`` wide, widest first."""
    bands = []
    x = left_edge
    while x < right_edge:
        if not clear[x]:
            x += 1
            continue
        end = x
        while end < right_edge and clear[end]:
            end += 1
        if end - x >= narrowest:
            bands.append((end - x, int(x), int(end)))
        x = end
    return sorted(bands, key=lambda band: (-band[0], band[1]))


def _short_last_column(ink: np.ndarray, rows_with_ink: np.ndarray, *, max_ink: float, min_column: float) -> list[int]:
    """The gutter before a last column of a few lines (the end of the answers on a paper's last page), which
    holds ink on too few rows to count as a column above: a band clear of ink from top to bottom, a gutter's
    width at least, with a column of lines (not a figure's labels or a line's last words) on each side."""
    height = ink.shape[0]
    inked = np.flatnonzero(rows_with_ink > max_ink * height)
    if inked.size < 2:
        return []
    left_edge, right_edge = int(inked[0]), int(inked[-1])
    strict = rows_with_ink <= max_ink * height
    for _, start, end in _clear_bands(strict, left_edge, right_edge, SHORT_COLUMN_GUTTER_PX):
        sides = ((left_edge, start), (end, right_edge + 1))
        if min(b - a for a, b in sides) < min_column * (right_edge - left_edge):
            continue
        if all(_lines_fill(ink[:, a:b]) for a, b in sides):
            return [2 * ((start + end) // 2)]
    return []


def _lines_fill(column: np.ndarray) -> bool:
    """Most of the inked rows of a column run across most of its width: lines of text set in it."""
    width = column.shape[1]
    rows = column[column.sum(axis=1) >= 0.1 * width]  # a scan's specks make no row
    if not len(rows):
        return False
    spans = [np.flatnonzero(row) for row in rows]
    return float(np.median([(cols[-1] - cols[0] + 1) / width for cols in spans])) >= 0.6


def page_text_lines(page_text: PageText) -> str:
    """Plain text for Page.text: the spans top to bottom, as they come."""
    return "\n".join(s.text for s in sorted(page_text.spans, key=lambda s: (round(s.baseline), s.bbox[0])))


def png_size(content: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(content)).size
