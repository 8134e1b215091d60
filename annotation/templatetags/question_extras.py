"""Question fields and their coded values as people read them (the edit history, lists)."""

from __future__ import annotations

from django import template
from django.core.exceptions import FieldDoesNotExist

from annotation.models import Assignment, Question

register = template.Library()


@register.filter
def field_label(name: str) -> str:
    """``raw_solution`` -> 原始解析: the field's verbose name, else the name as stored."""
    try:
        return str(Question._meta.get_field(name).verbose_name)
    except FieldDoesNotExist:
        return name


@register.filter
def field_value(value: object, name: str) -> object:
    """A stored value of field ``name``: coded choices (status, subject, type) by their label."""
    try:
        choices = dict(Question._meta.get_field(name).choices or ())
    except FieldDoesNotExist:
        return value
    return choices.get(value, value) if isinstance(value, str) else value


@register.filter
def task_label(code: str) -> str:
    """An assignment's task code (``ocr_review``) as its label."""
    return str(dict(Assignment.Task.choices).get(code, code))
