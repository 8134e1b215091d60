"""The output formats we ask judge models for, one definition each: a
pydantic model that states the shape (and emits the JSON schema sent as
``response_format``) and the tolerant normaliser that turns what a model
actually wrote into that shape, listing every repair. A normalised value is
checked against its model before it is returned, so the schema the model was
asked for and the value callers get cannot drift apart."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inference.parsing.results import _Invalid, _Notes
from k12vista.vocabulary import CORRECT, LABEL_CODES, label_from_name

# ---------------------------------------------------------------------------
# The shapes


class _Strict(BaseModel):
    # OpenAI's strict mode needs every property required and no extras.
    model_config = ConfigDict(extra="forbid", strict=True)


NonEmpty = Annotated[list[str], Field(min_length=1)]


class DirectJudgment(_Strict):
    reference_answers: NonEmpty
    model_answers: NonEmpty
    scores: Annotated[list[Literal[0, 1]], Field(min_length=1)]


class JudgedStep(_Strict):
    step: str
    label: Literal[tuple(LABEL_CODES)]  # type: ignore[valid-type]  # the nine codes, in the taxonomy's order
    reason: str


class StepJudgment(_Strict):
    steps: Annotated[list[JudgedStep], Field(min_length=1)]


class StepTexts(_Strict):
    steps: NonEmpty


class Problem(_Strict):
    code: str
    message: str


class StructureCheck(_Strict):
    ok: bool
    problems: list[Problem]


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema with ``$ref``s inlined and titles dropped: one plain
    object per format, as vLLM's guided decoding and OpenAI both read it."""
    definitions = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return walk(definitions[node["$ref"].rsplit("/", 1)[-1]])
        out = {}
        for key, value in node.items():
            if key == "title":
                continue
            out[key] = {name: walk(sub) for name, sub in value.items()} if key == "properties" else walk(value)
        return out

    return walk(schema)


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


@dataclass(frozen=True)
class OutputFormat:
    shape: type[BaseModel]
    normalise: Callable[[Any, _Notes], Any]

    def read(self, data: Any, notes: _Notes) -> Any:
        value = self.normalise(data, notes)
        try:
            self.shape.model_validate(value)
        except ValidationError as error:  # a normaliser bug, never the model's fault: say where
            raise _Invalid(f"the value does not match the format: {error.errors()[0]['msg']}") from None
        return value


FORMATS: dict[str, OutputFormat] = {
    "direct_judgment": OutputFormat(DirectJudgment, _direct_judgment),
    "step_judgment": OutputFormat(StepJudgment, _step_judgment),
    "step_split": OutputFormat(StepTexts, _step_texts),
    "restructured_solution": OutputFormat(StepTexts, _step_texts),
    "structure_check": OutputFormat(StructureCheck, _structure_check),
}
KINDS = tuple(FORMATS)
SCHEMAS: dict[str, dict[str, Any]] = {kind: _inline(f.shape.model_json_schema()) for kind, f in FORMATS.items()}


def response_format(kind: str) -> dict[str, Any]:
    """The ``response_format`` argument for vLLM / OpenAI structured output."""
    if kind not in SCHEMAS:
        raise ValueError(f"unknown output kind {kind!r} (expected one of {', '.join(KINDS)})")
    # A copy: callers may tweak their request without changing our schema.
    schema = copy.deepcopy(SCHEMAS[kind])
    return {"type": "json_schema", "json_schema": {"name": kind, "schema": schema, "strict": True}}
