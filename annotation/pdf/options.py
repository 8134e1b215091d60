"""Options and types of a question being segmented: option markers as printed or as OCR misreads them,
letters set alone under pictures or over table columns, choices numbered like sub-questions, and the type
of a question outside any typed section (annotation.pdf.segment and annotation.pdf.parts read the paper with these)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from annotation.pdf.notes import Note, note
from k12vista.vocabulary import QuestionType

if TYPE_CHECKING:
    from annotation.pdf.segment import ParsedQuestion

# Not after a Latin letter, so "AB." is no option; OCR runs options together ("A.-1B.0").
OPTION = re.compile(r"(?:(?<![A-Za-z])([A-H])\s*[.．、:：]|[(（]\s*([A-H])\s*[)）])\s*")
# "A、B 两地" names points; "A、A∩B=∅" is option A about the set A (a point list names another letter).
POINT_LIST = re.compile(r"^([A-H])\s*、\s*(?!\1)[A-H](?!\s*[.．、:：])")


def option_label(match: re.Match) -> str:
    return match.group(1) or match.group(2)


def starts_options(text: str) -> bool:
    """A stem line starting "A．" starts the options; "A、B 两地" is a stem naming two points."""
    match = OPTION.match(text)
    return match is not None and option_label(match) == "A" and not POINT_LIST.match(text)


def option_markers(text: str, *, after: str = "") -> list[re.Match]:
    """The option markers of a line whose letters go on in order after ``after``; "B" inside option A's
    text ("A．B 点的电势高") is text. A letter may be skipped (OCR lost it): gaps are filled at the end."""
    kept: list[re.Match] = []
    last = after
    for match in OPTION.finditer(text):
        label = option_label(match)
        if label > last and ord(label) - ord(last or "@") <= 2:
            kept.append(match)
            last = label
    return kept


# OCR reads a line's first option letter as a look-alike: "(4)" or "4．" for (A), Greek or Cyrillic A.
LOOKALIKE_A = re.compile(r"^(?:[(（]\s*[4ΑА]\s*[)）]|[4ΑА]\s*[.．、](?!\d))")
# A first letter whose dot was lost ("A 可以发生水解反应 B. 所有…"): the next letter's marker shows it.
BARE_A = re.compile(r"^A\s+(?=[^\sA-Za-z.．、:：])")


def as_options(text: str) -> str:
    """A line that starts an option row written or read imperfectly, as it was printed: ``A．…``."""
    fixed = LOOKALIKE_A.sub("(A)", text) if LOOKALIKE_A.match(text) else None
    if fixed is None and BARE_A.match(text):
        fixed = BARE_A.sub("A．", text)
    if fixed is not None and any(option_label(m) == "B" for m in OPTION.finditer(fixed)):
        return fixed
    return text


def force_a(text: str) -> str:
    """A line taken for option A: its misread first letter as printed."""
    return LOOKALIKE_A.sub("(A)", text) if LOOKALIKE_A.match(text) else BARE_A.sub("A．", text)


def starts_option_b(text: str) -> bool:
    match = OPTION.match(text)
    return match is not None and option_label(match) == "B"


ROW_LETTER = r"(?:[(（]\s*[A-H]\s*[)）]|[A-H](?:\s*[.．])?)"
LETTER_ROW = re.compile(rf"^{ROW_LETTER}(?:\s*{ROW_LETTER})*$")
CHOICE_STEM = re.compile(r"[(（]\s*[)）]\s*$|下列|的是[:：]?\s*$|哪[个些一]|正确|错误")


def letter_row(text: str, question: ParsedQuestion) -> list[str] | None:
    """Letters alone on a line that go on in order, under pictures or over table columns: "A B C D"."""
    text = text.strip()
    if not LETTER_ROW.match(text):
        return None
    letters = re.findall(r"[A-H]", text)
    last = question.options[-1]["label"] if question.options else ""
    # Consecutive, and following on from the options so far (one letter lost to OCR may be skipped).
    if any(ord(b) - ord(a) != 1 for a, b in zip(letters, letters[1:], strict=False)):
        return None
    if ord(letters[0]) - ord(last or "@") not in (1, 2):
        return None
    bracketed = "(" in text or "（" in text or "." in text or "．" in text
    if len(letters) < 2 and not (bracketed or last):
        return None
    # Only in a question that asks to choose: labels of a figure's points are no options.
    choice = question.qtype == QuestionType.MULTIPLE_CHOICE or (
        not question.qtype and bool(CHOICE_STEM.search(question.text))
    )
    return letters if choice or last else None


def fill_option_gaps(question: ParsedQuestion) -> list[Note]:
    """Options A, B, D: C was printed but not read (OCR lost its letter). It is kept, empty, and said."""
    if not question.options:
        return []
    labels = [o["label"] for o in question.options]
    wanted = [chr(c) for c in range(ord("A"), ord(max(labels)) + 1)]
    missing = [label for label in wanted if label not in labels]
    if not missing or len(labels) != len(set(labels)):
        return []
    by_label = {o["label"]: o for o in question.options}
    question.options = [by_label.get(label, {"label": label, "text": ""}) for label in wanted]
    return [note("option_unread", label=question.label, option=label) for label in missing]


def split_answer(answer: str, qtype: str) -> list[str]:
    """Sub-answers: the letter(s) of a choice, one per blank, one per sub-question."""
    answer = answer.strip()
    if not answer:
        return []
    if qtype == QuestionType.MULTIPLE_CHOICE:
        letters = re.match(r"^[A-H]+", answer.replace(" ", ""))
        return [letters.group() if letters else answer]
    flat = answer.replace("\n", " ")
    parts = re.split(r"\s*(?:[(（]\s*\d{1,2}\s*[)）]|[①②③④⑤⑥⑦⑧⑨⑩])\s*", flat)
    if len(parts) == 1 and qtype == QuestionType.FILL_IN_BLANK:
        parts = re.split(r"\s*[;；]\s*|\s{2,}", flat)
    return [p.strip(" ;；，,。．") for p in parts if p.strip(" ;；，,。．")]


NUMBERED_OPTION = re.compile(r"[(（]\s*([1-6])\s*[)）]\s*")


def numbered_options(question: ParsedQuestion) -> None:
    """A question of a choice section whose choices are numbered like sub-questions, (1)…(4) (older papers):
    they are its options, lettered A, B, C… in order; an answer given by number is given by letter."""
    if question.qtype != QuestionType.MULTIPLE_CHOICE or question.options or not question.sub_seen:
        return
    text = question.text
    markers = list(NUMBERED_OPTION.finditer(text))
    if not 3 <= len(markers) <= 6 or [int(m.group(1)) for m in markers] != list(range(1, len(markers) + 1)):
        return
    ends = [m.start() for m in markers[1:]] + [len(text)]
    question.options = [
        {"label": chr(ord("A") + i), "text": text[m.end() : end].strip().rstrip("；;。.，,").strip()}
        for i, (m, end) in enumerate(zip(markers, ends, strict=True))
    ]
    question.stem = [text[: markers[0].start()].rstrip()]
    question.sub_seen, question.numbered_choices = False, True


# "图4画有…的盒子中，哪几个是可能的？": the question asks which of a figure's drawings.
ASKS_OF_FIGURE = re.compile(r"图\s*\d{1,2}[^。？?]{0,40}?(?:哪几|哪些|哪个|哪一)")


def numbered_picture_options(questions: list[ParsedQuestion]) -> list[tuple[ParsedQuestion, Note]]:
    """A question of a choice section printed (1)…(4) that has no options of its own and asks which of a
    figure's drawings: its choices are the drawings, unlabelled, as many as each other question of the
    section with options has. They are kept lettered and empty (the figure shows them), and said, one note each."""
    said: list[tuple[ParsedQuestion, Note]] = []
    for question in questions:
        if question.qtype != QuestionType.MULTIPLE_CHOICE or question.options:
            continue
        if not ASKS_OF_FIGURE.search(question.text):
            continue
        others = [q for q in questions if q.section == question.section and q.options]
        counts = {q.option_count for q in others}
        if len(others) < 2 or not all(q.numbered_choices for q in others) or len(counts) != 1:
            continue
        labels = [chr(ord("A") + i) for i in range(counts.pop())]
        question.options = [{"label": label, "text": ""} for label in labels]
        question.numbered_choices = True
        said += [(question, note("option_unread", label=question.label, option=label)) for label in labels]
    return said


# OCR reads the bracket 〔 as "{" too: "{2,3)。".
NUMBERED_ANSWER = re.compile(r"\s*[\[［〔(（{｛]?\s*([1-6](?:\s*[,，、]?\s*[1-6])*)\s*[\]］〕)）}｝]?\s*[。.；;]?\s*")


def lettered_answer(answer: str) -> str:
    """The letter of an answer given by number, for choices printed (1)…(4): 〔4〕 is D."""
    numbered = NUMBERED_ANSWER.fullmatch(answer)
    if not numbered:
        return answer
    return "".join(chr(ord("A") + int(d) - 1) for d in re.findall(r"[1-6]", numbered.group(1)))


SCORED_PART = re.compile(r"^\s*[(（]\s*\d{1,2}\s*分\s*[)）]")


def own_choice(question: ParsedQuestion) -> bool:
    """Four options A-D of the question itself, not of a sub-question, with a stem that asks to choose. Not a
    scored part ("（5 分）…", a 选考 question's five-option first part): the question goes on after it."""
    labels = [o["label"] for o in question.options]
    return (
        labels == ["A", "B", "C", "D"]
        and not SCORED_PART.match(question.text)
        and not question.options_in_part
        and not question.sub_seen
        and bool(CHOICE_STEM.search(question.text))
    )


def guess_type(question: ParsedQuestion, *, options: bool = True) -> str:
    """Type of a question outside any recognised section."""
    if options and len(question.options) >= 2 and not question.options_in_part:
        return QuestionType.MULTIPLE_CHOICE
    blanks = re.search(r"_{3,}|＿{2,}", question.text)
    # 证明 asks only as an instruction (求证, 试证明, 证明：); "证明 DNA是遗传物质的实验是____" is a fill-in.
    if blanks and not re.search(r"求|计算|写出|说明|推导|求证|[试并请]证明|证明\s*[:：]", question.text):
        return QuestionType.FILL_IN_BLANK
    return QuestionType.FREE_RESPONSE
