"""Structured output from judge models: the JSON schemas we ask for and a
tolerant parser for what actually comes back.

The public reference code reads judge output with ``eval`` and silently drops
what it cannot read (PIPELINE.md, "Where the public reference code falls
short"). Here nothing is ever evaluated, and every response ends as a
``ParseResult``: ``ok`` (strict JSON that matches the schema), ``repaired``
(readable after documented repairs, each listed in ``notes``) or ``failed``
(with the reason). Callers keep failed results in their denominators.

Reading order, most explicit first:

1. Where the answer is: the last ``<evaluation>`` block (the reference
   prompts' wrapper), else the last fenced code block, else the whole text
   after any ``</think>``. Inside it, bracketed regions ``[...]``/``{...}`` are
   found by a linear scanner that respects strings; the longest one is read,
   since reasoning text only quotes small fragments. A longer region that is
   still open at the end of the text means the response was cut off.
2. Strict ``json.loads`` of that region, then the hand-written validation of
   the kind (the schemas in ``SCHEMAS`` say the same thing to the model).
3. Otherwise ``_Reader``, a small recursive-descent reader for JSON-or-Python
   *literals* (single quotes, ``True``/``None``, tuples, trailing commas,
   full-width punctuation between items). It builds lists, dicts, strings and
   numbers and nothing else: any bare name such as ``__import__`` is a syntax
   error, so untrusted text can never run. Its depth is capped, so nested junk
   cannot exhaust the stack.

Pure Python on purpose: it runs in workers and tests without Django models.
"""

from __future__ import annotations

import copy
import enum
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from k12vista.vocabulary import CORRECT, LABEL_CODES, label_from_name

# ---------------------------------------------------------------------------
# Schemas

_STRINGS = {"type": "array", "items": {"type": "string"}}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    # OpenAI's strict mode needs every property required and no extras.
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


SCHEMAS: dict[str, dict[str, Any]] = {
    "direct_judgment": _object(
        {
            "reference_answers": {**_STRINGS, "minItems": 1},
            "model_answers": {**_STRINGS, "minItems": 1},
            "scores": {"type": "array", "minItems": 1, "items": {"type": "integer", "enum": [0, 1]}},
        }
    ),
    "step_judgment": _object(
        {
            "steps": {
                "type": "array",
                "minItems": 1,
                "items": _object(
                    {
                        "step": {"type": "string"},
                        "label": {"type": "string", "enum": list(LABEL_CODES)},
                        "reason": {"type": "string"},
                    }
                ),
            }
        }
    ),
    "step_split": _object({"steps": {**_STRINGS, "minItems": 1}}),
    "restructured_solution": _object({"steps": {**_STRINGS, "minItems": 1}}),
    "structure_check": _object(
        {
            "ok": {"type": "boolean"},
            "problems": {
                "type": "array",
                "items": _object({"code": {"type": "string"}, "message": {"type": "string"}}),
            },
        }
    ),
}
KINDS = tuple(SCHEMAS)


def response_format(kind: str) -> dict[str, Any]:
    """The ``response_format`` argument for vLLM / OpenAI structured output."""
    if kind not in SCHEMAS:
        raise ValueError(f"unknown output kind {kind!r} (expected one of {', '.join(KINDS)})")
    # A copy: callers may tweak their request without changing our schema.
    schema = copy.deepcopy(SCHEMAS[kind])
    return {"type": "json_schema", "json_schema": {"name": kind, "schema": schema, "strict": True}}


# ---------------------------------------------------------------------------
# Results


class ParseStatus(enum.StrEnum):
    OK = "ok"
    REPAIRED = "repaired"
    FAILED = "failed"


@dataclass(frozen=True)
class ParseResult:
    """``value`` is the normalised data (labels as codes, scores as 0/1) or None
    when failed; ``notes`` lists every repair, then facts for the caller."""

    status: ParseStatus
    value: Any = None
    error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.status != ParseStatus.FAILED


class _Unreadable(ValueError):
    """No structure could be read from the text."""

    def __init__(self, message: str, *, at_end: bool = False) -> None:
        super().__init__(message)
        # True when the text ran out mid-value: the mark of a cut-off response.
        self.at_end = at_end


class _Invalid(ValueError):
    """A structure was read but does not say what the kind requires."""


