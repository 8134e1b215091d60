"""The reference code's result table (its ``evalaute.py`` ``_save_result``), computed from the
studio's per-slice aggregates: pure computation on plain data.

Rows: the three question types by their Chinese names, then 所有题型 (all types). Columns: the
eleven subject-stage tags (``math-g6`` ...), the stages ``g6 g9 g12``, the five subjects, then
所有(sub*grade) (all tags). Every cell is a micro mean: the sum of the scores of the items in it
over their count, items being the scored responses (the reference's eval file holds only the
items its judge's reply was read for; the studio counts the others too, as coverage, and shows
them beside this table).

Differences from the studio's own leaderboard, said where the table is shown: no coverage and
no intervals in the cells; a tag outside the reference's eleven (primary physics) has no column
and its items are left out of every cell, as the reference script cannot count them (it fails on
them); an empty cell is empty here, where the script divides by zero.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass

from inference.leaderboard.core import GroupStats
from k12vista import csvfiles
from k12vista.vocabulary import QUESTION_TYPE_ZH, RELEASE_TAGS, STAGE_LAST_GRADE, QuestionType, Stage

TYPE_ROWS = ("选择题", "填空题", "问答题")
ALL_TYPES = "所有题型"
ROWS = (*TYPE_ROWS, ALL_TYPES)
STAGES = ("g6", "g9", "g12")
SUBJECTS = ("math", "physics", "chemistry", "biology", "geography")
ALL_TAGS = "所有(sub*grade)"
COLUMNS = (*RELEASE_TAGS, *STAGES, *SUBJECTS, ALL_TAGS)
FIRST_HEADER = "类型"  # the reference's name for the row column


@dataclass
class Cell:
    total: float = 0.0
    count: int = 0

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass(frozen=True)
class Outside:
    """What the table cannot show: scored items of tags outside the eleven, and the responses
    the studio counts that the reference's eval file would not hold (not scored, or no answer)."""

    outside_tags: int
    unscored: int
    absent: int
    items: int


def tag_of(subject: str, stage: str) -> str:
    return f"{subject}-g{STAGE_LAST_GRADE[Stage(stage)]}"


def columns_of(tag: str) -> tuple[str, ...]:
    subject, grade = tag.split("-")
    return tag, grade, subject, ALL_TAGS


def table(parts: Iterable[GroupStats]) -> tuple[dict[str, dict[str, Cell]], Outside]:
    """Cells by row and column, as the reference script fills them, and what is left out."""
    cells = {row: {column: Cell() for column in COLUMNS} for row in ROWS}
    outside = unscored = absent = items = 0
    for part in parts:
        items += part.items + part.absent
        unscored += part.items - part.n
        absent += part.absent
        tag = tag_of(part.subject, part.stage)
        if tag not in RELEASE_TAGS:
            outside += part.n
            continue
        row = QUESTION_TYPE_ZH[QuestionType(part.qtype)]
        for name in (row, ALL_TYPES):
            for column in columns_of(tag):
                cells[name][column].total += part.total
                cells[name][column].count += part.n
    return cells, Outside(outside_tags=outside, unscored=unscored, absent=absent, items=items)


def means(cells: dict[str, dict[str, Cell]]) -> dict[str, dict[str, float | None]]:
    return {row: {column: cell.mean for column, cell in by_column.items()} for row, by_column in cells.items()}


def csv_text(model: str, cells: dict[str, dict[str, Cell]]) -> str:
    """The reference's table layout (its xlsx sheet: 类型, then the columns), one block per model,
    with the item count of each cell in a second block below the means."""
    out = io.StringIO()
    writer = csvfiles.writer(out)  # the model name is text from outside: never a formula
    writer.writerow(["model", FIRST_HEADER, *COLUMNS])
    for row in ROWS:
        writer.writerow([model, row, *("" if c.mean is None else repr(c.mean) for c in cells[row].values())])
    writer.writerow([])
    writer.writerow(["model", f"{FIRST_HEADER} (n)", *COLUMNS])
    for row in ROWS:
        writer.writerow([model, row, *(c.count for c in cells[row].values())])
    return out.getvalue()
