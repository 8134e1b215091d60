"""Figures on a page: embedded images and clusters of vector drawings, cropped
at about the standard figure size."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from PIL import Image

from annotation.pdf.layout import Box, PageText, union
from k12vista.lazy import lazy_module

if TYPE_CHECKING:
    import pymupdf
else:
    pymupdf = lazy_module("pymupdf")  # loaded at the first PDF: about 130 MiB (k12vista/lazy.py)

MIN_SIDE_PT = 20  # smaller than this is a bullet, a rule or a blank line, not a figure
MAX_PAGE_SHARE = 0.6  # an image covering most of the page is the scan itself
LABEL_REACH_PT = 10  # vertex labels (A, B, O) sit just outside the drawing


@dataclass(frozen=True)
class FigureRegion:
    page: int
    bbox: Box
    origin: str  # "embedded" or "drawing", as Figure.Origin


def _side_ok(box: Box, page_area: float) -> bool:
    width, height = box[2] - box[0], box[3] - box[1]
    return min(width, height) >= MIN_SIDE_PT and width * height <= MAX_PAGE_SHARE * page_area


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _with_labels(box: Box, page_text: PageText) -> Box:
    """Grows a drawing's box over the short labels next to it, so the crop keeps them."""
    reach = (box[0] - LABEL_REACH_PT, box[1] - LABEL_REACH_PT, box[2] + LABEL_REACH_PT, box[3] + LABEL_REACH_PT)
    labels = [s.bbox for s in page_text.spans if len(s.text.strip()) <= 3 and _overlaps(s.bbox, reach)]
    return union([box, *labels])


def figure_regions(page: pymupdf.Page, page_text: PageText) -> list[FigureRegion]:
    area = page.rect.width * page.rect.height
    images = [tuple(info["bbox"]) for info in page.get_image_info() if _side_ok(tuple(info["bbox"]), area)]
    regions = [FigureRegion(page_text.number, box, "embedded") for box in images]
    for rect in page.cluster_drawings():
        box = (rect.x0, rect.y0, rect.x1, rect.y1)
        # A frame drawn around an embedded image belongs to the image.
        if _side_ok(box, area) and not any(_overlaps(box, image) for image in images) and not _is_table(box, page_text):
            regions.append(FigureRegion(page_text.number, _with_labels(box, page_text), "drawing"))
    return regions


TABLE_CHARS = 30


def _is_table(box: Box, page_text: PageText) -> bool:
    """Ruled lines around much text are a table (or a framed question): its text is read, it is no figure."""
    inside = 0
    for span in page_text.spans:
        cx, cy = (span.bbox[0] + span.bbox[2]) / 2, (span.bbox[1] + span.bbox[3]) / 2
        if box[0] <= cx <= box[2] and box[1] <= cy <= box[3]:
            inside += len(span.text.strip())
    return inside > TABLE_CHARS


def crop(page: pymupdf.Page, box: Box) -> bytes:
    """Renders the region so that its longer side comes out near the standard size.

    Returns an uncompressed BMP: the question bank re-encodes every figure it
    stores (images.prepare_figure), so compressing here would be paid twice.
    """
    rect = pymupdf.Rect(box) & page.rect
    longest = max(rect.width, rect.height, 1)
    zoom = min(8.0, max(1.0, settings.FIGURE_STANDARD_SIDE_PX / longest))
    pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), clip=rect, alpha=False)
    buffer = io.BytesIO()
    Image.frombytes("RGB", (pix.width, pix.height), pix.samples).save(buffer, "BMP")
    return buffer.getvalue()
