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
2. Strict ``json.loads`` of that region, then the format's normaliser and its
   pydantic model, which is also the schema sent to the model (``formats.py``).
3. Otherwise ``_Reader``, a small recursive-descent reader for JSON-or-Python
   *literals* (single quotes, ``True``/``None``, tuples, trailing commas,
   full-width punctuation between items). It builds lists, dicts, strings and
   numbers and nothing else: any bare name such as ``__import__`` is a syntax
   error, so untrusted text can never run. Its depth is capped, so nested junk
   cannot exhaust the stack.

Pure Python (and pydantic) on purpose: it runs in workers and tests without
Django models. ``reader.py`` finds and reads the structure, ``formats.py``
holds one definition per output format, and this module joins them.
"""

from __future__ import annotations

from inference.parsing.formats import FORMATS, KINDS, SCHEMAS, label_code, response_format
from inference.parsing.reader import (
    MAX_CHARS,
    MAX_DEPTH,
    NOTE_FULLWIDTH,
    NOTE_INNER_QUOTE,
    NOTE_LATEX,
    NOTE_NEWLINE,
    NOTE_PYTHON,
    NOTE_QUOTES,
    NOTE_TRAILING,
    NOTE_TUPLE,
    PARSER_VERSION,
    _read_snippet,
    _snippets,
    answer_after_reasoning,
)
from inference.parsing.results import ParseResult, ParseStatus, _Invalid, _Notes, _Unreadable

__all__ = [
    "KINDS", "MAX_CHARS", "MAX_DEPTH", "NOTE_FULLWIDTH", "NOTE_INNER_QUOTE", "NOTE_LATEX", "NOTE_NEWLINE",
    "NOTE_PYTHON", "NOTE_QUOTES", "NOTE_TRAILING", "NOTE_TUPLE", "PARSER_VERSION", "SCHEMAS", "ParseResult",
    "ParseStatus", "answer_after_reasoning", "label_code", "parse", "parse_direct_judgment",
    "parse_restructured_solution", "parse_step_judgment", "parse_step_split", "parse_structure_check",
    "response_format",
]  # fmt: skip

# ---------------------------------------------------------------------------
# Entry points


def _failed(error: str) -> ParseResult:
    return ParseResult(ParseStatus.FAILED, error=error)


def parse(kind: str, text: str | None) -> ParseResult:
    """Reads a judge's response as ``kind`` (one of ``KINDS``); never raises on bad text."""
    output_format = FORMATS.get(kind)
    if output_format is None:
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
            value = output_format.read(data, notes)
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
