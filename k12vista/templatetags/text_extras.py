"""Text shown in lists: short excerpts that never cut a formula in half."""

from __future__ import annotations

import re

from django import template

register = template.Library()

# The delimiters static/js/app.js typesets; a span is cut whole or not at all.
MATH_SPAN = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|\$[^$\n]+?\$", re.DOTALL)
LONGEST_EXTENSION = 80  # a formula that would run this far past the cut is dropped instead


@register.filter
def excerpt(text: str | None, length: int = 80) -> str:
    """The first ``length`` characters, ended at a formula's edge: a formula the cut would split is
    kept whole when it ends soon after, else left out, so KaTeX never sees half of one."""
    text = text or ""
    if len(text) <= length:
        return text
    cut = length
    for span in MATH_SPAN.finditer(text):
        if span.start() >= length:
            break
        if span.end() > length:
            cut = span.end() if span.end() - length <= LONGEST_EXTENSION else span.start()
            break
    return text[:cut].rstrip() + "…"