@dataclass
class _Notes:
    # Repairs change the status to "repaired"; warnings (an error label with no
    # reason, say) are facts for the caller and leave the status alone.
    repairs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def repair(self, note: str) -> None:
        if note not in self.repairs:
            self.repairs.append(note)


# ---------------------------------------------------------------------------
# Strings: shared by the scanner and the reader, so both agree on where a
# string ends.

# Recorded on every scoring run; raise it whenever a change alters what some
# output parses to, so that runs read by different parsers say so.
PARSER_VERSION = "1"
MAX_CHARS = 500_000
MAX_DEPTH = 20
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’"}
_STRING_STOP = {close: re.compile(r"[\\" + re.escape(close) + "]") for close in _QUOTES.values()}
# After a real closing quote comes structure: a separator, a colon or a closer.
_AFTER_STRING = set(",:]})，：；、）】］｝")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")

NOTE_QUOTES = "read single or curly quotes as string delimiters"
NOTE_INNER_QUOTE = "kept an unescaped quote inside a string as text"
NOTE_LATEX = r"kept LaTeX backslashes (\frac, \sqrt, ...) as text"
NOTE_NEWLINE = "kept a raw line break inside a string"


def _escape(text: str, i: int) -> tuple[str, int, bool]:
    """Decodes the escape at ``text[i] == '\\'``; returns (text, next index, latex).

    Judges write LaTeX without doubling backslashes. ``\\frac`` would be a form
    feed and ``\\sqrt`` an error in JSON; a backslash is kept as text when what
    follows is not an escape, or is a one-letter escape followed by more
    lower-case letters (``\\neq``, ``\\times``, ``\\beta``). The cost: a line
    break followed directly by a lower-case ASCII letter reads as ``\\n``.
    """
    nxt = text[i + 1 : i + 2]
    if nxt and nxt in "\"'\\/":
        return nxt, i + 2, False
    if nxt in _SIMPLE_ESCAPES:
        after = text[i + 2 : i + 3]
        if after.isascii() and after.islower():
            return "\\", i + 1, True
        return _SIMPLE_ESCAPES[nxt], i + 2, False
    if nxt == "u" and _HEX4.fullmatch(text, i + 2, i + 6):
        return chr(int(text[i + 2 : i + 6], 16)), i + 6, False
    return "\\", i + 1, True


def _closes_here(text: str, j: int) -> bool:
    while j < len(text) and text[j].isspace():
        j += 1
    return j == len(text) or text[j] in _AFTER_STRING


def _read_string(text: str, start: int) -> tuple[str, int, set[str]]:
    """Reads the string opening at ``start``; returns (value, end, notes)."""
    close = _QUOTES[text[start]]
    stop = _STRING_STOP[close]
    notes = set() if text[start] == '"' else {NOTE_QUOTES}
    parts: list[str] = []
    i = start + 1
    while match := stop.search(text, i):
        parts.append(text[i : match.start()])
        i = match.start()
        if text[i] == "\\":
            decoded, i, latex = _escape(text, i)
            parts.append(decoded)
            if latex:
                notes.add(NOTE_LATEX)
        elif close in "\"'" and not _closes_here(text, i + 1):
            # Chinese judges often write "把"瓣膜"写成了…" without escaping.
            parts.append(close)
            notes.add(NOTE_INNER_QUOTE)
            i += 1
        else:
            value = "".join(parts)
            if "\n" in value:
                notes.add(NOTE_NEWLINE)
            return value, i + 1, notes
    raise _Unreadable(f"a string opened at character {start} is never closed", at_end=True)


# ---------------------------------------------------------------------------
# Finding bracketed regions


_TOP_OPENER = re.compile(r"[\[{［｛]")
_INTERESTING = re.compile(r"[\[\]{}()（）【】［］｛｝\"'“‘]")
_OPENERS = set("[{(（【［｛")
_CLOSERS = set("]})）】］｝")
_LITERAL_START = re.compile(r"\s*(?:[\[{(（【［｛\"'“‘\]\-\d]|true|false|null|True|False|None)")
_KEY_START = re.compile(r"\s*[\"'“‘}]")
_RESCANS = 8  # an unclosed region is retried from the next opener at most this often


