"""Every CSV the studio writes goes through ``writer``: a cell a spreadsheet would run as a formula
is written as text.

A model name, a source or a label from outside that starts with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return is a formula to Excel and LibreOffice (``=HYPERLINK(...)``, ``=cmd|...``),
run on the machine of whoever opens the download. Such a cell is written with a leading ``'``
(OWASP's advice), which spreadsheets show as text; so is a cell that already starts with ``'``,
so that ``read_cell`` gives back exactly what was written. Numbers (``-0.25``, ``1e-05``) are
left as they are. No Django here: the leaderboard's formats use it too."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def is_number(text: str) -> bool:
    return _NUMBER.fullmatch(text) is not None


def safe_cell(value: Any) -> Any:
    """The value as a CSV cell no spreadsheet runs: text starting like a formula (or with the
    quote this adds) gets a leading ``'``; numbers and other values are unchanged."""
    if isinstance(value, str) and value[:1] in (*FORMULA_STARTS, "'") and not is_number(value):
        return "'" + value
    return value


def read_cell(text: str) -> str:
    """A cell as it was before ``safe_cell``, for readers of our own CSVs."""
    return text[1:] if text.startswith("'") else text


class SafeWriter:
    """csv.writer's writerow and writerows, each cell through ``safe_cell``."""

    def __init__(self, out: Any, **options: Any) -> None:
        self._writer = csv.writer(out, **options)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([safe_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(out: Any, **options: Any) -> SafeWriter:
    """``csv.writer(out, **options)`` that neutralises formulas; the one way the studio writes CSV."""
    return SafeWriter(out, **options)
