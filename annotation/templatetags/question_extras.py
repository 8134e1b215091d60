"""A question's text as people read it: formulas the paper set as images shown at their place."""

from __future__ import annotations

from django import template
from django.template.defaultfilters import linebreaksbr
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from annotation.checks import FORMULA_PLACEHOLDER
from annotation.models import Figure

register = template.Library()


@register.filter
def with_formula_images(text: str, question) -> SafeString:  # noqa: ANN001
    """``[[formula:N]]`` as the question's formula image N (served by the figure's file rule), the rest escaped.

    A placeholder without its image stays as written, so nothing is hidden."""
    images = {f.position: f for f in question.figures.all() if f.kind == Figure.Kind.FORMULA}
    parts, last = [], 0
    for match in FORMULA_PLACEHOLDER.finditer(text or ""):
        parts.append(escape(text[last : match.start()]))
        figure = images.get(int(match.group(1)))
        if figure is None:
            parts.append(escape(match.group()))
        else:
            parts.append(format_html('<img class="formula-image" src="{}" alt="{}" data-formula="{}">',
                                     figure.image.url, _("Formula image"), figure.position))  # fmt: skip
        last = match.end()
    parts.append(escape((text or "")[last:]))
    return linebreaksbr(mark_safe("".join(parts)), autoescape=False)  # noqa: S308 - every part is escaped above


@register.filter
def real_figures(question) -> list:  # noqa: ANN001
    """The question's figures, without the formula images shown in its text."""
    return [f for f in question.figures.all() if f.kind != Figure.Kind.FORMULA]