@dataclass(frozen=True)
class _Region:
    start: int
    end: int  # exclusive; for an unclosed region, the end of the text
    depth: int
    closed: bool

    @property
    def size(self) -> int:
        return self.end - self.start


def _looks_like_data(text: str, i: int) -> bool:
    # "[注意…]" or "{1}" in reasoning prose is not an answer; skip them cheaply.
    pattern = _KEY_START if text[i] in "{｛" else _LITERAL_START
    return pattern.match(text, i + 1) is not None


def _region_at(text: str, start: int) -> _Region:
    depth = max_depth = 0
    i = start
    while match := _INTERESTING.search(text, i):
        i = match.start()
        char = text[i]
        if char in _QUOTES:
            try:
                _, i, _ = _read_string(text, i)
            except _Unreadable:
                break
            continue
        if char in _OPENERS:
            depth += 1
            max_depth = max(max_depth, depth)
        elif char in _CLOSERS:
            depth -= 1
            if depth == 0:
                return _Region(start, i + 1, max_depth, closed=True)
        i += 1
    return _Region(start, len(text), max_depth, closed=False)


def _regions(text: str) -> list[_Region]:
    """Top-level data-looking regions, closed and unclosed, in text order."""
    found: list[_Region] = []
    rescans = 0
    i = 0
    while (match := _TOP_OPENER.search(text, i)) and rescans <= _RESCANS:
        i = match.start()
        if not _looks_like_data(text, i):
            i += 1
            continue
        region = _region_at(text, i)
        found.append(region)
        if region.closed:
            i = region.end
        else:
            # A stray apostrophe can leave a region open; look further in.
            rescans += 1
            i += 1
    return found


# ---------------------------------------------------------------------------
# The literal reader


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JSON_WORDS = {"true": True, "false": False, "null": None}
_PYTHON_WORDS = {"True": True, "False": False, "None": None}
_PAIRS = {"[": "]", "(": ")", "（": "）", "【": "】", "［": "］", "{": "}", "｛": "｝"}
_SEPARATORS = set(",，；、")
_COLONS = set(":：")

NOTE_FULLWIDTH = "read full-width punctuation between items (，：；【】（）) as ASCII"
NOTE_TUPLE = "read a tuple as a list"
NOTE_TRAILING = "ignored a trailing comma"
NOTE_PYTHON = "read Python literals True/False/None"


