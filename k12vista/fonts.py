"""The bundled Chinese font arrives with the page that needs it (issue 25, fault 7).

Noto Sans SC is vendored as ~100 woff2 files per weight, each declared for a unicode-range, so a browser
fetches only the ranges a page uses; but it learns which ones only once it lays the text out, and until a
range arrives the text that needs it is drawn in a fallback font (boxes, on a machine with no Chinese font
of its own). So every full page names, in its head, the range files its own Chinese text falls in
(``<link rel="preload">``), fetched alongside the stylesheets; the faces themselves block rather than swap
(scripts/vendor.sh), so a text waits for its font instead of showing boxes first.
"""

from __future__ import annotations

import bisect
import re
from functools import cache
from pathlib import Path

from django.conf import settings
from django.templatetags.static import static

FONT_DIR = "vendor/noto-sans-sc"
WEIGHTS = ("400", "700")
_FACE = re.compile(r"url\(\./files/([^)]+)\)[^;]*;\s*unicode-range:\s*([^;]+);")
# CJK ideographs, their punctuation and full-width forms: what the page's other fonts lack.
_WIDE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
# Text drawn bold (weight 600 and up picks the 700 face): headings, table heads, labels, the brand.
_BOLD = re.compile(
    r"<(h[1-6]|th|label|strong|b|dt|figcaption)\b[^>]*>(.*?)</\1>|class=\"brand\"[^>]*>(.*?)</a>", re.S
)  # fmt: skip
_HEAD_END = re.compile(rb"</head>", re.I)


@cache
def ranges(weight: str) -> tuple[list[int], list[tuple[int, str]]]:
    """The weight's ranges as a sorted list of starts and, at each, (end, file)."""
    css = _font_css(weight)
    spans: list[tuple[int, int, str]] = []
    for file, declared in _FACE.findall(css):
        for span in declared.split(","):
            first, _, last = span.strip().removeprefix("U+").partition("-")
            spans.append((int(first, 16), int(last or first, 16), file))
    spans.sort()
    return [start for start, _end, _file in spans], [(end, file) for _start, end, file in spans]


def _font_css(weight: str) -> str:
    for folder in settings.STATICFILES_DIRS:
        path = Path(folder) / FONT_DIR / f"{weight}.css"
        if path.exists():
            return path.read_text(encoding="utf-8")
    return ""


def files_for(text: str, weight: str) -> list[str]:
    """The range files of ``weight`` that draw the wide characters of ``text``, in the CSS's order of files."""
    starts, spans = ranges(weight)
    found: set[str] = set()
    for char in set(_WIDE.findall(text)):
        point = ord(char)
        at = bisect.bisect_right(starts, point) - 1
        if at >= 0 and spans[at][0] >= point:
            found.add(spans[at][1])
    return sorted(found)


def preload_links(html: str) -> str:
    bold = "".join(a or b for _tag, a, b in _BOLD.findall(html))
    files = [f"{FONT_DIR}/files/{file}" for file in files_for(html, "400")]
    files += [f"{FONT_DIR}/files/{file}" for file in files_for(bold, "700")]
    # crossorigin: fonts are fetched in CORS mode, and a preload without it is fetched a second time.
    link = '<link rel="preload" href="{}" as="font" type="font/woff2" crossorigin>'
    return "".join(link.format(static(path)) for path in files)


class FontPreloadMiddleware:
    """Adds the preload links to every full HTML page (an htmx fragment has no head: its text waits on
    the blocking faces)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            response.streaming
            or not response.get("Content-Type", "").startswith("text/html")
            or response.get("Content-Encoding")
        ):
            return response
        content = response.content
        head_end = _HEAD_END.search(content)
        if head_end is None:
            return response
        links = preload_links(content.decode(response.charset or "utf-8", errors="replace")).encode()
        if links:
            response.content = content[: head_end.start()] + links + content[head_end.start() :]
            if "Content-Length" in response:
                response["Content-Length"] = str(len(response.content))
        return response
