"""Questions asked as the reference code asks them (docs/formats.md, "Asking a model in the
reference protocol"): its ``vllminfer`` sends one user message, no system message, the image part
first, then the prompt's text with ``<image>`` removed. The question is the reference record's
``question`` (stem, ``<image>`` where the figure stood, the options as ``A. …`` lines), with no
subject or grade added, filled into a registered reference prompt as the reference's own
``str.format`` call does. The image is the stored figure's JPEG bytes as they are (a figure stored
as PNG is converted, as the reference export does), with ``detail: high``
(``client.stored_image_url``), never resized here. Judging builds its message in
``inference.reference.judging``.

The reference record holds one figure, and its code sends that one; a question of the studio with
several figures sends every one, in order, where the reference sends its one (the record's ``img``
stays the first, as the file format has room for one). A question without a figure is sent
without an image part: the reference code would send an empty image, which servers refuse.
"""

from __future__ import annotations

from typing import Any

from annotation import export
from annotation.models import Figure, Question
from annotation.reference_format import IMAGE_PLACEHOLDER
from inference import client
from inference.models import PromptTemplate
from inference.reference.prompts import render


def reference_question(question: Question) -> str:
    """The question as the reference record carries it (what its prompts' ``{question}`` receives)."""
    return export.options_block(question)


def question_figures(question: Question) -> list[Figure]:
    """The question's figures in order (formula images are text, not figures); .all() reads a
    prefetch where the run loaded one."""
    figures = [f for f in question.figures.all() if f.kind == Figure.Kind.FIGURE]
    return sorted(figures, key=lambda f: (f.position, f.pk))


def figure_parts(question: Question) -> list[dict[str, Any]]:
    """Every figure as an image part, its stored JPEG bytes as they are, ``detail: high``."""
    return [client.stored_image_url(export.jpeg_base64(figure)) for figure in question_figures(question)]


def answer_prompt(template: PromptTemplate, question: Question) -> str:
    """The registered answer prompt filled as the reference's ``_build_prompt`` fills it."""
    return render(template.user_template, question=reference_question(question))


def answer_messages(template: PromptTemplate, question: Question) -> list[dict[str, Any]]:
    """One user message: the images, then the prompt without its placeholder."""
    parts = figure_parts(question)
    parts.append({"type": "text", "text": answer_prompt(template, question).replace(IMAGE_PLACEHOLDER, "")})
    return [{"role": "user", "content": parts}]
