"""The API's JSON parser (REST_FRAMEWORK's DEFAULT_PARSER_CLASSES): one place that refuses, with
a 400, what Python's json module would accept and the studio could not keep.

DRF's own parser uses ``json.loads``, which recurses (a body nested 100,000 levels raised
RecursionError, a 500, on any endpoint), reads ``1e400`` as infinity and accepts ``NaN`` (neither
can be stored in a JSON column, nor written back as JSON), and keeps a NUL or an unpaired surrogate
in text (PostgreSQL refuses both). orjson refuses nesting past 1024 levels, non-finite numbers and
unpaired surrogates while it parses; ``unstorable_reason`` then refuses a NUL anywhere and
nesting past ``k12vista.text.MAX_DEPTH``, walking without recursion, as the importers do for a line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from django.utils.translation import gettext
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from k12vista.text import unstorable_reason


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = orjson.loads(stream.read())
        except orjson.JSONDecodeError as exc:
            raise ParseError(gettext("The body is not JSON the studio accepts: %(error)s") % {"error": exc}) from None
        reason = unstorable_reason(data)
        if reason:
            raise ParseError(gettext("The JSON body cannot be kept: %(reason)s") % {"reason": reason})
        return data
