"""The reference release's figure placeholder, ``<image>``, in and out of question text.

The reference release marks where its figure stands in the question with the literal
``<image>``; its inference code removes it and sends the image first, its judge splits the
prompt there and puts the image between the two halves. The studio stores the text without
the placeholder (so no model ever reads a literal ``<image>``) and keeps where it stood as
character offsets into the stored text (``Question.figure_positions``), so an export can put
it back where it was. No Django here: the importers' worker processes use it too.
"""

from __future__ import annotations

from collections.abc import Iterable

IMAGE_PLACEHOLDER = "<image>"


def take_placeholders(text: str) -> tuple[str, list[int]]:
    """The text without ``<image>`` and, for each one removed, its offset in the returned text."""
    pieces = text.split(IMAGE_PLACEHOLDER)
    positions, offset = [], 0
    for piece in pieces[:-1]:
        offset += len(piece)
        positions.append(offset)
    return "".join(pieces), positions


def canonical_positions(positions: Iterable[int], text: str) -> list[int]:
    """Sorted offsets, none at all for one placeholder at the text's end: that is where an export
    puts it when none is known, so a round trip gives back the same content."""
    offsets = sorted(positions)
    return [] if offsets == [len(text)] else offsets


def without_placeholders(text: str) -> str:
    """Text a model may read: a placeholder left in older stored text is taken out, never sent."""
    return text.replace(IMAGE_PLACEHOLDER, "") if IMAGE_PLACEHOLDER in text else text


def put_placeholders(text: str, positions: Iterable[int], *, at_least_one: bool = False) -> str:
    """``text`` with ``<image>`` put back at ``positions`` (offsets past the end, after an edit
    shortened the text, go to its end); with ``at_least_one`` and no position, one at the end.

    The reference judge splits its prompt at the placeholder and reads both halves, so every
    record it reads needs one, figure or not.
    """
    offsets = sorted(min(max(int(p), 0), len(text)) for p in positions)
    if not offsets and at_least_one:
        offsets = [len(text)]
    out, start = [], 0
    for offset in offsets:
        out.append(text[start:offset])
        out.append(IMAGE_PLACEHOLDER)
        start = offset
    out.append(text[start:])
    return "".join(out)
