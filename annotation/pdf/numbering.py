"""Which numbering a paper gives its questions, decided over the whole paper before it is cut.

Most papers number their questions ``1.`` ``1、`` ``1．``; some number them ``（1）``, the form other papers give
sub-questions. The two read apart by their sequence: sub-questions start again at (1) in each question, with
the questions' own numbers between them, while bracketed question numbers run on (7), (8), (9) … with no
other question number between them. A run of at least ``MIN_RUN`` bracketed numbers, each the one before plus
one, longer than any run of dot numbers, that dot numbers running on neither interleave nor enclose, is the
paper's question numbering.
"""

from __future__ import annotations

import re

from annotation.pdf.layout import Line

LONE_NUMBER = re.compile(r"^\s*(\d{1,3})\s*$")
PAREN_NUMBER = re.compile(r"^[(（]\s*(\d{1,3})\s*[)）]\s*")
DOT_NUMBER = re.compile(r"^(\d{1,3})\s*(?:[．、]|\.(?!\d))\s*")  # "4.2×10⁴ km" starting a line is no number
MIN_RUN = 5  # four bracketed choices (1)-(4), or a syllabus's four topics, are no paper's questions


def bracketed_questions(lines: list[Line]) -> set[int]:
    """The ids of the lines whose ``（n）`` is a question's number, not a sub-question's."""
    chains: list[list[tuple[int, int]]] = []  # each: (position in lines, number)
    dot_chains: list[list[tuple[int, int]]] = []
    dots: list[tuple[int, int]] = []
    for at, line in enumerate(lines):
        text = line.text.strip()
        if dot := DOT_NUMBER.match(text):
            dots.append((at, int(dot.group(1))))
            _extend(dot_chains, at, int(dot.group(1)))
            continue
        paren = PAREN_NUMBER.match(text)
        if paren and text[paren.end() :].strip():
            _extend(chains, at, int(paren.group(1)))
    # The paper's question numbers are its longest run: (1)-(4) choices under questions numbered 1-5 are not.
    longest_dots = max((len(c) for c in dot_chains), default=0)
    found: set[int] = set()
    for chain in chains:
        if len(chain) < MIN_RUN or len(chain) <= longest_dots or _interleaved(chain, dots) or _nested(chain, dots):
            continue
        found |= {id(lines[at]) for at, _ in chain}
    return found


def _extend(chains: list[list[tuple[int, int]]], at: int, value: int) -> None:
    """The most recent chain this number follows on takes it; otherwise it starts a chain of its own."""
    chain = next((c for c in reversed(chains) if c[-1][1] == value - 1), None)
    if chain is None:
        chains.append([(at, value)])
    else:
        chain.append((at, value))


def _interleaved(chain: list[tuple[int, int]], dots: list[tuple[int, int]]) -> bool:
    """Dot numbers running on (n, then n+1) between the chain's first and last member, about as often as
    the chain's own: those are the questions, the chain their sub-questions' (a step list in a solution is
    shorter)."""
    inside = [value for at, value in dots if chain[0][0] < at < chain[-1][0]]
    following = sum(1 for a, b in zip(inside, inside[1:], strict=False) if b == a + 1)
    return following * 2 >= len(chain) - 1


def _nested(chain: list[tuple[int, int]], dots: list[tuple[int, int]]) -> bool:
    """Between a dot number and the next ("1．图形的认识" (1)…(7) "2．图形与变换"): the points of an item of an
    outline, not questions."""
    before = [value for at, value in dots if at < chain[0][0]]
    after = [value for at, value in dots if at > chain[-1][0]]
    return bool(before and after) and after[0] == before[-1] + 1


def badge_runs(lines: list[Line]) -> set[int]:
    """The ids of numbers alone on their line that run on (7, 8, 9 …), each just above the text it heads, at
    its left edge: question numbers printed in badges, wherever the paper's numbering starts."""
    chains: list[list[tuple[int, int]]] = []
    for at, line in enumerate(lines[:-1]):
        lone = LONE_NUMBER.match(line.text)
        below = lines[at + 1]
        height = max(1.0, line.bbox[3] - line.bbox[1])
        close = below.page == line.page and 0 <= below.bbox[1] - line.bbox[3] <= 2 * height
        heads = close and abs(below.bbox[0] - line.bbox[0]) <= 1.5 * height and not LONE_NUMBER.match(below.text)
        if lone and heads:
            _extend(chains, at, int(lone.group(1)))
    return {id(lines[at]) for chain in chains if len(chain) >= 3 for at, _ in chain}
