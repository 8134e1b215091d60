"""The value of a Python literal expression, without ``eval``.

The reference code reads judge replies with ``eval``. This reads the same text
with ``ast.parse`` and computes only what a literal can hold: numbers, strings,
bytes, ``True``/``False``/``None``, lists, tuples, sets and dicts, signs, and
arithmetic on numbers (``1/2``), sums of strings, lists or tuples, and a string
or list repeated a small number of times. A name, a call, an attribute, a
subscript, a comprehension or anything else is refused, so untrusted text never
runs. Where ``eval`` would give a value this gives the same value; where this
refuses, ``eval`` either fails too or would have run code or looked up a name
in the reference's module (docs/formats.md lists it).

Sizes are capped (a number's bits, a repeated sequence's length) so that a
reply such as ``9**9**9`` cannot take the worker's time or memory.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

MAX_INT_BITS = 4096
MAX_REPEAT = 100_000  # items or characters a repetition may produce


class LiteralError(ValueError):
    """The text is not a literal this reader computes; the message says why."""


def evaluate(text: str) -> Any:
    """The value ``eval(text)`` would have, for literal text only."""
    if not isinstance(text, str):
        raise LiteralError(f"expected text, got {type(text).__name__}")
    # eval() skips leading spaces and tabs of a source string; ast.parse would call them an indent.
    source = text.lstrip(" \t")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise LiteralError(f"not Python: {exc}") from None
    try:
        return _value(tree.body)
    except RecursionError:
        raise LiteralError("nested too deeply") from None


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List):
        return [_value(item) for item in _no_starred(node.elts)]
    if isinstance(node, ast.Tuple):
        return tuple(_value(item) for item in _no_starred(node.elts))
    if isinstance(node, ast.Set):
        return {_value(item) for item in _no_starred(node.elts)}
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise LiteralError("** in a dict is not a literal")
        return {_value(key): _value(value) for key, value in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp):
        return _unary(node)
    if isinstance(node, ast.BinOp):
        return _binary(node)
    raise LiteralError(f"{type(node).__name__} at column {getattr(node, 'col_offset', 0) + 1} is not a literal")


def _no_starred(items: list[ast.expr]) -> list[ast.expr]:
    if any(isinstance(item, ast.Starred) for item in items):
        raise LiteralError("* unpacking is not a literal")
    return items


_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}


def _unary(node: ast.UnaryOp) -> Any:
    operand = _value(node.operand)
    if not isinstance(node.op, ast.Not) and not _is_number(operand):
        raise LiteralError(f"{type(node.op).__name__} of {type(operand).__name__}")
    try:
        return _checked(_UNARY[type(node.op)](operand))
    except TypeError as exc:  # ~1.5: eval would fail the same way
        raise LiteralError(str(exc)) from None


_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _binary(node: ast.BinOp) -> Any:
    left, right = _value(node.left), _value(node.right)
    op = type(node.op)
    if op not in _ARITHMETIC:
        raise LiteralError(f"{op.__name__} is not computed")
    if _is_number(left) and _is_number(right):
        if op is ast.Pow and not _small_power(left, right):
            raise LiteralError("a power too large to compute")
        try:
            return _checked(_ARITHMETIC[op](left, right))
        except (ArithmeticError, TypeError, ValueError) as exc:  # 1/0: eval fails the same way
            raise LiteralError(str(exc)) from None
    sequences = (str, bytes, list, tuple)
    if op is ast.Add and isinstance(left, sequences) and type(left) is type(right):
        if len(left) + len(right) > MAX_REPEAT * 10:
            raise LiteralError("a sum too long to compute")
        return operator.add(left, right)  # the same type on both sides, checked above
    if op is ast.Mult:
        sequence, count = (left, right) if isinstance(left, sequences) else (right, left)
        if isinstance(sequence, sequences) and isinstance(count, int):
            if len(sequence) * max(count, 0) > MAX_REPEAT:
                raise LiteralError("a repetition too long to compute")
            return sequence * count
    raise LiteralError(f"{op.__name__} of {type(left).__name__} and {type(right).__name__} is not computed")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | complex)  # bool is an int, as for eval


def _small_power(base: Any, exponent: Any) -> bool:
    if isinstance(base, complex) or isinstance(exponent, complex):
        return abs(exponent) <= 64
    if isinstance(exponent, float) or isinstance(base, float):
        return abs(exponent) <= 4096
    magnitude = max(abs(int(base)).bit_length(), 1)
    return abs(exponent) <= 64 or magnitude * abs(exponent) <= MAX_INT_BITS


def _checked(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise LiteralError("a number too large to compute")
    return value
