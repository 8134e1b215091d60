"""Messages as the reference code builds them (docs/formats.md, "Studio and reference protocols").

Answering (the reference's ``vllminfer``): one user message, no system message; the image part
first, then the prompt's text with ``<image>`` removed. Judging (its judge models): the prompt
split at its first ``<image>``, the image between the two halves. The question is the reference
record's ``question`` (stem, ``<image>`` where the figure stood, the options as ``A. …`` lines),
with no subject or grade added, filled into a registered reference prompt as the reference's own
``str.format`` call does. The image is the stored figure's JPEG bytes as they are (a figure stored
as PNG is converted, as the reference export does), with ``detail: high``, never resized here.

The reference record holds one figure; so does this protocol (the question's first). A question
without a figure is sent without an image part: the reference code would send an empty image,
which servers refuse.
"""

from __future__ import annotations

from typing import Any

from annotation import export
from annotation.models import Figure, Question
from annotation.reference_format import IMAGE_PLACEHOLDER
from inference.models import PromptTemplate
from inference.reference.prompts import render


def reference_question(question: Question) -> str:
    """The question as the reference record carries it (what its prompts' ``{question}`` receives)."""
    return export.options_block(question)


def first_figure(question: Question) -> Figure | None:
    # .all() reads a prefetch where the run loaded one.
    figures = [f for f in question.figures.all() if f.kind == Figure.Kind.FIGURE]
    return min(figures, key=lambda f: (f.position, f.pk)) if figures else None


def image_part(question: Question) -> dict[str, Any] | None:
    figure = first_figure(question)
    if figure is None:
        return None
    url = f"data:image/jpeg;base64,{export.jpeg_base64(figure)}"
    return {"type": "image_url", "image_url": {"url": url, "detail": "high"}}


def answer_prompt(template: PromptTemplate, question: Question) -> str:
    """The registered answer prompt filled as the reference's ``_build_prompt`` fills it."""
    return render(template.user_template, question=reference_question(question))


def answer_messages(template: PromptTemplate, question: Question) -> list[dict[str, Any]]:
    """One user message: the image, then the prompt without its placeholder."""
    parts: list[dict[str, Any]] = []
    image = image_part(question)
    if image is not None:
        parts.append(image)
    parts.append({"type": "text", "text": answer_prompt(template, question).replace(IMAGE_PLACEHOLDER, "")})
    return [{"role": "user", "content": parts}]


def judge_messages(prompt: str, question: Question) -> list[dict[str, Any]]:
    """One user message: the filled judge prompt's text before its first ``<image>``, the image,
    the text after it (up to a second placeholder, where the reference stops reading)."""
    pieces = prompt.split(IMAGE_PLACEHOLDER)
    parts: list[dict[str, Any]] = [{"type": "text", "text": pieces[0]}]
    image = image_part(question)
    if image is not None:
        parts.append(image)
    parts.append({"type": "text", "text": pieces[1] if len(pieces) > 1 else ""})
    return [{"role": "user", "content": parts}]
