"""Opening a PDF safely, rendering its pages and reading their text with positions."""

from __future__ import annotations

import io
from pathlib import Path

import pymupdf
from django.conf import settings
from PIL import Image

from annotation.ocr import OCRBackend
from annotation.pdf.layout import MARGIN, PageText, Span

PAGE_DPI = 110  # page images are for people to compare against; figures are cropped sharper
OCR_DPI = 120  # 10.5 pt characters come out ~17 px high, enough for PP-OCR; 150 dpi costs 1.5x the time
MIN_TEXT_CHARS = 12  # fewer characters than this and the page is taken to be a scan


class PdfImportError(Exception):
    """A document that cannot be imported; the message is shown to the uploader as it is."""


def open_pdf(source: str | Path | bytes) -> pymupdf.Document:
    """Opens and checks a PDF (a path or its bytes); every refusal is a PdfImportError with a message for people."""
    try:
        if isinstance(source, bytes):
            head = source[:1024]
        else:
            with open(source, "rb") as file:
                head = file.read(1024)
    except OSError as exc:
        raise PdfImportError(f"The stored file cannot be read ({exc.strerror}).") from exc
    if b"%PDF-" not in head:
        raise PdfImportError("This file is not a PDF (it does not start with %PDF-).")
    where = {"stream": source} if isinstance(source, bytes) else {"filename": str(source)}
    try:
        doc = pymupdf.open(**where, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        raise PdfImportError(f"The PDF is damaged and cannot be read ({exc}).") from None
    problem = _refusal(doc)
    if problem:
        doc.close()
        raise PdfImportError(problem)
    return doc


def _refusal(doc: pymupdf.Document) -> str:
    if doc.needs_pass:
        return "The PDF is encrypted and needs a password; upload a copy without a password."
    if doc.page_count == 0:
        return "The PDF has no pages."
    if doc.page_count > settings.PDF_MAX_PAGES:
        return f"The PDF has {doc.page_count} pages; at most {settings.PDF_MAX_PAGES} are accepted."
    return ""


def render_png(page: pymupdf.Page, *, dpi: int = PAGE_DPI) -> bytes:
    return page.get_pixmap(dpi=dpi, alpha=False).tobytes("png")


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
                spans.append(Span(span["text"], tuple(span["bbox"]), span["origin"][1], span["size"], span["flags"]))
    return PageText(number, page.rect.width, page.rect.height, spans)


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


def ocr_layer(page: pymupdf.Page, number: int, backend: OCRBackend) -> PageText:
    """OCR lines as spans, their pixel boxes turned back into PDF points."""
    image = render_image(page, dpi=OCR_DPI)
    scale = 72 / OCR_DPI
    spans = []
    for line in backend.recognize(image).lines:
        x0, y0, x1, y1 = (v * scale for v in line.box)
        height = max(1.0, y1 - y0)
        spans.append(Span(line.text, (x0, y0, x1, y1), baseline=y1 - 0.15 * height, size=0.85 * height))
    return PageText(number, page.rect.width, page.rect.height, spans)


def page_text_lines(page_text: PageText) -> str:
    """Plain text for Page.text: the spans top to bottom, as they come."""
    return "\n".join(s.text for s in sorted(page_text.spans, key=lambda s: (round(s.baseline), s.bbox[0])))


def png_size(content: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(content)).size
