"""Acceptance sampling plans: ISO 2859-1 / ANSI/ASQ Z1.4 single sampling, normal inspection.

An audit draws a sample from each stratum (a "lot") and accepts or rejects the
stratum by the number of nonconforming items found in it. The plan comes from
two tables of the standard:

* Table I (sample size code letters), general inspection level II: lot size ->
  code letter.
* Table II-A (ISO 2859-1 Table 2-A; the two are identical): code letter and AQL
  -> sample size n, acceptance number Ac and rejection number Re, or an arrow.
  An arrow means "use the first sampling plan below (or above) the arrow": the
  sample size changes with the plan, so the n printed beside the code letter
  no longer applies.

Both tables are kept below as the standard prints them and the arrows are
followed at lookup time, so each cell can be checked against the printed table
by eye. If the plan's sample size equals or exceeds the lot size the standard
says to inspect the whole lot (100 %).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from django.utils.translation import gettext

# Table I, general inspection level II: (largest lot size of the range, code letter).
LOT_SIZE_CODE_LETTERS: tuple[tuple[float, str], ...] = (
    (8, "A"),
    (15, "B"),
    (25, "C"),
    (50, "D"),
    (90, "E"),
    (150, "F"),
    (280, "G"),
    (500, "H"),
    (1200, "J"),
    (3200, "K"),
    (10000, "L"),
    (35000, "M"),
    (150000, "N"),
    (500000, "P"),
    (math.inf, "Q"),  # 500 001 and over
)

# Table II-A, single sampling plans for normal inspection, as printed, split into
# two panels only to keep the lines short. Each row: code letter, sample size,
# then per AQL column either "Ac/Re", "v" (use the first plan below the arrow) or
# "^" (use the first plan above the arrow).
TABLE_II_A = """
code    n 0.010 0.015 0.025 0.040 0.065  0.10  0.15  0.25  0.40  0.65
A      2     v     v     v     v     v     v     v     v     v     v
B      3     v     v     v     v     v     v     v     v     v     v
C      5     v     v     v     v     v     v     v     v     v     v
D      8     v     v     v     v     v     v     v     v     v     v
E     13     v     v     v     v     v     v     v     v     v     v
F     20     v     v     v     v     v     v     v     v     v   0/1
G     32     v     v     v     v     v     v     v     v   0/1     ^
H     50     v     v     v     v     v     v     v   0/1     ^     v
J     80     v     v     v     v     v     v   0/1     ^     v   1/2
K    125     v     v     v     v     v   0/1     ^     v   1/2   2/3
L    200     v     v     v     v   0/1     ^     v   1/2   2/3   3/4
M    315     v     v     v   0/1     ^     v   1/2   2/3   3/4   5/6
N    500     v     v   0/1     ^     v   1/2   2/3   3/4   5/6   7/8
P    800     v   0/1     ^     v   1/2   2/3   3/4   5/6   7/8 10/11
Q   1250   0/1     ^     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15
R   2000     ^     ^   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22

code    n   1.0   1.5   2.5   4.0   6.5    10    15    25    40    65   100   150   250   400   650  1000
A      2     v     v     v     v   0/1     v     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22 30/31
B      3     v     v     v   0/1     ^     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22 30/31 44/45
C      5     v     v   0/1     ^     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22 30/31 44/45     ^
D      8     v   0/1     ^     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22 30/31 44/45     ^     ^
E     13   0/1     ^     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22 30/31 44/45     ^     ^     ^
F     20     ^     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^
G     32     v   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^     ^
H     50   1/2   2/3   3/4   5/6   7/8 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^     ^     ^
J     80   2/3   3/4   5/6   7/8 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^     ^     ^     ^
K    125   3/4   5/6   7/8 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^
L    200   5/6   7/8 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^
M    315   7/8 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^
N    500 10/11 14/15 21/22     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^
P    800 14/15 21/22     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^
Q   1250 21/22     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^
R   2000     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^     ^
"""

DOWN, UP = "down", "up"
_ARROWS = {"v": DOWN, "^": UP}

Cell = tuple[int, int] | str  # (Ac, Re) or an arrow, DOWN or UP


def _parse_table(text: str) -> tuple[tuple[str, ...], dict[str, int], dict[tuple[str, str], Cell]]:
    """The printed table as (AQL headings, sample size by letter, cell by (letter, heading))."""
    headings: list[str] = []
    sizes: dict[str, int] = {}
    cells: dict[tuple[str, str], Cell] = {}
    for panel in text.strip().split("\n\n"):
        header, *rows = panel.splitlines()
        columns = header.split()[2:]
        headings += columns
        for row in rows:
            letter, size, *values = row.split()
            if len(values) != len(columns):
                raise ValueError(f"Table II-A row {letter}: {len(values)} cells for {len(columns)} columns")
            sizes[letter] = int(size)
            for heading, value in zip(columns, values, strict=True):
                if value in _ARROWS:
                    cells[letter, heading] = _ARROWS[value]
                else:
                    accept, reject = (int(number) for number in value.split("/"))
                    cells[letter, heading] = (accept, reject)
    return tuple(headings), sizes, cells


AQL_HEADINGS, SAMPLE_SIZES, _CELLS = _parse_table(TABLE_II_A)
CODE_LETTERS: tuple[str, ...] = tuple(SAMPLE_SIZES)  # A ... R, in the table's order
AQL_VALUES: tuple[float, ...] = tuple(float(heading) for heading in AQL_HEADINGS)


class SamplingPlanError(ValueError):
    """A lookup the table cannot answer; `field` names the offending input."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SamplingPlan:
    lot_size: int
    aql: float
    code_letter: str  # the lot's code letter (Table I, general level II)
    plan_letter: str  # the letter whose plan is used after following an arrow (same as code_letter if no arrow)
    sample_size: int
    accept: int  # Ac: accept the lot with this many nonconforming items or fewer
    reject: int  # Re: reject it with this many or more
    arrow: str | None  # None, "down" or "up": the arrow followed in Table II-A
    note: str  # English explanation of how the plan was found

    @property
    def whole_lot(self) -> bool:
        """The standard's rule: a sample as large as the lot means inspecting all of it."""
        return self.sample_size >= self.lot_size

    @property
    def units_to_inspect(self) -> int:
        return min(self.sample_size, self.lot_size)

    def as_dict(self) -> dict:
        return {**asdict(self), "whole_lot": self.whole_lot, "units_to_inspect": self.units_to_inspect}


