"""OCR backends for PDF pages without a usable text layer.

The backend is named by class in the setting ``OCR_BACKEND`` (as Django's
``EMAIL_BACKEND`` is), so an app above this one (the vision-model backend in
``inference``) can subclass ``OCRBackend`` and be plugged in without this app
importing it.

A backend takes a page image and returns lines with pixel boxes; the importer
turns the boxes into PDF points and treats the lines like a text layer.
"""

from __future__ import annotations

import base64
import csv
import io
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from PIL import Image

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels of the image given


class OCRUnavailable(ImproperlyConfigured):
    """The backend cannot run here: a missing binary, package or credential."""


class OCRServiceError(RuntimeError):
    """A remote OCR service failed in a way worth retrying later (down, rate-limited)."""


@dataclass(frozen=True)
class OCRLine:
    text: str
    box: Box
    score: float | None = None


@dataclass(frozen=True)
class OCRResult:
    lines: list[OCRLine] = field(default_factory=list)
    # Text as the backend would write it, formulas in LaTeX where it can; the
    # lines joined top to bottom when the backend has nothing better.
    markdown: str = ""

    def __post_init__(self) -> None:
        if not self.markdown and self.lines:
            object.__setattr__(self, "markdown", "\n".join(line.text for line in self.lines))


class OCRBackend:
    """Subclass and set ``OCR_BACKEND`` to its dotted path.

    ``recognize`` must be safe to call many times on one instance; the importer
    keeps one instance per process because loading models is slow.
    """

    name = "ocr"
    reads_formulas = False  # True where ``read_formula`` gives LaTeX

    def recognize(self, image: Image.Image) -> OCRResult:
        raise NotImplementedError

    def read_formula(self, image: Image.Image) -> str | None:
        """The LaTeX of a formula set as an image (without ``$``), or None when this backend cannot read one."""
        if not self.reads_formulas:
            return None
        return formula_of(self.recognize(image).markdown)


def formula_of(markdown: str) -> str | None:
    """The one formula in a backend's reading of a formula image: the math between ``$`` (or ``\\(``), else
    the text itself if it holds no Chinese; None for an empty or prose reading."""
    text = markdown.strip()
    for opening, closing in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        inner = text[len(opening) : -len(closing)]
        if text.startswith(opening) and text.endswith(closing) and len(text) > 2 * len(opening) and "$" not in inner:
            return inner.strip() or None
    if not text or "\n" in text or re.search(r"[\u3400-\u9fff]", text):
        return None
    return text


_instances: dict[str, OCRBackend] = {}
_lock = threading.Lock()


def get_ocr_backend(path: str | None = None) -> OCRBackend:
    """The configured backend, one instance per class path and process."""
    path = path or settings.OCR_BACKEND
    with _lock:
        if path not in _instances:
            try:
                backend_class = import_string(path)
            except ImportError as exc:
                raise OCRUnavailable(f"OCR_BACKEND={path!r} cannot be imported: {exc}") from exc
            if not (isinstance(backend_class, type) and issubclass(backend_class, OCRBackend)):
                raise OCRUnavailable(f"OCR_BACKEND={path!r} is not a subclass of annotation.ocr.OCRBackend")
            _instances[path] = backend_class()
        return _instances[path]


def _box_of_points(points: Any) -> Box:
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


# --- RapidOCR (offline default) ----------------------------------------------


class RapidOCRBackend(OCRBackend):
    """PP-OCR models run with onnxruntime; the rapidocr wheel carries the models,
    so nothing is downloaded at run time."""

    name = "rapidocr"

    def __init__(self) -> None:
        self._engine: Any = None
        self._engine_lock = threading.Lock()

    def _load(self) -> Any:
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise OCRUnavailable("RapidOCR is not installed (pip install 'rapidocr>=3.10,<4' onnxruntime)") from exc
        # Pages are upright, so the orientation classifier costs time for nothing. Detection runs on
        # the page scaled to at most 1280 px (recognition still reads crops of the full image):
        # this halves detection time on an A4 page at 120 dpi without losing lines of 10.5 pt text.
        # OCR_THREADS onnxruntime threads (1 by default): its pool spins while waiting, so on a busy
        # two-core machine two threads cost twice the CPU and more wall time (per column strip, load 12:
        # 1.25 s CPU and 4.8 s wall with one thread, 2.3 s and 7.5-12 s with two; docs/benchmarks.md).
        params = {"Global.use_cls": False, "Global.log_level": "warning",
                  "Det.limit_type": "max", "Det.limit_side_len": 1280,
                  "EngineConfig.onnxruntime.intra_op_num_threads": settings.OCR_THREADS}  # fmt: skip
        return RapidOCR(params=params)

    def recognize(self, image: Image.Image) -> OCRResult:
        # onnxruntime sessions are not documented as safe for concurrent runs.
        with self._engine_lock:
            if self._engine is None:
                self._engine = self._load()
            output = self._engine(image.convert("RGB"))
        if output.txts is None or output.boxes is None:
            return OCRResult()
        lines = [
            OCRLine(text=text, box=_box_of_points(box), score=float(score))
            for text, box, score in zip(output.txts, output.boxes, output.scores, strict=True)
        ]
        return OCRResult(lines=lines)


