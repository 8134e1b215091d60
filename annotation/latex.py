"""Finding formulas in question text and checking them with KaTeX itself.

The check runs the vendored KaTeX (the build the browser renders with) in a
long-lived Node.js process, so a formula passes here exactly when it renders
for annotators. Without Node the delimiters are still checked and the result
says that the formulas themselves were not.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from django.utils.translation import gettext

from k12vista.text import storable

CHECKER = Path(__file__).resolve().parent / "js" / "katex_check.js"

# Same delimiters as static/js/app.js, longest first: each opener's closer, and whether it is display math.
_DELIMITERS = {"$$": ("$$", True), "\\[": ("\\]", True), "\\(": ("\\)", False), "$": ("$", False)}
# An escaped dollar sign (text) first, then the openers in that order: the leftmost match is the
# next formula, found by the regex engine rather than by trying each opener at every $ and \.
_OPENER = re.compile(r"\\\$|\$\$|\\\[|\\\(|\$")


class Formula(NamedTuple):
    """A tuple, not a frozen dataclass: an import makes and hashes (to look up its verdict)
    fifteen of these a question, and a dataclass's are built and hashed in Python."""

    tex: str
    display: bool


@dataclass(frozen=True)
class LatexProblem:
    message: str
    tex: str = ""


def split_formulas(text: str) -> tuple[list[Formula], list[LatexProblem]]:
    """Formulas in reading order, and delimiters that never close."""
    formulas: list[Formula] = []
    problems: list[LatexProblem] = []
    i = 0
    while (found := _OPENER.search(text, i)) is not None:
        left = found.group()
        if left == "\\$":
            i = found.end()  # an escaped dollar sign is text
            continue
        right, display = _DELIMITERS[left]
        end = text.find(right, found.end())
        if end < 0:
            problems.append(
                LatexProblem(
                    gettext("%(left)s opened at character %(n)d is never closed")
                    % {"left": left, "n": found.start() + 1}
                )
            )
            return formulas, problems
        formulas.append(Formula(text[found.end() : end], display))
        i = end + len(right)
    return formulas, problems


class _KatexProcess:
    """One Node.js process per Python process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None

    def check(self, formulas: list[Formula]) -> list[str | None] | None:
        node = shutil.which("node")
        if node is None:
            return None
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = subprocess.Popen(
                    [node, str(CHECKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
                )
                atexit.register(self._proc.kill)
            stdin, stdout = self._proc.stdin, self._proc.stdout
            assert stdin is not None and stdout is not None  # started with both pipes
            line = json.dumps([[f.tex, f.display] for f in formulas], ensure_ascii=False)
            stdin.write(line + "\n")
            stdin.flush()
            answer = json.loads(stdout.readline())
        if isinstance(answer, dict):
            raise RuntimeError(f"KaTeX checker failed: {answer.get('error')}")
        return answer


_katex = _KatexProcess()


def latex_problems(text: str) -> tuple[list[LatexProblem], bool]:
    """Problems in the text's LaTeX, and whether KaTeX itself checked the formulas."""
    found, checked = latex_problems_in({"text": text})
    return found["text"], checked


def latex_problems_in(texts: dict[str, str]) -> tuple[dict[str, list[LatexProblem]], bool]:
    """Problems per named text, checked in one KaTeX round trip for them all."""
    found, checked = latex_problems_of_many([texts])
    return found[0], checked


def latex_problems_of_many(
    many: list[dict[str, str]],
) -> tuple[list[dict[str, list[LatexProblem]]], bool]:
    """:func:`latex_problems_in` for many questions' texts in one KaTeX round trip
    (a bulk import checks a batch of questions at once)."""
    found: list[dict[str, list[LatexProblem]]] = []
    formulas: list[tuple[int, str, Formula]] = []
    for index, texts in enumerate(many):
        found.append({})
        for where, text in texts.items():
            these, found[index][where] = split_formulas(text)
            formulas += [(index, where, f) for f in these]
    if not formulas:
        return found, True
    # Exam formulas repeat ($x$, $\\frac{1}{2}$): each distinct one goes to KaTeX once per process.
    unknown = list(dict.fromkeys(f for _index, _where, f in formulas if f not in _verdicts))
    if unknown:
        results = _katex.check(unknown)
        if results is None:
            return found, False
        if len(_verdicts) + len(unknown) > VERDICTS_KEPT:
            _verdicts.clear()
        _verdicts.update(zip(unknown, results, strict=True))
    for index, where, formula in formulas:
        error = _verdicts[formula]
        if error:
            found[index][where].append(LatexProblem(storable(error), formula.tex))
    return found, True


# KaTeX's verdict on formulas already checked by this process (its build never changes while it runs).
VERDICTS_KEPT = 100_000
_verdicts: dict[Formula, str | None] = {}


def restart_checker() -> None:
    """A fresh checker for a forked process: the parent's pipes are not this process's to use."""
    global _katex
    _katex = _KatexProcess()
    _verdicts.clear()


BLANK = re.compile(r"_{3,}|\\underline\{\s*(?:\\quad|\\qquad|\s|~)*\}|（\s*）|\(\s{2,}\)")


def count_blanks(text: str) -> int:
    """Blanks in a fill-in-the-blank question: ___, \\underline{\\quad}, or an empty （ ）."""
    return len(BLANK.findall(text))
