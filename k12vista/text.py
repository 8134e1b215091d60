"""Text from outside that the database must be able to store.

PostgreSQL refuses a NUL character in text and jsonb, and UTF-8 has no encoding for
an unpaired surrogate (``json.loads('"\\ud835"')`` makes one; so does a JavaScript
message cut at a UTF-16 index). Importers reject records holding either, line by
line (``parse_record_line``); messages we write ourselves go through ``storable``."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

from k12vista.line_reasons import Reason, ReasonError, reason, reason_of, reason_text
from k12vista.storable import UNSTORABLE, storable

# In JSON text a NUL or a surrogate can only be written as a \u escape (raw, the first is not
# valid JSON and the second not valid UTF-8): a line without one has no string to search,
# and searching them all (a figure's base64 is most of a line) cost more than parsing it.
MAYBE_UNSTORABLE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
#: Deeper than any record we read; deeper nesting is refused before anything recurses over it.
MAX_DEPTH = 64


class BadLine(ReasonError):
    """A line that cannot be a record; the message says why, for the line's report."""


def unstorable(value: Any, *, strings: bool = True) -> Reason | None:
    """Why the parsed JSON cannot be stored as it is (a NUL, an unpaired surrogate, a number
    that is not finite, or nesting past MAX_DEPTH), naming where, as a reason (a code worded in each
    reader's language: an import's report is read after the worker wrote it); None when it can.
    Walks without recursion.

    ``strings=False`` checks the nesting alone, for JSON whose text held no escape
    that could make a NUL or a surrogate (see parse_record_line)."""
    stack: list[tuple[Any, Any, int]] = [(value, None, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return reason("too_deep", n=MAX_DEPTH)
        if isinstance(item, str):
            found = UNSTORABLE.search(item) if strings else None
            if found:
                what = reason("nul_char" if found.group() == "\x00" else "surrogate_char")
                return reason("unstorable", where=_where(path), what=what, n=found.start() + 1)
        elif isinstance(item, float) and not math.isfinite(item):
            return reason("not_finite_at", where=_where(path), number=str(item))
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, ((path, key),), depth + 1))
                stack.append((child, (path, key), depth + 1))
        elif isinstance(item, list):
            stack.extend((child, (path, n), depth + 1) for n, child in enumerate(item))
    return None


def unstorable_reason(value: Any, *, strings: bool = True) -> str | None:
    """``unstorable`` in the active language, for a refusal said at once (a request's body)."""
    found = unstorable(value, strings=strings)
    return reason_text(found) if found is not None else None


def _where(path: Any) -> Reason | str:
    """A path of unstorable's walk: ``a.b[2]``, "the name 'a.b'" for a key, "the record" for the whole.

    Only a failing line needs one, so the walk keeps (parent, step) pairs and never
    formats the thousands of places that are fine."""
    if path is None:
        return reason("the_record")
    if len(path) == 1:  # the key itself, not its value
        return reason("the_name", name=repr(_path(path[0])))
    return _path(path)


def _path(path: Any) -> str:
    if path is None:
        return ""
    parent, step = path
    above = _path(parent)
    if isinstance(step, int):
        return f"{above}[{step}]"
    return f"{above}.{storable(step)[:50]}" if above else storable(step)[:50]


class NotFinite(ReasonError):
    pass


def _refuse_constant(name: str) -> float:
    raise NotFinite(reason("not_finite", number=name))


@functools.cache
def _decoder(parse_float: Callable[[str], float]) -> json.JSONDecoder:
    """A decoder refusing what Python's json reads as a float that is not finite (Infinity, NaN,
    1e400) as it parses: no JSON column and no JSON writer takes one."""

    def finite(text: str) -> float:
        value = parse_float(text)
        if not math.isfinite(value):
            raise NotFinite(reason("not_finite", number=text[:50]))
        return value

    return json.JSONDecoder(parse_float=finite, parse_constant=_refuse_constant)


def parse_record_line(line: bytes, parse_float: Callable[[str], float] = float) -> Any:
    """One JSONL line as parsed JSON, or BadLine: not UTF-8, not JSON, a number that is not
    finite, nested too deep, or holding text the database cannot store. A record is never
    half-cleaned: a line with a NUL is refused, not stored without it, so what was imported
    is what was sent.

    ``parse_float``: float, or the PEM-800K import's float subclass (which keeps how a chain
    holding one is keyed)."""
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadLine(reason("not_utf8", n=exc.start + 1)) from None
    try:
        record = _decoder(parse_float).decode(text)
    except RecursionError:
        raise BadLine(reason("too_deep", n=MAX_DEPTH)) from None
    except NotFinite as exc:
        raise BadLine(reason_of(exc)) from None
    except json.JSONDecodeError as exc:
        # Where it broke, in the reader's words; Python's own wording ("Expecting value") stays out.
        raise BadLine(reason("not_json_at", n=exc.pos + 1)) from None
    except ValueError as exc:
        raise BadLine(reason("not_json", error=str(exc))) from None
    strings = MAYBE_UNSTORABLE.search(text) is not None
    # The walk only where the text could hold what it looks for: an escape for a NUL or a
    # surrogate, or more brackets than MAX_DEPTH (counting is a tenth of walking).
    if strings or text.count("[") + text.count("{") > MAX_DEPTH:
        refused = unstorable(record, strings=strings)
        if refused:
            raise BadLine(refused)
    return record