# --- Tesseract (if the binary and its Chinese data are installed) -------------


class TesseractBackend(OCRBackend):
    name = "tesseract"
    language = "chi_sim"

    def _binary(self) -> str:
        binary = shutil.which("tesseract")
        if binary is None:
            raise OCRUnavailable("Tesseract is not installed: the `tesseract` binary is not on PATH.")
        listed = subprocess.run([binary, "--list-langs"], capture_output=True, text=True, timeout=30, check=False)
        if self.language not in listed.stdout.split():
            raise OCRUnavailable(f"Tesseract has no {self.language} language data (tesseract-ocr-chi-sim).")
        return binary

    def recognize(self, image: Image.Image) -> OCRResult:
        binary = self._binary()
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, "PNG")
        done = subprocess.run(
            [binary, "stdin", "stdout", "-l", self.language, "--psm", "6", "tsv"],
            input=buffer.getvalue(),
            capture_output=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tesseract failed: {done.stderr.decode('utf-8', 'replace')[:500]}")
        return OCRResult(lines=parse_tesseract_tsv(done.stdout.decode("utf-8", "replace")))


def parse_tesseract_tsv(tsv: str) -> list[OCRLine]:
    """Words grouped into Tesseract's lines (block, paragraph, line numbers)."""
    grouped: dict[tuple[str, str, str], list[dict]] = {}
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") == "5" and (row.get("text") or "").strip():
            grouped.setdefault((row["block_num"], row["par_num"], row["line_num"]), []).append(row)
    lines = []
    for words in grouped.values():
        x0 = min(int(w["left"]) for w in words)
        y0 = min(int(w["top"]) for w in words)
        x1 = max(int(w["left"]) + int(w["width"]) for w in words)
        y1 = max(int(w["top"]) + int(w["height"]) for w in words)
        lines.append(OCRLine(text=join_words([w["text"] for w in words]), box=(x0, y0, x1, y1)))
    return lines


def join_words(words: list[str]) -> str:
    """chi_sim gives every Chinese character as a word; only Latin words need spaces between them."""
    text = ""
    for word in words:
        if text and text[-1].isascii() and word[0].isascii():
            text += " "
        text += word
    return text


# --- Mathpix (the paper's OCR; needs an account) ------------------------------


class MathpixBackend(OCRBackend):
    """Mathpix v3/text: formulas come back as LaTeX inside ``$...$``."""

    name = "mathpix"
    reads_formulas = True
    default_url = "https://api.mathpix.com/v3/text"
    timeout_seconds = 60

    def _credentials(self) -> dict[str, str]:
        app_id, app_key = settings.MATHPIX_APP_ID, settings.MATHPIX_APP_KEY
        if not app_id or not app_key:
            raise OCRUnavailable("Mathpix OCR needs MATHPIX_APP_ID and MATHPIX_APP_KEY in the environment.")
        return {"app_id": app_id, "app_key": app_key}

    def recognize(self, image: Image.Image) -> OCRResult:
        import httpx2 as httpx  # httpx's maintained fork, already required by openai

        headers = self._credentials()
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, "PNG")
        body = {
            "src": "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"),
            "formats": ["text"],
            "include_line_data": True,
            "math_inline_delimiters": ["$", "$"],
        }
        url = getattr(settings, "MATHPIX_API_URL", "") or self.default_url
        try:
            # Never follow a redirect: it would carry the app key to an address nobody chose.
            response = httpx.post(url, json=body, headers=headers, timeout=self.timeout_seconds, follow_redirects=False,
                                  trust_env=False, proxy=settings.MODEL_HTTP_PROXY)  # fmt: skip
        except httpx.TransportError as exc:
            raise OCRServiceError(f"Mathpix could not be reached: {exc}") from exc
        if response.is_redirect:
            target = response.headers.get("location", "")
            raise RuntimeError(f"Mathpix answered {response.status_code} redirecting to {target}; not followed")
        if response.status_code == 429 or response.status_code >= 500:
            raise OCRServiceError(f"Mathpix answered {response.status_code}")
        if response.status_code >= 400:
            raise RuntimeError(f"Mathpix refused the request ({response.status_code}): {response.text[:300]}")
        return parse_mathpix(response.json())


def parse_mathpix(data: dict) -> OCRResult:
    if data.get("error"):
        raise RuntimeError(f"Mathpix error: {data.get('error')} {data.get('error_info', '')}".strip())
    lines = [
        OCRLine(text=item.get("text", ""), box=_box_of_points(item["cnt"]), score=item.get("confidence"))
        for item in data.get("line_data") or []
        if item.get("cnt") and item.get("text", "").strip() and item.get("included", True)
    ]
    return OCRResult(lines=lines, markdown=data.get("text", ""))
