"""Text from outside that the database must be able to store.

PostgreSQL refuses a NUL character in text and jsonb, and UTF-8 has no encoding for
an unpaired surrogate (``json.loads('"\\ud835"')`` makes one; so does a JavaScript
message cut at a UTF-16 index). Importers reject records holding either, line by
line (``parse_record_line``); messages we write ourselves go through ``storable``."""

from __future__ import annotations

import json
import re
from typing import Any

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: Deeper than any record we read; deeper nesting is refused before anything recurses over it.
MAX_DEPTH = 64


class BadLine(ValueError):
    """A line that cannot be a record; the message says why, for the line's report."""


def storable(text: str) -> str:
    """The text without NUL characters, each unpaired surrogate replaced by U+FFFD."""
    return UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def unstorable_reason(value: Any) -> str | None:
    """Why the parsed JSON cannot be stored as it is (a NUL, an unpaired surrogate, or
    nesting past MAX_DEPTH), naming where; None when it can. Walks without recursion."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(item, str):
            found = UNSTORABLE.search(item)
            if found:
                what = "a NUL character (\\u0000)" if found.group() == "\x00" else "an unpaired surrogate"
                return f"{where or 'the record'}: {what} at character {found.start() + 1}, which cannot be stored"
        elif isinstance(item, dict):
            for key, child in item.items():
                label = f"{where}.{storable(key)[:50]}" if where else storable(key)[:50]
                stack.append((key, f"the name {label!r}", depth + 1))
                stack.append((child, label, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{n}]", depth + 1) for n, child in enumerate(item))
    return None


def parse_record_line(line: bytes) -> Any:
    """One JSONL line as parsed JSON, or BadLine: not UTF-8, not JSON, nested too deep,
    or holding text the database cannot store. A record is never half-cleaned: a line
    with a NUL is refused, not stored without it, so what was imported is what was sent."""
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadLine(f"not valid UTF-8 (byte {exc.start + 1} of the line)") from None
    try:
        record = json.loads(text)
    except RecursionError:
        raise BadLine(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise BadLine(f"not valid JSON: {exc}") from None
    reason = unstorable_reason(record)
    if reason:
        raise BadLine(reason)
    return record
