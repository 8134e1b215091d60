"""A question's lines routed to its parts: stem, options, answer and solution (annotation.pdf.segment cuts
the paper into questions and hands each line of a question here). ``【答案】`` and ``【解析】`` (or ``解：``)
start the answer and the solution; options start with ``A．``; sub-questions start with ``(1)``, ``（1）`` or
``①`` and are written ``(1)``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from annotation.pdf.answers import MARKER
from annotation.pdf.options import (
    BARE_A,
    LOOKALIKE_A,
    as_options,
    force_a,
    letter_row,
    option_label,
    option_markers,
    starts_option_b,
    starts_options,
)

if TYPE_CHECKING:
    from annotation.pdf.segment import ParsedQuestion

SUB_QUESTION = re.compile(r"^(?:[(（]\s*(\d{1,2})\s*[)）]|([①②③④⑤⑥⑦⑧⑨⑩]))\s*")
SOLUTION_START = re.compile(r"^(?:【解】|解\s*[:：])\s*")
CIRCLED = "①②③④⑤⑥⑦⑧⑨⑩"


def join_line(parts: list[str], text: str) -> None:
    """Wrapped lines join without a space between Chinese characters, with one between Latin words."""
    if parts and parts[-1] and not parts[-1].endswith("\n") and parts[-1][-1].isascii() and text[:1].isascii():
        parts.append(" ")
    parts.append(text)


def normalize_sub_question(text: str) -> str:
    """(1), （1） and ① all become ``(1)`` so annotators see one style."""
    match = SUB_QUESTION.match(text)
    if not match:
        return text
    number = match.group(1) or str(CIRCLED.index(match.group(2)) + 1)
    return f"({number}) " + text[match.end() :]


def add_text(question: ParsedQuestion, text: str) -> None:
    """Routes a line (or the pieces between its 【】 markers) to stem, options, answer or solution."""
    pieces = MARKER.split(text)
    _add_piece(question, pieces[0])
    for marker, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        question.part = "answer" if marker == "答案" else "solution"
        if question.part == "solution" and question.solution:
            question.solution += "\n"
        _add_piece(question, piece)


def _add_piece(question: ParsedQuestion, text: str) -> None:
    text = text.strip()
    if not text:
        return
    if question.part == "answer":
        question.answer = f"{question.answer} {text}".strip()
    elif question.part == "solution":
        question.solution += text
    elif solved := SOLUTION_START.match(text):
        # "解：…" after a question set without 【】 markers: its worked solution.
        question.part = "solution"
        if question.solution:
            question.solution += "\n"
        _add_piece(question, text[solved.end() :] or " ")
    elif (row := letter_row(text, question)) is not None:
        # Options that are pictures or table columns: only their letters are text ("A B", "（C） （D）").
        question.options += [{"label": label, "text": ""} for label in row]
        question.options_in_part = question.options_in_part or question.sub_seen
        question.part = "stem"  # what follows (a table's rows, the next sub-question) is no option text
    elif question.part == "option" and SUB_QUESTION.match(text):
        question.part = "stem"
        _add_piece(question, text)
    elif question.part == "option" or starts_options(as_options(text)):
        _add_options(question, as_options(text))
    elif question.maybe_a is not None and not question.options and starts_option_b(text):
        # "(4) 在质量…" then "(B) 在压强…": the line read as (4) or "A " was option A after all.
        at, question.sub_seen = question.maybe_a
        first = "".join(question.stem[at:]).strip()
        del question.stem[at:]
        while question.stem and question.stem[-1] == "\n":
            question.stem.pop()
        question.maybe_a = None
        _add_options(question, as_options(first) if as_options(first) != first else force_a(first))
        _add_options(question, text)
    else:
        if not question.options and (LOOKALIKE_A.match(text) or BARE_A.match(text)):
            question.maybe_a = (len(question.stem) + (1 if SUB_QUESTION.match(text) and question.stem else 0),
                                question.sub_seen)  # fmt: skip
        if sub := SUB_QUESTION.match(text):
            text = normalize_sub_question(text)
            # ①②③④ before the options are statements the options combine ("A．①②"), not parts.
            question.sub_seen = question.sub_seen or bool(sub.group(1))
            if question.stem:
                question.stem.append("\n")
        join_line(question.stem, text)


def _add_options(question: ParsedQuestion, text: str) -> None:
    last = question.options[-1]["label"] if question.options else ""
    if question.options and starts_options(text):
        # The letters start again at A: a sub-question's own options, or a row "A. A B. B" naming the
        # cells of a table already read. The question keeps its first options; these stay in the stem.
        question.part = "stem"
        join_line(question.stem, "\n" + text)
        return
    starts = option_markers(text, after=last)
    if not starts or starts[0].start() > 0:
        # A wrapped option: the text goes on from the last option (and may hold the next ones: OCR
        # loses a line's first letter, "√2/2 G D. 1G").
        end = starts[0].start() if starts else len(text)
        if question.options:
            head = text[:end].strip()
            question.options[-1]["text"] += head if not head.isascii() else " " + head
        text = text[end:]
        if not starts:
            return
        starts = option_markers(text, after=last)
    if not question.options:
        question.options_in_part = question.sub_seen
    question.part = "option"
    for match, following in zip(starts, [*starts[1:], None], strict=True):
        end = following.start() if following else len(text)
        question.options.append({"label": option_label(match), "text": text[match.end() : end].strip()})
