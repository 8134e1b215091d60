"""Text shown in lists: short excerpts that never cut a formula in half."""

from __future__ import annotations

import re

from django import template

from k12vista.roles import Role
from k12vista.vocabulary import QuestionType, Stage, Subject

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


def _code_names() -> dict[str, str]:
    return {str(code): str(label) for choices in (Subject, Stage, QuestionType) for code, label in choices.choices}


@register.filter
def vocab(code: object) -> str:
    """A subject, stage or question-type code as people read it (``biology`` -> 生物), also inside a
    key such as a stratum ``math/9/multiple_choice``; anything else is shown as it is."""
    names = _code_names()
    text = "" if code is None else str(code)
    if text in names:
        return str(names[text])
    parts = text.split("/")
    if len(parts) > 1 and any(part in names for part in parts):
        return " / ".join(str(names.get(part, part)) for part in parts)
    return text


@register.filter
def role_label(name: str) -> str:
    """A role's group name (``annotator``) as its label (标注员)."""
    return str(Role(name).label) if name in Role.values else name


@register.filter
def choice_label(code: str, choices) -> str:
    """A stored code by the label of ``choices`` (a TextChoices class passed from the view or a template
    variable holding its ``choices``): ``imported`` -> 导入的标签."""
    mapping = dict(getattr(choices, "choices", choices) or ())
    return str(mapping.get(code, code))
