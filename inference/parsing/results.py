"""What a parse ends as, and the errors the reader and the formats raise on the way."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


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