class _Reader:
    """Reads one JSON-or-Python literal; never evaluates anything.

    Only brackets, strings, numbers and the six literal words are accepted,
    so ``__import__('os')`` is a syntax error, not a call. Recursion is capped
    at ``MAX_DEPTH``, well below Python's limit.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.notes: set[str] = set()

    def read(self) -> Any:
        value = self._value(1)
        self._skip_space()
        if self.pos != len(self.text):
            self._fail("unexpected text after the value")
        return value

    def _fail(self, message: str) -> NoReturn:
        raise _Unreadable(f"{message} at character {self.pos}", at_end=self.pos >= len(self.text))

    def _skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _peek(self) -> str:
        self._skip_space()
        return self.text[self.pos : self.pos + 1]

    def _value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self._fail(f"nested more than {MAX_DEPTH} levels deep")
        char = self._peek()
        if char in ("{", "｛"):
            return self._mapping(depth)
        if char and char in _PAIRS:
            return self._sequence(depth)
        if char and char in _QUOTES:
            value, self.pos, notes = _read_string(self.text, self.pos)
            self.notes |= notes
            return value
        if number := _NUMBER.match(self.text, self.pos):
            self.pos = number.end()
            literal = number.group()
            return float(literal) if any(c in literal for c in ".eE") else int(literal)
        if name := _NAME.match(self.text, self.pos):
            return self._word(name.group())
        self._fail(f"unexpected {char!r}" if char else "unexpected end of text")

    def _word(self, word: str) -> Any:
        if word in _JSON_WORDS:
            self.pos += len(word)
            return _JSON_WORDS[word]
        if word in _PYTHON_WORDS:
            self.notes.add(NOTE_PYTHON)
            self.pos += len(word)
            return _PYTHON_WORDS[word]
        self._fail(f"unexpected name {word!r} (only literals are read; nothing is evaluated)")

    def _opening(self) -> str:
        opener = self.text[self.pos]
        if opener in "（【［｛":
            self.notes.add(NOTE_FULLWIDTH)
        elif opener == "(":
            self.notes.add(NOTE_TUPLE)
        self.pos += 1
        return _PAIRS[opener]

    def _after_item(self, closer: str) -> bool:
        """Consumes a separator; True when the container has ended."""
        char = self._peek()
        if char == closer:
            self.pos += 1
            return True
        if char not in _SEPARATORS:
            self._fail(f"expected ',' or {closer!r}")
        if char != ",":
            self.notes.add(NOTE_FULLWIDTH)
        self.pos += 1
        if self._peek() == closer:
            self.notes.add(NOTE_TRAILING)
            self.pos += 1
            return True
        return False

    def _sequence(self, depth: int) -> list[Any]:
        closer = self._opening()
        items: list[Any] = []
        if self._peek() == closer:
            self.pos += 1
            return items
        while True:
            items.append(self._value(depth + 1))
            if self._after_item(closer):
                return items

    def _key(self) -> str:
        key, self.pos, notes = _read_string(self.text, self.pos)
        self.notes |= notes
        return key

    def _mapping(self, depth: int) -> dict[str, Any]:
        closer = self._opening()
        items: dict[str, Any] = {}
        if self._peek() == closer:
            self.pos += 1
            return items
        while True:
            if self._peek() not in _QUOTES:
                self._fail("expected a quoted key")
            if (key := self._key()) in items:
                self._fail(f"key {key!r} appears twice")
            colon = self._peek()
            if colon not in _COLONS:
                self._fail("expected ':'")
            if colon != ":":
                self.notes.add(NOTE_FULLWIDTH)
            self.pos += 1
            items[key] = self._value(depth + 1)
            if self._after_item(closer):
                return items


# ---------------------------------------------------------------------------
# From text to a structure

_THINK_END = "</think>"


def answer_after_reasoning(text: str) -> str:
    """A reasoning model's answer: its drafts come before the last </think>, the answer after it."""
    return text.rsplit(_THINK_END, 1)[-1].strip()


