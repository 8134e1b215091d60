"""The one per-line import report: what each line of a file came to (created,
unchanged, a conflict left alone, a failure with its reason, stored as a code
with parameters and worded when shown: k12vista.line_reasons), counted in full
and listed up to ``REPORT_LIMIT`` lines each, so a million bad lines cannot
make a job result of a million rows. The question and the PEBench/PEM-800K
importers extend it with what only they report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from k12vista.line_reasons import Reason, as_reason, english
from k12vista.text import storable

REPORT_LIMIT = 1000  # listed lines per kind; the counts are always complete


@dataclass
class LineReport:
    # How the listed lines name their record: "hash_id" for questions, "key" for chains.
    key_name: ClassVar[str] = "key"

    created: int = 0
    unchanged: int = 0
    conflicts: int = 0
    failed: int = 0
    conflict_lines: list[dict] = field(default_factory=list)
    failed_lines: list[dict] = field(default_factory=list)

    @staticmethod
    def _add(rows: list[dict], row: dict) -> None:
        if len(rows) < REPORT_LIMIT:
            rows.append(row)

    @staticmethod
    def reason_row(reason: str | Reason) -> dict:
        """A row's reason: its code and parameters, worded when shown (k12vista.line_reasons), and an
        English copy in ``reason`` for logs and for readers that know no codes."""
        stored = as_reason(reason)
        worded = english(stored) or stored["code"]
        return {"reason": storable(worded[:1000]), "reason_code": stored["code"], "reason_params": stored["params"]}

    def conflict_at(self, line: int, key: str, reason: str | Reason, **extra: Any) -> None:
        self.conflicts += 1
        self._add(self.conflict_lines, {"line": line, self.key_name: key, **self.reason_row(reason), **extra})

    def fail(self, line: int, key: str, reason: str | Reason) -> None:
        self.failed += 1
        self._add(self.failed_lines, {"line": line, self.key_name: storable(key), **self.reason_row(reason)})

    def as_dict(self) -> dict:
        return {
            "created": self.created,
            "unchanged": self.unchanged,
            "conflicts": self.conflicts,
            "failed": self.failed,
            "conflict_lines": self.conflict_lines,
            "conflict_lines_truncated": self.conflicts > len(self.conflict_lines),
            "failed_lines": self.failed_lines,
            "failed_lines_truncated": self.failed > len(self.failed_lines),
        }
