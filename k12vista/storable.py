"""What a database column cannot hold in text: a NUL character (PostgreSQL refuses it) and an unpaired
surrogate (not UTF-8). Its own module, below k12vista.text and k12vista.line_reasons, which both use it."""

import re

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """The text without NUL characters, each unpaired surrogate replaced by U+FFFD."""
    return UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)
