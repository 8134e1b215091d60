"""Numbered lines of a byte stream, without Django: the JSONL importers' reading (k12vista.import_files)
and the PEM-800K import's reader process (pem.training.reader, which runs without Django) share it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

READ_CHUNK = 1024 * 1024


def numbered_lines(stream: IO[bytes], max_bytes: int, *, chunk: int = READ_CHUNK) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) for every line; None for a line over ``max_bytes``, the rest of which is
    skipped ``chunk`` bytes at a time without holding it."""
    number = 0
    while line := stream.readline(max_bytes + 1):
        number += 1
        if len(line) > max_bytes:
            while line and not line.endswith(b"\n"):
                line = stream.readline(chunk)
            yield number, None
        else:
            yield number, line
