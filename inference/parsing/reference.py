"""Judge replies read the way the K12Vista reference code reads them (the
reference protocol; docs/formats.md compares it with the studio's reader).

Direct mode: the *first* ``<evaluation>...</evaluation>`` block, stripped, every
backslash doubled, read as a Python literal; it must be a list of exactly three
items whose third holds marks that ``int()`` turns into 0 or 1; the score is the
mean of the marks. The first two items (the reference and the student's
sub-answers) are kept whatever they are, and their lengths are not compared.

Step by step: full-width commas become commas, the text from the first ``[`` to
the last ``]``, backslashes doubled, read as a Python literal; a list (one more
level of nesting is unwrapped) of ``[step, label, explanation]`` whose labels are
the nine Chinese names exactly; the score is correct steps / steps.

The reference's ``eval`` is replaced by ``literal.evaluate``, which computes the
same value for literal text and refuses everything else. Its quirks are kept on
purpose, since they decide which replies count: an item whose second element is
the text "1" ends the reading as if all were well (the steps before it are kept,
the score still divides by every item). A reply that fails reads as
``ParseStatus.FAILED`` with the reason; the reference would return ('', 0) and
leave the item out of its averages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inference.parsing.literal import LiteralError, evaluate
from inference.parsing.reader import MAX_CHARS
from inference.parsing.results import ParseResult, ParseStatus
from k12vista.vocabulary import CORRECT, STEP_LABELS

# The nine label names the reference's step judge must answer with, exactly.
REFERENCE_LABELS: dict[str, str] = {label.chinese: label.code for label in STEP_LABELS}
CORRECT_NAME = next(name for name, code in REFERENCE_LABELS.items() if code == CORRECT)
EVALUATION_BLOCK = re.compile(r"<evaluation>(.*?)</evaluation>", re.DOTALL)
NOTE_STOPPED = "the reference's reader stopped at step {n}, whose label is the text '1', and counts the reply"
# The reference's reader, as a name recorded on every scoring run of this protocol.
READER_VERSION = "k12vista-reference.1"


def _failed(error: str) -> ParseResult:
    return ParseResult(ParseStatus.FAILED, error=error)


def _literal(snippet: str) -> Any:
    # The reference doubles every backslash before reading, so LaTeX such as \frac stays text.
    return evaluate(snippet.replace("\\", "\\\\"))


def _plain(value: Any) -> Any:
    """The value as JSON can hold it (a judgment's ``parsed``): tuples and sets become lists."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(item) for item in value), key=repr)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return repr(value)  # bytes, complex, Ellipsis


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _texts(value: Any) -> list[str]:
    return [_text(item) for item in (value if isinstance(value, list | tuple) else [value])]


def _check_text(text: Any) -> str | None:
    if not isinstance(text, str):
        return f"reply is {type(text).__name__}, not text"
    if len(text) > MAX_CHARS:
        return f"reply is {len(text)} characters, over the {MAX_CHARS} limit"
    return None


def read_direct_judgment(text: str | None, record: Mapping[str, Any] | None = None) -> ParseResult:
    """A direct-mode judge reply as the reference's ``directly_eval`` reads it. ``record`` is the
    question in the reference record format; like the reference, a record without
    ``format_answer.ground_truth`` fails the reply."""
    if record is not None:
        try:
            record["format_answer"]["ground_truth"]
        except (KeyError, TypeError, IndexError):
            return _failed("the record has no format_answer.ground_truth")
    problem = _check_text(text)
    if problem:
        return _failed(problem)
    assert isinstance(text, str)
    match = EVALUATION_BLOCK.search(text)
    if match is None:
        return _failed("no <evaluation>...</evaluation> block")
    try:
        value = _literal(match.group(1).strip())
    except LiteralError as exc:
        return _failed(f"the first <evaluation> block is not a literal: {exc}")
    if type(value) is not list:
        return _failed(f"the <evaluation> block holds a {type(value).__name__}, not a list")
    if len(value) != 3:
        return _failed(f"the <evaluation> list has {len(value)} items, not 3")
    marks: list[int] = []
    try:
        for item in value[2]:
            mark = int(item)
            if mark not in (0, 1):
                return _failed(f"mark {item!r} is not 0 or 1")
            marks.append(mark)
        score = sum(marks) / len(value[2])
    except Exception as exc:  # noqa: BLE001 (whatever int() or len() raise on a literal, the reply fails)
        return _failed(f"the marks cannot be read: {type(exc).__name__}: {exc}")
    parsed = {
        "reference_answers": _texts(value[0]),
        "model_answers": _texts(value[1]),
        "scores": marks,
        "score": score,
        "judged": _plain(value),
    }
    return ParseResult(ParseStatus.OK, value=parsed)


def _bracketed_literal(text: str | None) -> tuple[Any, ParseResult | None]:
    """What both list readers of the reference take: the literal from the first ``[`` to the
    last ``]``, full-width commas normalised first; (value, None) or (None, the failure)."""
    problem = _check_text(text)
    if problem:
        return None, _failed(problem)
    assert isinstance(text, str)
    # One character for another: the positions of [ and ] do not move.
    text = text.replace("，", ",")
    start, end = text.find("["), text.rfind("]")
    if start == -1 or end == -1:
        return None, _failed("no [ ... ] in the reply")
    try:
        return _literal(text[start : end + 1]), None
    except LiteralError as exc:
        return None, _failed(f"the text from the first [ to the last ] is not a literal: {exc}")


def read_step_judgment(text: str | None) -> ParseResult:
    """A step-by-step judge reply as the reference's ``step_by_step_eval`` reads it: steps
    with label codes (``value["steps"]``), the Chinese names (``value["labels"]``) and
    the reference's score (``value["score"]``)."""
    value, failure = _bracketed_literal(text)
    if failure:
        return failure
    if type(value) is not list:
        return _failed(f"the reply holds a {type(value).__name__}, not a list")
    try:
        if type(value[0][0]) is list:  # [[[step, label, why], ...]]: one level more
            value = value[0]
    except Exception as exc:  # noqa: BLE001 (an empty list, a number, a dict without 0: the reply fails)
        return _failed(f"the list's first item cannot be read: {type(exc).__name__}: {exc}")
    steps: list[dict[str, str]] = []
    notes: list[str] = []
    correct = 0
    for n, item in enumerate(value, 1):
        if type(item) is list and len(item) == 3 and type(item[1]) is str and item[1] in REFERENCE_LABELS:
            steps.append({"step": _text(item[0]), "label": REFERENCE_LABELS[item[1]], "reason": _text(item[2])})
            correct += item[1] == CORRECT_NAME
            continue
        try:
            offending = item[1]
        except Exception as exc:  # noqa: BLE001
            return _failed(f"step {n} is not [step, label, explanation]: {type(exc).__name__}: {exc}")
        if offending != "1":
            if type(item) is not list or len(item) != 3:
                return _failed(f"step {n} is not a list of [step, label, explanation]")
            return _failed(f"step {n}: {offending!r} is not one of the nine label names")
        notes.append(NOTE_STOPPED.format(n=n))
        break
    parsed = {
        "steps": steps,
        "labels": [next(k for k, c in REFERENCE_LABELS.items() if c == s["label"]) for s in steps],
        "score": correct / len(value),
        "judged": _plain(value),
    }
    return ParseResult(ParseStatus.OK, value=parsed, notes=notes)


def read_given_steps(text: str | None, n_steps: int) -> ParseResult:
    """A PEBench judge reply as the reference's ``step_check`` reads it (with the ``self`` its
    published code lacks): first ``[`` to last ``]``, full-width commas normalised, one nesting
    level unwrapped; as many items as the ``n_steps`` given, each ``[step, label, explanation]``
    with a text label. Labels are not checked against the nine names: a label outside them is
    kept and counts as wrong in the metric. ``value["labels"]`` holds the labels as given."""
    value, failure = _bracketed_literal(text)
    if failure:
        return failure
    try:
        if type(value[0][0]) is list:
            value = value[0]
        # The reference's flag: "1" while all is well, 0 for a wrong count, else the offending label.
        flag: Any = "1" if len(value) == n_steps else 0
        for item in value:
            if type(item) is not list or len(item) != 3 or type(item[1]) is not str:
                flag = item[1]
                break
    except Exception as exc:  # noqa: BLE001 (whatever indexing a literal raises, the reply fails)
        return _failed(f"the reply is not a list of [step, label, explanation]: {type(exc).__name__}: {exc}")
    if flag != "1":
        if flag == 0:
            return _failed(f"the reply has {len(value)} steps for the {n_steps} given")
        return _failed(f"a step is not [step, label, explanation] (its label: {flag!r})")
    return ParseResult(ParseStatus.OK, value={"labels": [_second(item) for item in value], "judged": _plain(value)})


def _second(item: Any) -> str:
    """An item's label as the reference's metric reads it (``item[1]``), "" where it has none."""
    try:
        label = item[1]
    except Exception:  # noqa: BLE001 (an item after the reference's reader stopped may be anything)
        return ""
    return label if isinstance(label, str) else ""
