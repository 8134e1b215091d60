"""Direct answers compared with the reference answers: the verdict of the
difficulty filters' runs (inference.assist) and nothing else. Pure functions
on a question and a text; no model call and no writes."""

from __future__ import annotations

import re
import unicodedata

from annotation.models import Question
from inference import parsing
from inference.default_prompts import BLANK_SEPARATOR, FINAL_ANSWER_PREFIX
from k12vista.vocabulary import QuestionType


class UnreadableOutput(ValueError):
    pass


# --- the difficulty filters: is a direct answer correct? -----------------------------
#
# A deliberately simple comparison, good enough to *flag* easy questions for a
# person to look at, never to score a model (scoring runs use a judge model):
#
# * multiple choice: the option letter at the start of the final answer
#   ("B", "B．$2$", "(B)", "选B"); an answer naming the option's content instead of
#   its letter counts when it equals exactly one option's text after
#   normalisation.
# * fill-in-blank and free response: the final answer split into parts (at "；",
#   ";" or line breaks, sub-question numbers such as "（1）" removed) must have as
#   many parts as the reference, each equal after normalisation: NFKC (full-width
#   to ASCII), no spaces or $ delimiters, no \left \right \, \dfrac->\frac, no
#   trailing full stop, case folded; numbers compare as numbers (0.5 = 0.50).
#
# Limits: no symbolic or unit equivalence (1/2 vs 0.5, \frac{1}{2} vs 0.5, 50 cm
# vs 0.5 m all count as different), blanks must come in order, and a long
# free-response conclusion almost never matches word for word. Every one of
# these errs towards "not correct", which keeps a question rather than flagging
# it: the safe direction for a filter whose flags lead people to drop items.

_FINAL = re.compile(re.escape(FINAL_ANSWER_PREFIX.rstrip("：")) + r"\s*[:：]?")
_LETTER = re.compile(r"^[\s$(（\[【]*(?:答案[是为]?\s*[:：]?\s*)?(?:选\s*)?([A-D])(?![A-Za-z])")
_PART_SPLIT = re.compile(rf"[{BLANK_SEPARATOR};\n]+")
# Sub-question and blank numbers before a part: （1） (1) 1. 1、 第1空：, but not the 6 of "6.0".
_SUB_NUMBER = re.compile(
    r"^\s*(?:[(（]\s*\d+\s*[)）]|\d+\s*(?:[.．](?!\d)|[、:：)）])|第\s*\d+\s*(?:空|问|小问)\s*[:：]?)\s*"
)
_LATEX_NOISE = re.compile(r"\\left|\\right|\\[,;! ]|\\displaystyle")


def final_answer(text: str) -> str:
    """The text after the last "最终答案：", or the whole answer when there is none."""
    answer = parsing.answer_after_reasoning(text)
    found = list(_FINAL.finditer(answer))
    return answer[found[-1].end() :].strip() if found else answer


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", str(text)).strip()
    text = _LATEX_NOISE.sub("", text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = re.sub(r"[\s$]+", "", text).rstrip("。.")
    return text.casefold()


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _choice(question: Question, answer: str) -> str | None:
    if match := _LETTER.match(unicodedata.normalize("NFKC", answer)):
        return match.group(1).upper()
    by_text = [o.get("label", "") for o in question.options if _same(normalise(o.get("text", "")), normalise(answer))]
    return by_text[0].upper() if len(by_text) == 1 else None


def judge_answer(question: Question, text: str) -> dict:
    """The verdict of a direct answer against the reference answers (see above)."""
    answer = final_answer(text)
    if not answer:
        raise UnreadableOutput("empty answer")
    reference = [str(a) for a in question.answers]
    if question.qtype == QuestionType.MULTIPLE_CHOICE:
        letter = _choice(question, answer)
        if letter is None:
            raise UnreadableOutput(f"no option letter in the final answer {answer[:200]!r}")
        given = [letter]
        correct = len(reference) == 1 and letter == normalise(reference[0]).upper()
        method = "choice"
    else:
        given = [_SUB_NUMBER.sub("", part).strip() for part in _PART_SPLIT.split(answer)]
        given = [part for part in given if part]
        correct = len(given) == len(reference) > 0 and all(
            _same(normalise(g), normalise(r)) for g, r in zip(given, reference, strict=True)
        )
        method = "short_answer"
    return {"final_answer": answer, "model_answers": given, "reference": reference, "correct": correct,
            "method": method}  # fmt: skip
