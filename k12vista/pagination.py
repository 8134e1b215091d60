"""The one pagination, for pages and for the API.

Pages: ``keyset_page`` (``?after=<id>``, a "More" link with the next query).

The API: keyset cursors (DRF's CursorPagination), as fast on
the last page of 300,000 rows as on the first, that answer a bad cursor with 400.

DRF decodes a cursor's position but never checks it against the ordering field:
a forged ``?cursor=`` (base64 of ``p=abc``) reached the database as ``id > 'abc'``
and came back as a 500."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework import pagination
from rest_framework.exceptions import NotFound, ValidationError

INVALID_CURSOR = "not a cursor this list gave out; start again from the first page"
INT64 = range(-(2**63), 2**63)


class Keyset(pagination.CursorPagination):
    ordering = "id"
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"

    def get_ordering(self, request, queryset, view):
        # A view may name its own keyset (JobList: newest created first).
        ordering = getattr(view, "ordering", None)
        return (ordering,) if isinstance(ordering, str) else super().get_ordering(request, queryset, view)

    def paginate_queryset(self, queryset, request, view=None):
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: [INVALID_CURSOR]}) from None
        if cursor is not None and cursor.position is not None:
            self._check_position(cursor.position)
        return cursor

    def _check_position(self, position: str) -> None:
        field = self._model._meta.get_field(self.ordering[0].lstrip("-"))
        try:
            value = field.to_python(position)
        except DjangoValidationError:
            raise ValidationError({self.cursor_query_param: [INVALID_CURSOR]}) from None
        if isinstance(field, models.IntegerField) and value not in INT64:
            raise ValidationError({self.cursor_query_param: [INVALID_CURSOR]})


class ById(Keyset):
    """Oldest first, up to 1,000 a page (``?page_size=``)."""


class Newest(Keyset):
    ordering = "-id"
    page_size = 50


PAGE_SIZE = 50


def keyset_page(rows: models.QuerySet, request, *, size: int | None = None) -> tuple[list, str | None]:
    """One page of rows in id order after ``?after=<id>``, and the query string
    of the next page (None on the last). A bad or out-of-range ``after`` starts
    from the beginning rather than failing."""
    try:
        after = int(request.GET.get("after", 0))
    except ValueError:
        after = 0
    if after not in INT64:
        after = 0
    size = size or PAGE_SIZE
    page = list(rows.filter(id__gt=after).order_by("id")[: size + 1])
    if len(page) <= size:
        return page, None
    page = page[:size]
    query = request.GET.copy()
    query["after"] = page[-1].pk
    return page, query.urlencode()
