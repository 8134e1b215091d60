"""From a model's text to a structure: where the answer is (the last
``<evaluation>`` block, the last fence, else the text after any ``</think>``),
the bracketed regions in it (a linear scanner that respects strings) and the
literal reader for JSON-or-Python literals that never evaluates anything."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from inference.parsing.results import _Unreadable

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