_EVALUATION = re.compile(r"<evaluation>(.*?)(?:</evaluation>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([\w-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _snippets(text: str) -> Iterator[tuple[str, str]]:
    """(where, text) to look in for the answer, most explicit first."""
    text = answer_after_reasoning(text)
    # The last block: a judge that echoes the prompt's example does so first.
    if blocks := _EVALUATION.findall(text):
        yield "the <evaluation> block", blocks[-1]
    if fences := _FENCE.findall(text):
        json_fences = [body for lang, body in fences if lang.lower() == "json"]
        yield "the ``` block", (json_fences or [body for _, body in fences])[-1]
    yield "the response", text


def _latex_damaged(data: Any) -> bool:
    r"""Whether strict JSON turned LaTeX into control characters (\frac -> form feed)."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\b" in item or "\f" in item or re.search(r"[\t\r][a-z]", item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of repeated keys; that would drop the first silently.
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"key {key!r} appears twice")
        found[key] = value
    return found


def _read_region(text: str) -> tuple[Any, set[str], bool]:
    """(data, reader notes, strict) for one closed region."""
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):
        pass
    else:
        if not _latex_damaged(data):
            return data, set(), True
    reader = _Reader(text)
    return reader.read(), reader.notes, False


def _check_not_cut_off(text: str, unclosed: list[_Region], biggest: int) -> list[_Unreadable]:
    """Raises if an unclosed region bigger than every closed one is a cut-off answer.

    Reading a closed fragment of a cut-off answer (one step object, say) would
    give a misleading error, or worse a partial judgment. An unclosed region is
    cut off when it reads fine up to the end of the text; one that breaks
    earlier ("区间 [1, 2 上…") is prose, and its error is returned.
    """
    errors = []
    for region in sorted(unclosed, key=lambda r: r.size, reverse=True):
        if region.size <= biggest:
            break
        try:
            _Reader(text[region.start :]).read()
        except _Unreadable as error:
            if error.at_end:
                raise _Unreadable(
                    f"cut off: {text[region.start]!r} opened at character {region.start} "
                    "is never closed (max_tokens reached?)"
                ) from None
            errors.append(error)
    return errors


def _read_snippet(text: str) -> tuple[Any, set[str], bool]:
    regions = _regions(text)
    closed = sorted((r for r in regions if r.closed), key=lambda r: r.size, reverse=True)
    unclosed = [r for r in regions if not r.closed]
    prose_errors = _check_not_cut_off(text, unclosed, closed[0].size if closed else 0)
    errors = []
    for region in closed:
        if region.depth > MAX_DEPTH:
            errors.append(_Unreadable(f"nested more than {MAX_DEPTH} levels deep at character {region.start}"))
            continue
        try:
            return _read_region(text[region.start : region.end])
        except _Unreadable as error:
            errors.append(error)
    raise (errors + prose_errors + [_Unreadable("no JSON object or list found")])[0]


# ---------------------------------------------------------------------------
# Validation and normalisation, one function per kind


def _fields(data: Any, keys: tuple[str, ...], what: str, notes: _Notes) -> list[Any]:
    if not isinstance(data, dict):
        raise _Invalid(f"{what} must be an object with {', '.join(keys)}; got {type(data).__name__}")
    missing = [key for key in keys if key not in data]
    if missing:
        raise _Invalid(f"{what} is missing {', '.join(repr(key) for key in missing)}")
    if extra := sorted(set(data) - set(keys)):
        notes.repair(f"ignored unexpected keys: {', '.join(extra)}")
    return [data[key] for key in keys]


def _as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(f"{what} must be a list; got {type(value).__name__}")
    return value


def _text(value: Any, what: str, notes: _Notes) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        notes.repair("read numbers as text")
        return json.dumps(value)
    raise _Invalid(f"{what} must be text; got {value!r}")


_SCORE_WORDS = {"正确": 1, "对": 1, "true": 1, "1": 1, "错误": 0, "错": 0, "false": 0, "0": 0}


def _score(value: Any, what: str, notes: _Notes) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return value
    if isinstance(value, bool) or (isinstance(value, float) and value in (0.0, 1.0)):
        notes.repair("read scores given as true/false or 0.0/1.0 as 0/1")
        return int(value)
    if isinstance(value, str) and value.strip().casefold() in _SCORE_WORDS:
        notes.repair("read scores given as text (正确/错误, true/false, '1'/'0') as 0/1")
        return _SCORE_WORDS[value.strip().casefold()]
    raise _Invalid(f"{what} is {value!r}; expected 0 or 1 (or 正确/错误, true/false)")


def _same_lengths(named: dict[str, list[Any]]) -> None:
    # Never truncate to the shortest list: a mismatch is the judge's error.
    if len({len(items) for items in named.values()}) > 1:
        sizes = ", ".join(f"{name} has {len(items)}" for name, items in named.items())
        raise _Invalid(f"list lengths differ: {sizes}")


def _direct_judgment(data: Any, notes: _Notes) -> dict[str, list[Any]]:
    keys = ("reference_answers", "model_answers", "scores")
    if isinstance(data, list) and len(data) == 3 and all(isinstance(item, list) for item in data):
        notes.repair("read the reference format: three lists (reference answers, model answers, scores)")
        columns = data
    elif isinstance(data, dict):
        columns = [
            _as_list(value, key) for key, value in zip(keys, _fields(data, keys, "the judgment", notes), strict=True)
        ]
    else:
        raise _Invalid("expected an object with reference_answers, model_answers and scores, or three lists")
    _same_lengths(dict(zip(keys, columns, strict=True)))
    if not columns[0]:
        raise _Invalid("the judgment lists no sub-answers")
    references, answers, scores = columns
    return {
        "reference_answers": [_text(v, f"reference answer {n}", notes) for n, v in enumerate(references, 1)],
        "model_answers": [_text(v, f"model answer {n}", notes) for n, v in enumerate(answers, 1)],
        "scores": [_score(v, f"score {n}", notes) for n, v in enumerate(scores, 1)],
    }


_LABEL_TRIM = " \t\r\n【】[]()（）<>《》「」『』\"'“”‘’`*#。.!！"
_LABEL_SPLIT = re.compile(r"[:：/|｜、,，;；()（）【】\[\]<>《》「」=—–-]+")


def label_code(raw: Any) -> str:
    """The code of a step label written by a judge, or ValueError naming it.

    Accepts codes in any case, English and Chinese names (``label_from_name``)
    and decorations such as ``【CE】`` or ``CE：运算处理错误``. Decorated text
    is accepted only when every part names the same label, so "步骤错误：运算
    处理错误" is refused rather than guessed.
    """
    if not isinstance(raw, str):
        raise ValueError(f"unknown step label {raw!r}")
    for candidate in (raw, raw.strip(_LABEL_TRIM)):
        try:
            return label_from_name(candidate).code
        except ValueError:
            pass
    parts = [part.strip(_LABEL_TRIM) for part in _LABEL_SPLIT.split(raw)]
    codes = set()
    for part in filter(None, parts):
        try:
            codes.add(label_from_name(part).code)
        except ValueError:
            raise ValueError(f"unknown step label {raw!r}") from None
    if len(codes) != 1:
        raise ValueError(f"unknown step label {raw!r}")
    return codes.pop()


def _is_label(value: Any) -> bool:
    try:
        label_code(value)
    except ValueError:
        return False
    return True


def _rows_from_lists(data: list[Any], notes: _Notes) -> list[Any]:
    """Rows from the reference formats: [step, label, reason] triples or three columns."""
    if len(data) == 1 and isinstance(data[0], list) and data[0] and all(isinstance(x, list) for x in data[0]):
        notes.repair("unwrapped an extra list level")
        data = data[0]
    three_lists = False
    if len(data) == 3 and all(isinstance(item, list) for item in data):
        # Three triples and three columns look alike: where the labels are decides.
        as_rows = sum(len(row) > 1 and _is_label(row[1]) for row in data)
        as_columns = sum(_is_label(label) for label in data[1])
        rows_possible = all(len(row) == 3 for row in data)
        three_lists = as_columns > as_rows or (as_columns == as_rows and not rows_possible)
    if not three_lists:
        if all(isinstance(row, dict) for row in data):
            notes.repair("read a bare list of step objects")
        else:
            notes.repair("read the reference format: [step, label, reason] lists")
        return data
    notes.repair("read the reference format: three lists (steps, labels, reasons)")
    _same_lengths(dict(zip(("steps", "labels", "reasons"), data, strict=True)))
    return [list(row) for row in zip(*data, strict=True)]


def _step_row(item: Any, number: int, notes: _Notes) -> list[Any]:
    if isinstance(item, dict):
        return _fields(item, ("step", "label", "reason"), f"step {number}", notes)
    if isinstance(item, list) and len(item) == 3:
        return item
    if isinstance(item, list):
        raise _Invalid(f"step {number} has {len(item)} fields; expected 3 (step, label, reason)")
    raise _Invalid(f"step {number} must be an object or a [step, label, reason] list; got {item!r}")


def _step(row: list[Any], number: int, notes: _Notes) -> dict[str, str]:
    text, raw_label, reason = row
    text = _text(text, f"the text of step {number}", notes)
    if not text.strip():
        raise _Invalid(f"step {number} has no text")
    try:
        code = label_code(raw_label)
    except ValueError as error:
        raise _Invalid(f"step {number}: {error}") from None
    if raw_label != code:
        notes.repair("read step labels given by name, in lower case or decorated")
    if reason is None:
        notes.repair("read a null reason as empty")
        reason = ""
    reason = _text(reason, f"the reason of step {number}", notes)
    if code != CORRECT and not reason.strip():
        # The caller decides (PEM-800K drops such items); we neither drop nor invent.
        notes.warnings.append(f"step {number} is labelled {code} but gives no reason")
    return {"step": text, "label": code, "reason": reason}


def _step_judgment(data: Any, notes: _Notes) -> dict[str, list[dict[str, str]]]:
    if isinstance(data, dict):
        (items,) = _fields(data, ("steps",), "the judgment", notes)
        rows = _as_list(items, "steps")
    elif isinstance(data, list):
        rows = _rows_from_lists(data, notes)
    else:
        raise _Invalid("expected an object with steps, or a list of [step, label, reason]")
    if not rows:
        raise _Invalid("the judgment lists no steps")
    if any(not isinstance(row, dict) for row in rows) and isinstance(data, dict):
        notes.repair("read steps given as [step, label, reason] lists")
    return {"steps": [_step(_step_row(row, n, notes), n, notes) for n, row in enumerate(rows, 1)]}


def _step_texts(data: Any, notes: _Notes) -> dict[str, list[str]]:
    if isinstance(data, dict):
        (items,) = _fields(data, ("steps",), "the answer", notes)
        items = _as_list(items, "steps")
    elif isinstance(data, list):
        notes.repair("read a bare list of steps")
        items = data
    else:
        raise _Invalid("expected an object with steps, or a list of steps")
    if not items:
        raise _Invalid("the answer lists no steps")
    steps = [_text(item, f"step {n}", notes) for n, item in enumerate(items, 1)]
    for number, step in enumerate(steps, 1):
        if not step.strip():
            raise _Invalid(f"step {number} is empty")
    return {"steps": steps}


_BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False}


def _flag(value: Any, notes: _Notes) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        notes.repair("read 'ok' given as 0/1")
        return bool(value)
    if isinstance(value, str) and value.strip().casefold() in _BOOL_WORDS:
        notes.repair("read 'ok' given as text")
        return _BOOL_WORDS[value.strip().casefold()]
    raise _Invalid(f"'ok' is {value!r}; expected true or false")


def _structure_check(data: Any, notes: _Notes) -> dict[str, Any]:
    ok, problems = _fields(data, ("ok", "problems"), "the check", notes)
    ok = _flag(ok, notes)
    problems = [
        dict(zip(("code", "message"), _fields(item, ("code", "message"), f"problem {n}", notes), strict=True))
        for n, item in enumerate(_as_list(problems, "problems"), 1)
    ]
    for number, problem in enumerate(problems, 1):
        for key in ("code", "message"):
            problem[key] = _text(problem[key], f"the {key} of problem {number}", notes)
    if ok and problems:
        notes.warnings.append(f"says ok but lists {len(problems)} problem(s)")
    if not ok and not problems:
        notes.warnings.append("says not ok but lists no problems")
    return {"ok": ok, "problems": problems}


_VALIDATORS: dict[str, Callable[[Any, _Notes], Any]] = {
    "direct_judgment": _direct_judgment,
    "step_judgment": _step_judgment,
    "step_split": _step_texts,
    "restructured_solution": _step_texts,
    "structure_check": _structure_check,
}


# ---------------------------------------------------------------------------
# Entry points


def _failed(error: str) -> ParseResult:
    return ParseResult(ParseStatus.FAILED, error=error)


def parse(kind: str, text: str | None) -> ParseResult:
    """Reads a judge's response as ``kind`` (one of ``KINDS``); never raises on bad text."""
    validate = _VALIDATORS.get(kind)
    if validate is None:
        raise ValueError(f"unknown output kind {kind!r} (expected one of {', '.join(KINDS)})")
    if text is None or (isinstance(text, str) and not text.strip()):
        return _failed("empty response")
    if not isinstance(text, str):
        return _failed(f"response is {type(text).__name__}, not text")
    if len(text) > MAX_CHARS:
        return _failed(f"response is {len(text)} characters, over the {MAX_CHARS} limit")
    first_error = ""
    for where, snippet in _snippets(text):
        try:
            data, reader_notes, strict = _read_snippet(snippet)
        except _Unreadable as error:
            first_error = first_error or f"in {where}: {error}"
            continue
        # The first structure read decides: falling back to another one after a
        # validation error could silently pick a fragment of the reasoning.
        notes = _Notes(repairs=sorted(reader_notes))
        try:
            value = validate(data, notes)
        except _Invalid as error:
            return _failed(f"in {where}: {error}")
        status = ParseStatus.OK if strict and not notes.repairs else ParseStatus.REPAIRED
        return ParseResult(status, value=value, notes=notes.repairs + notes.warnings)
    return _failed(first_error)


def parse_direct_judgment(text: str | None) -> ParseResult:
    return parse("direct_judgment", text)


def parse_step_judgment(text: str | None) -> ParseResult:
    return parse("step_judgment", text)


def parse_step_split(text: str | None) -> ParseResult:
    return parse("step_split", text)


def parse_restructured_solution(text: str | None) -> ParseResult:
    return parse("restructured_solution", text)


def parse_structure_check(text: str | None) -> ParseResult:
    return parse("structure_check", text)
