"""Question fields and their coded values as people read them (the edit history, lists), and a
question's text with the formulas the paper set as images shown at their place."""

from __future__ import annotations

from django import template
from django.core.exceptions import FieldDoesNotExist
from django.template.defaultfilters import linebreaksbr
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from annotation import services
from annotation.checks import FORMULA_PLACEHOLDER
from annotation.models import Assignment, Figure, Question
from annotation.pdf.notes import note_text

register = template.Library()


@register.filter
def field_label(name: str) -> str:
    """``raw_solution`` -> 原始解析: the field's verbose name, else the name as stored."""
    return services.field_label(name)


@register.filter
def mapped_row(row: object) -> SafeString:
    """A public set's field mapping as an import report stores it ([published key, [fields]]): the key as
    published, the fields in the reader's language; a row stored as text by an older report as it is."""
    if isinstance(row, list) and len(row) == 2 and isinstance(row[1], list):
        fields = " + ".join(field_label(str(name)) for name in row[1])
        return format_html('<code translate="no">{}</code> → {}', row[0], fields)
    return escape(str(row))


@register.filter
def field_value(value: object, name: str) -> object:
    """A stored value of field ``name``: coded choices (status, subject, type) by their label."""
    try:
        choices = dict(getattr(Question._meta.get_field(name), "choices", None) or ())
    except FieldDoesNotExist:
        return value
    if isinstance(value, list):  # answers, steps, options: as the editor shows them, never a Python list
        return "; ".join(f"{v.get('label', '')}. {v.get('text', '')}" if isinstance(v, dict) else str(v)
                         for v in value)  # fmt: skip
    return choices.get(value, value) if isinstance(value, str) else value


@register.filter
def task_label(code: str) -> str:
    """An assignment's task code (``ocr_review``) as its label."""
    return str(dict(Assignment.Task.choices).get(code, code))


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


@register.filter
def import_note(item: object) -> str:
    """A PDF import's note (a code with parameters) in the reader's language; an old report's text as it is."""
    return note_text(item)


@register.filter
def flag_message(flag) -> str:  # noqa: ANN001
    """A flag's message in the reader's language where it was stored as notes (the PDF import's), else as
    written."""
    notes = flag.detail.get("notes") if isinstance(flag.detail, dict) else None
    if isinstance(notes, list) and notes:
        return "; ".join(note_text(item) for item in notes)
    return flag.message


@register.filter
def import_error(document) -> str:  # noqa: ANN001
    """Why a document's import stopped, in the reader's language where the import kept it as a note."""
    return document.error_message


@register.filter
def join_notes(items: object) -> str:
    """Notes (or old reports' texts) in the reader's language, one after another."""
    return "; ".join(note_text(item) for item in items) if isinstance(items, list) else ""
