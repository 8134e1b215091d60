"""Answer sections: how a key's entries are cut and read (annotation.pdf.matching matches them back)."""

from __future__ import annotations

import re

from annotation.pdf.consistency import MAX_SKIPPED

MARKER = re.compile(r"【(答案|解析|详解|分析|解答|点评|点睛|考点|详析)】")
WORKED = re.compile(r"^(?:【解】|解\s*[:：])\s*")
CHOSEN = re.compile(r"故选\s*[:：]?\s*([A-H]+)")

SCOPED_ITEM = re.compile(r"(?:^|(?<=\s)|(?<=[\]】。;；]))[(（]\s*(\d{1,2})\s*[)）]|^(\d{1,2})\s*(?:[．、]|\.(?!\d))")

# "2." after a space or a full stop in the middle of a line, not a decimal ("0.75"): a next answer there.
LATER_DOT_ITEM = re.compile(r"(?<=[\s。;；])(\d{1,2})\s*[．.、](?!\d)")


def item_number(match: re.Match) -> int:
    return int(match.group(1) or match.group(2))


def later_dot_items(text: str, items: list[re.Match]) -> list[re.Match]:
    """A key on one line ("二、1. (4)。 2. (2)。 3. (4)。"): a later "n." starts an answer only where it goes on
    from the one before, so "0.75" or a step's number inside an answer does not."""
    kept = list(items)
    if not kept or kept[0].start() > 0:
        return kept
    for match in LATER_DOT_ITEM.finditer(text, kept[-1].end()):
        if item_number(match) == item_number(kept[-1]) + 1:
            kept.append(match)
    return kept


OCR_KEY = re.compile(r"^[\[［]?\s*[A-H4](?:\s*[;；,，、]?\s*[A-H4])*\s*[\]］]?$")
# 14．D, and 1．〔4〕 (a choice printed by number, older papers).
KEY_ITEM = re.compile(r"(?:^|(?<=\s))(\d{1,3})\s*[．.、]\s*(?=[A-H]|[〔\[［]\s*[1-6A-H])")


def answer_pieces(text: str) -> list[str]:
    """A key line "14．D 15．AD 16．CD" in pieces, one a number, when the numbers go up."""
    starts = list(KEY_ITEM.finditer(text))
    if len(starts) < 2 or starts[0].start() != 0:
        return [text]
    numbers = [int(m.group(1)) for m in starts]
    # Going up, one by one or with a number left out ("6.B 7.A 9.C": 8 is answered elsewhere).
    if any(not a < b <= a + 1 + MAX_SKIPPED for a, b in zip(numbers, numbers[1:], strict=False)):
        return [text]
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return [text[m.start() : end].strip() for m, end in zip(starts, ends, strict=True)]


def split_entry(text: str) -> tuple[str, str]:
    """(answer, solution) of an answer-section entry: 【答案】 and 【解析】 if marked, else all answer."""
    pieces = MARKER.split(text)
    answer, solution = pieces[0].strip(), []
    if worked := WORKED.match(answer):
        # "一、解：f(2)=3。" — a worked solution without 【】 markers, as the question would print it after 解.
        answer, solution = "", [answer[worked.end() :].strip()]
    for marker, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        if marker == "答案":
            answer = f"{answer} {piece.strip()}".strip()
        else:
            solution.append(piece.strip())
    solution_text = "\n".join(solution)
    if not answer:
        chosen = CHOSEN.search(solution_text)
        answer = chosen.group(1) if chosen else ""
    return answer, solution_text
