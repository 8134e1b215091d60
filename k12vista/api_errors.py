"""API errors in the reader's language (issue 29).

Django words a missing object as "No Job matches the given query.", in English whatever the request's
language, and DRF passes that text on; the API answers DRF's own "Not found." instead, which is translated
(and names no model class)."""

from typing import Any

from django.http import Http404
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Http404):
        exc = NotFound()
    return drf_exception_handler(exc, context)