def code_letter(lot_size: int) -> str:
    """Table I, general inspection level II."""
    if isinstance(lot_size, bool) or not isinstance(lot_size, int):
        raise SamplingPlanError(
            gettext("The lot size must be a whole number, not %(value)r.") % {"value": lot_size}, field="lot_size"
        )
    if lot_size < 2:
        raise SamplingPlanError(
            gettext("The lot size must be at least 2 (Table I starts at 2), not %(value)s.") % {"value": lot_size},
            field="lot_size",
        )
    return next(letter for largest, letter in LOT_SIZE_CODE_LETTERS if lot_size <= largest)


def aql_heading(aql: float) -> str:
    """The AQL column heading as printed (0.010, 1.0, 10 ...) for an AQL value."""
    if isinstance(aql, bool) or not isinstance(aql, int | float):
        raise SamplingPlanError(gettext("The AQL must be a number, not %(value)r.") % {"value": aql}, field="aql")
    for value, heading in zip(AQL_VALUES, AQL_HEADINGS, strict=True):
        if math.isclose(value, aql, rel_tol=1e-9):
            return heading
    raise SamplingPlanError(
        gettext("AQL %(aql)s is not a column of Table II-A; use one of %(choices)s.")
        % {"aql": f"{aql:g}", "choices": ", ".join(AQL_HEADINGS)},
        field="aql",
    )


def single_sampling_plan(lot_size: int, aql: float) -> SamplingPlan:
    """The single sampling plan, normal inspection, general level II, for a lot and an AQL."""
    letter = code_letter(lot_size)
    heading = aql_heading(aql)
    cell = _CELLS[letter, heading]
    arrow = cell if isinstance(cell, str) else None
    plan_letter = letter
    # Follow the arrow to the first cell in the same column that holds a plan; the
    # table never points an arrow at one going the other way.
    while isinstance(cell, str):
        step = 1 if cell == DOWN else -1
        index = CODE_LETTERS.index(plan_letter) + step
        if not 0 <= index < len(CODE_LETTERS):
            raise RuntimeError(f"Table II-A: the arrow at {plan_letter}/{heading} leaves the table")
        plan_letter = CODE_LETTERS[index]
        cell = _CELLS[plan_letter, heading]
    accept, reject = cell
    sample_size = SAMPLE_SIZES[plan_letter]
    if arrow is None:
        note = f"code letter {letter}, AQL {heading}: n={sample_size}, Ac {accept}, Re {reject}"
    else:
        where = "below" if arrow == DOWN else "above"
        note = (
            f"code letter {letter}, AQL {heading}: arrow: use the first plan {where} "
            f"(code letter {plan_letter}, n={sample_size}, Ac {accept}, Re {reject})"
        )
    if sample_size >= lot_size:
        note += f"; n={sample_size} is not smaller than the lot of {lot_size}: inspect the whole lot (100%)"
    return SamplingPlan(
        lot_size=lot_size,
        aql=AQL_VALUES[AQL_HEADINGS.index(heading)],
        code_letter=letter,
        plan_letter=plan_letter,
        sample_size=sample_size,
        accept=accept,
        reject=reject,
        arrow=arrow,
        note=note,
    )


def decide(plan: SamplingPlan, defects: int) -> str:
    """The lot's verdict: accept with Ac or fewer nonconforming items in the sample, reject with Re or more."""
    if isinstance(defects, bool) or not isinstance(defects, int) or defects < 0:
        raise SamplingPlanError(
            gettext("The number of defects must be a whole number >= 0, not %(value)r.") % {"value": defects},
            field="defects",
        )
    if defects > plan.units_to_inspect:
        raise SamplingPlanError(
            gettext("%(defects)s defects cannot be found in %(n)s inspected items.")
            % {"defects": defects, "n": plan.units_to_inspect},
            field="defects",
        )
    # Single sampling has Re == Ac + 1, so there is no third outcome.
    return "accept" if defects <= plan.accept else "reject"
