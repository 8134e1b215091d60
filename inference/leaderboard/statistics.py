"""The numbers: cells with their Student-t intervals, from items or from slice sums."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache

from inference.leaderboard.core import (
    CORRECT,
    ERROR_CODES,
    MODES,
    OVERALL,
    SCORE_GROUPS,
    Cell,
    Entry,
    ErrorDistribution,
    GroupStats,
    Leaderboard,
    ScoredItem,
    _entry_sort_key,
    _group_sort_key,
    groups_of,
    label_codes,
)

CI_METHOD = "student-t 95% interval for the mean of item scores, clipped to [0, 1]; none below 2 scored items"


# Unbounded: one entry per distinct item count, and a leaderboard has hundreds
# of them; scipy's ppf costs tens of microseconds a call.
@cache
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom (scipy)."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"need 0 < p < 1 and df >= 1, got p={p!r}, df={df!r}")
    from scipy.stats import t as student_t  # here, not at import: scipy.stats is ~70 MiB every process would carry

    return float(student_t.ppf(p, df))


def _interval(mean: float, sd: float, n: int) -> tuple[float, float]:
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return max(0.0, mean - half), min(1.0, mean + half)


def _make_cell(group: str, scores: list[float | None], absent: int = 0) -> Cell:
    scored = [s for s in scores if s is not None]
    n = len(scored)
    unscored = len(scores) - n
    if n == 0:
        return Cell(group, 0, unscored, absent)
    mean = math.fsum(scored) / n
    low = high = None
    if n >= 2:
        low, high = _interval(mean, math.sqrt(math.fsum((s - mean) ** 2 for s in scored) / (n - 1)), n)
    return Cell(group, n, unscored, absent, mean, low, high)


def _cell_from_sums(group: str, items: int, n: int, total: float, squares: float, absent: int = 0) -> Cell:
    """The same cell as :func:`_make_cell`, from sums instead of the scores: the
    mean is total / n, the sample variance (squares - total^2 / n) / (n - 1),
    clipped at 0 against rounding (scores lie in [0, 1], so the cancellation
    costs at most a few ulps of n). ``items`` counts responses (scored or not)."""
    if n == 0:
        return Cell(group, 0, items, absent)
    mean = total / n
    low = high = None
    if n >= 2:
        low, high = _interval(mean, math.sqrt(max(0.0, squares - total * total / n) / (n - 1)), n)
    return Cell(group, n, items - n, absent, mean, low, high)


# --------------------------------------------------------------------------- building


def build_leaderboard(
    items: Iterable[ScoredItem], *, total_questions: Mapping[tuple[str, str], int] | None = None
) -> Leaderboard:
    """Aggregate scored items into a :class:`Leaderboard` (see the package docstring).

    ``total_questions`` maps ``(model, mode)`` to the number of questions that
    run should have covered; rows beyond that number raise ValueError, and a key
    with no rows at all still gets an entry (coverage 0). The same question twice
    for one (model, mode) raises ValueError.
    """
    totals = dict(total_questions or {})
    for key, total in totals.items():
        if not (isinstance(key, tuple) and len(key) == 2 and key[1] in MODES):
            raise ValueError(f"total_questions keys must be (model, mode) pairs, got {key!r}")
        if not isinstance(total, int) or total < 0:
            raise ValueError(f"total_questions[{key!r}] must be a non-negative int, got {total!r}")

    buckets: dict[tuple[str, str], list[ScoredItem]] = {}
    seen: set[tuple[str, str, str | int]] = set()
    for item in items:
        ident = (item.model, item.mode, item.question_id)
        if ident in seen:
            raise ValueError(f"question {item.question_id!r} appears twice for {item.model!r} in mode {item.mode}")
        seen.add(ident)
        buckets.setdefault((item.model, item.mode), []).append(item)

    entries = []
    for key in sorted(buckets.keys() | totals.keys(), key=_entry_sort_key):
        rows = buckets.get(key, [])
        absent = 0
        if key in totals:
            absent = totals[key] - len(rows)
            if absent < 0:
                raise ValueError(f"{key[0]!r} in mode {key[1]} has {len(rows)} rows but only {totals[key]} questions")
        entries.append(_build_entry(key, rows, absent))
    return Leaderboard(tuple(entries))


def _build_entry(key: tuple[str, str], rows: list[ScoredItem], absent: int) -> Entry:
    """``absent`` questions of unknown subject and grade count in ``overall`` only."""
    scores: dict[str, list[float | None]] = {group: [] for group in SCORE_GROUPS}
    steps: Counter[str] = Counter()
    counts: dict[str, Counter[str]] = {}
    for item in rows:
        for group in groups_of(item.subject, item.stage, item.qtype):
            scores.setdefault(group, []).append(item.score)
            steps[group] += len(item.step_labels)
            counts.setdefault(group, Counter()).update(code for code in item.step_labels if code != CORRECT)
    order = sorted(scores, key=_group_sort_key)
    cells = {group: _make_cell(group, scores[group], absent if group == OVERALL else 0) for group in order}
    return Entry(key[0], key[1], cells, _distributions(order, steps, counts))


def _distributions(order, steps: Counter[str], counts: dict[str, Counter[str]]) -> dict[str, ErrorDistribution]:
    empty: Counter[str] = Counter()
    return {
        group: ErrorDistribution(group, steps[group], {code: counts.get(group, empty)[code] for code in ERROR_CODES})
        for group in order
    }


def build_entry_from_stats(key: tuple[str, str], stats: Iterable[GroupStats], absent: int = 0) -> Entry:
    """One entry from slice aggregates; equal to :func:`_build_entry` over the
    items the slices summarise (up to rounding in the last bits of the means).
    Each slice's ``absent`` counts in every group of that slice; ``absent``
    here adds questions of unknown subject and grade to ``overall``."""
    if key[1] not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {key[1]!r}")
    # per group: items, n, total, squares, absent, labelled steps, then one count per error code
    width = 6 + len(ERROR_CODES)
    sums: dict[str, list] = {group: [0, 0, 0.0, 0.0, 0, 0, *([0] * len(ERROR_CODES))] for group in SCORE_GROUPS}
    for part in stats:
        labels = label_codes(part.labels)
        row = (part.items, part.n, part.total, part.squares, part.absent, sum(labels.values()),
               *(labels.get(code, 0) for code in ERROR_CODES))  # fmt: skip
        for group in groups_of(part.subject, part.stage, part.qtype):
            acc = sums.get(group)
            if acc is None:
                acc = sums[group] = [0, 0, 0.0, 0.0, 0, 0, *([0] * len(ERROR_CODES))]
            for i in range(width):
                acc[i] += row[i]
    order = sorted(sums, key=_group_sort_key)
    cells, errors = {}, {}
    for group in order:
        items, n, total, squares, slice_absent, steps, *codes = sums[group]
        extra = absent if group == OVERALL else 0
        cells[group] = _cell_from_sums(group, items, n, total, squares, absent=slice_absent + extra)
        errors[group] = ErrorDistribution(group, steps, dict(zip(ERROR_CODES, codes, strict=True)))
    return Entry(key[0], key[1], cells, errors)


def build_leaderboard_from_stats(stats: Mapping[tuple[str, str], Iterable[GroupStats]]) -> Leaderboard:
    """A :class:`Leaderboard` from slice aggregates keyed by (model, mode)."""
    return Leaderboard(tuple(build_entry_from_stats(key, stats[key]) for key in sorted(stats, key=_entry_sort_key)))
