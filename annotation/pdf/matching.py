"""After a paper is read: a second print of it merged into the first, numbers that restart per section
labelled with their section, and the answer section's entries matched back to their questions
(annotation.pdf.segment reads the paper, annotation.pdf.answers cuts and reads the entries)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from annotation.pdf.answers import CHOSEN, OCR_KEY, split_entry
from annotation.pdf.notes import Note, note
from annotation.pdf.options import lettered_answer
from k12vista.vocabulary import QuestionType

if TYPE_CHECKING:
    from annotation.pdf.segment import AnswerEntry, ParsedQuestion


def opening(text: str) -> str:
    """The first characters of a text without spaces and math marks: two copies of one question agree on it."""
    return re.sub(r"[\s$^_{}]", "", text)[:12]


def merge_copies(
    questions: list[ParsedQuestion], answers_key: tuple | None
) -> tuple[list[ParsedQuestion], tuple | None]:
    """A paper printed twice, the second time with 【答案】/【解析】: the copy's solution goes to the first. Returns
    the questions kept and where the answer section starts (a copy's first line, if before it)."""
    kept: list[ParsedQuestion] = []
    for question in questions:
        first = next((q for q in kept if q.number == question.number and opening(q.text) == opening(question.text)
                      and len(opening(q.text)) >= 6), None)  # fmt: skip
        if first is None:
            kept.append(question)
            continue
        first.answer = first.answer or question.answer
        first.solution = first.solution or question.solution
        if len(first.options) < 2 <= len(question.options):
            first.options = question.options
        if question.lines and (answers_key is None or question.lines[0].key < answers_key):
            answers_key = question.lines[0].key  # figures of the copy belong to no question
    numbers = [q.number for q in kept]
    if len(kept) < len(questions) and len(numbers) == len(set(numbers)):
        kept.sort(key=lambda q: q.number)  # a question only the copy has (its first print is an image)
    return kept, answers_key


def scope_numbers(questions: list[ParsedQuestion]) -> None:
    """Numbers that restart per section (一、1-8, 二、1-8) are labelled with their section: 二.3."""
    numbers = [q.number for q in questions]
    if len(numbers) == len(set(numbers)):
        for question in questions:
            question.scope = ""
        return
    for question in questions:
        question.scope = question.scope or "?"


def match_answers(
    questions: list[ParsedQuestion], entries: list[AnswerEntry]
) -> list[tuple[Note, list[ParsedQuestion]]]:
    """Answer-section entries go to the question with the same number, in order; what matched no question is
    returned, a note with the questions next to it."""
    said: list[tuple[Note, list[ParsedQuestion]]] = []
    open_questions: dict[int, list[ParsedQuestion]] = {}
    for question in questions:
        open_questions.setdefault(question.number, []).append(question)
    used: dict[int, int] = {}
    passes: dict[int, int] = {}
    for entry in entries:
        if entry.scope:
            scoped = [q for q in questions if (q.name == entry.scope and entry.number == 0)
                      or (q.scope == entry.scope and q.number == entry.number and not q.name)]  # fmt: skip
            if scoped:
                answer, solution = split_entry("".join(entry.text))
                scoped[0].answer = scoped[0].answer or answer
                scoped[0].solution = f"{scoped[0].solution}\n{solution}".strip() if solution else scoped[0].solution
                continue
            section = [q for q in questions if q.scope == entry.scope]
            if section:
                # 一、1. where section 一 has no question 1 read: no other section's question 1.
                said.append((note("answer_unmatched", number=entry.number), [section[0]]))
                continue
        candidates = open_questions.get(entry.number)
        if not candidates:
            numbers = sorted(open_questions)
            below = [n for n in numbers if n < entry.number]
            above = [n for n in numbers if n > entry.number]
            near = [open_questions[n][0] for n in below[-1:] + above[:1]]
            said.append((note("answer_unmatched", number=entry.number), near))
            continue
        # Numbers restarting per section: the n-th entry numbered 3 goes to the n-th question 3; a
        # second pass (a key, then worked solutions) goes to the same questions again.
        seen = used.get(entry.number, 0)
        if seen >= len(candidates):
            passes[entry.number] = passes.get(entry.number, 0) + 1
            seen = 0
        used[entry.number] = seen + 1
        question = candidates[seen]
        answer, solution = split_entry("".join(entry.text))
        question.answer = question.answer or answer
        if solution and solution not in question.solution:
            question.solution = f"{question.solution}\n{solution}".strip()
    for question in questions:
        if not question.answer:
            chosen = CHOSEN.search(question.solution)
            question.answer = chosen.group(1) if chosen else ""
        if question.numbered_choices:
            question.answer = lettered_answer(question.answer)
        elif question.qtype == QuestionType.MULTIPLE_CHOICE and OCR_KEY.match(question.answer):
            question.answer = question.answer.replace("4", "A")  # "[4; D]": OCR read the letter A as 4
    return said
