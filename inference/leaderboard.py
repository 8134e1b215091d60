"""Leaderboards from scored responses: pure computation on plain data.

The caller (the lead's database code) feeds one :class:`ScoredItem` per model,
evaluation mode and question; :func:`build_leaderboard` returns a
:class:`Leaderboard` holding, for every (model, mode):

* score cells (:class:`Cell`) for ``overall``, each stage (``stage:primary``),
  each subject (``subject:math``), each question type (``type:fill_in_blank``)
  and each subject-stage cell of the reference release (``cell:math-g9``, see
  :func:`k12vista.vocabulary.release_tag`);
* error-type distributions (:class:`ErrorDistribution`) of the eight error
  labels (CS excluded) overall and by stage, subject and question type.

Scores and what is missing
--------------------------
An item's score is a float in [0, 1] (direct mode: the mean of the judge's 0/1
sub-answer marks; step-by-step mode: correct steps / steps), or ``None`` when the
response could not be parsed or is missing. A cell's ``mean`` is the mean over
*scored* items only; a ``None`` is **not** counted as a 0. It is counted,
instead, in the denominator of ``coverage`` = scored / items. The paper's
reference code silently dropped unparsable responses, so its numbers are means
over an unknown subset; here the subset is explicit and every number carries its
coverage. (Counting ``None`` as 0 would be the other defensible choice; whoever
wants it can pass ``score=0.0``.)

Questions for which there is no row at all can only be accounted for if the
caller says how many questions a run should have had: ``total_questions`` maps
``(model, mode)`` to that number, and the difference shows up as ``absent`` in
the ``overall`` cell only (an absent question's subject and grade are unknown
here). Better still, the caller feeds missing questions as items with
``score=None``; then every cell's coverage is right.

Interval
--------
Every cell with at least two scored items has a 95 % Student-t interval for the
mean, ``mean +- t(0.975, n - 1) * s / sqrt(n)`` with ``s`` the sample standard
deviation, clipped to [0, 1]. The same interval is used in both modes: for
direct mode, where item scores are means of 0/1 marks, it is a normal
approximation with the small-sample t correction (at the benchmark's sizes the t
and normal quantiles agree to three decimals); for step-by-step scores, which
are continuous fractions, the t interval is the usual choice. Two known
weaknesses: when all scores in a cell are equal the interval has zero width, and
near 0 or 1 with few items it is too narrow (a Wilson-type interval would do
better there). With fewer than two scored items the interval is ``None``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from statistics import NormalDist

from k12vista.vocabulary import (
    CORRECT,
    LABEL_CODES,
    RELEASE_TAGS,
    STAGE_LAST_GRADE,
    QuestionType,
    Stage,
    Subject,
    label_from_name,
    parse_release_tag,
    question_type_from_name,
    release_tag,
    stage_of_grade,
)

__all__ = [
    "CI_METHOD",
    "ERROR_CODES",
    "FORMAT",
    "GROUPINGS",
    "MODES",
    "Cell",
    "Entry",
    "ErrorDistribution",
    "GroupStats",
    "Leaderboard",
    "PublishedCSVError",
    "PublishedRow",
    "PublishedScore",
    "ScoredItem",
    "build_leaderboard",
    "build_leaderboard_from_stats",
    "from_csv",
    "from_json",
    "merge_published",
    "latex_escape",
    "parse_group",
    "read_published_csv",
    "t_quantile",
    "to_csv",
    "to_json",
    "to_latex",
]

FORMAT = "k12vista-leaderboard.v1"
MODES = ("direct", "step_by_step")
ERROR_CODES = tuple(code for code in LABEL_CODES if code != CORRECT)
CI_METHOD = "student-t 95% interval for the mean of item scores, clipped to [0, 1]; none below 2 scored items"
OVERALL = "overall"


# --------------------------------------------------------------------------- groups


def _stage_group(stage: str) -> str:
    return f"stage:{Stage(stage).value}"


def _subject_group(subject: str) -> str:
    return f"subject:{Subject(subject).value}"


def _type_group(qtype: str) -> str:
    return f"type:{QuestionType(qtype).value}"


def _cell_group(subject: str, grade: int) -> str:
    return f"cell:{release_tag(subject, grade)}"


def _tag_sort_key(tag: str) -> tuple[int, int]:
    subject, stage = parse_release_tag(tag)
    return list(Subject).index(subject), STAGE_LAST_GRADE[stage]


# The groups every entry has, in display order; cells outside the release's
# eleven (such as primary physics) are appended when data or published rows use them.
ERROR_GROUPS = (
    OVERALL,
    *(_stage_group(s) for s in Stage),
    *(_subject_group(s) for s in Subject),
    *(_type_group(t) for t in QuestionType),
)
SCORE_GROUPS = (*ERROR_GROUPS, *(f"cell:{tag}" for tag in RELEASE_TAGS))


def _group_sort_key(group: str) -> tuple[int, int, int]:
    if group in SCORE_GROUPS:
        return 0, SCORE_GROUPS.index(group), 0
    return 1, *_tag_sort_key(group.removeprefix("cell:"))


def parse_group(text: str) -> str:
    """Canonical group key from ``overall``, ``stage:primary``, ``subject:math``,
    ``type:multiple_choice`` (the Chinese type name is accepted too) or
    ``cell:math-g9``. Raises ValueError naming the text."""
    raw = text.strip()
    kind, sep, value = raw.partition(":")
    kind, value = kind.strip().lower(), value.strip()
    try:
        if not sep:
            if kind == OVERALL:
                return OVERALL
        elif kind == "stage":
            return _stage_group(value.lower())
        elif kind == "subject":
            return _subject_group(value.lower())
        elif kind == "type":
            return _type_group(question_type_from_name(value.lower() if value.isascii() else value))
        elif kind == "cell":
            subject, stage = parse_release_tag(value.lower())
            canonical = release_tag(subject, STAGE_LAST_GRADE[stage])
            if canonical == value.lower():
                return f"cell:{canonical}"
    except ValueError:
        pass
    raise ValueError(
        f"unknown group {text!r} (expected overall, stage:primary, subject:math, type:multiple_choice or cell:math-g9)"
    )


def _parse_mode(text: str) -> str:
    mode = "_".join(text.strip().lower().replace("-", " ").split())
    if mode not in MODES:
        raise ValueError(f"unknown mode {text!r} (expected direct or step_by_step)")
    return mode


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class ScoredItem:
    """One model's scored response to one question in one mode.

    ``step_labels`` accepts codes or names (:func:`label_from_name`) and is
    stored as a tuple of codes. Invalid values raise ValueError at construction.
    """

    model: str
    mode: str
    question_id: str | int
    subject: str
    grade: int
    qtype: str
    score: float | None
    step_labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError(f"model must be a non-empty string, got {self.model!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        object.__setattr__(self, "subject", Subject(self.subject).value)
        stage_of_grade(self.grade)  # raises for grades outside 1-12
        object.__setattr__(self, "qtype", QuestionType(self.qtype).value)
        if self.score is not None:
            score = float(self.score)
            if not 0.0 <= score <= 1.0:  # also false for NaN
                raise ValueError(f"score must be in [0, 1] or None, got {self.score!r}")
            object.__setattr__(self, "score", score)
        object.__setattr__(self, "step_labels", tuple(label_from_name(name).code for name in self.step_labels))

    @property
    def stage(self) -> str:
        return stage_of_grade(self.grade).value


# --------------------------------------------------------------------------- output


@dataclass(frozen=True)
class Cell:
    """The mean score of one group. ``n`` scored items, ``unscored`` items whose
    score is None, ``absent`` questions with no row (``overall`` only)."""

    group: str
    n: int = 0
    unscored: int = 0
    absent: int = 0
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def items(self) -> int:
        return self.n + self.unscored + self.absent

    @property
    def coverage(self) -> float | None:
        """Scored / items; None for a cell with no items."""
        return self.n / self.items if self.items else None


@dataclass(frozen=True)
class ErrorDistribution:
    """Counts of the eight error labels among labelled steps of one group.

    ``steps`` counts every labelled step, CS included; ``counts`` has one entry
    per error code in the taxonomy's order, zeros included."""

    group: str
    steps: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_CODES, 0))

    @property
    def error_steps(self) -> int:
        return sum(self.counts.values())

    @property
    def shares(self) -> dict[str, float | None]:
        """Each code's share of the error steps (they sum to 1); None when there are none."""
        total = self.error_steps
        return {code: (count / total if total else None) for code, count in self.counts.items()}


@dataclass(frozen=True)
class PublishedScore:
    """A number someone else published (0-1), shown beside ours, never mixed in."""

    score: float
    source: str


@dataclass(frozen=True)
class Entry:
    model: str
    mode: str
    cells: dict[str, Cell]
    errors: dict[str, ErrorDistribution]
    published: dict[str, PublishedScore] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return self.model, self.mode


@dataclass(frozen=True)
class Leaderboard:
    """Entries sorted by model name, then mode (direct before step_by_step)."""

    entries: tuple[Entry, ...] = ()

    def entry(self, model: str, mode: str) -> Entry | None:
        return next((e for e in self.entries if e.key == (model, mode)), None)

    def for_mode(self, mode: str) -> list[Entry]:
        return [e for e in self.entries if e.mode == mode]


def _entry_sort_key(key: tuple[str, str]) -> tuple[str, int]:
    return key[0], MODES.index(key[1])


# --------------------------------------------------------------------------- statistics


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for aa in (
            m * (b - m) * x / ((a - 1.0 + 2 * m) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1.0 + 2 * m)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: int) -> float:
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def _t_pdf(t: float, df: int) -> float:
    return math.exp(
        math.lgamma((df + 1) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2.0 * math.log1p(t * t / df)
    )  # fmt: skip


def _t_quantile_newton(p: float, df: int) -> float | None:
    """Newton's method on the CDF from the Cornish-Fisher expansion (Abramowitz
    and Stegun 26.7.5), which is already within about 1e-5 for df >= 30: two or
    three CDF evaluations instead of bisection's fifty. None if it does not settle."""
    z = NormalDist().inv_cdf(p)
    t = (
        z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * df**4)
    )  # fmt: skip
    for _ in range(20):
        step = (_t_cdf(t, df) - p) / _t_pdf(t, df)
        t -= step
        if abs(step) <= 1e-11 * abs(t):  # the CDF is good to about 1e-13: the noise floor
            return t
    return None


# Unbounded: one entry per distinct item count, and a leaderboard has hundreds
# of them; a bounded cache smaller than that missed on every page.
@cache
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom: Newton's
    method for df >= 30, bisection on the CDF below (and as the fallback)."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"need 0 < p < 1 and df >= 1, got p={p!r}, df={df!r}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df >= 30 and (found := _t_quantile_newton(p, df)) is not None:
        return found
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2.0


def _make_cell(group: str, scores: list[float | None], absent: int = 0) -> Cell:
    scored = [s for s in scores if s is not None]
    n = len(scored)
    unscored = len(scores) - n
    if n == 0:
        return Cell(group, 0, unscored, absent)
    mean = math.fsum(scored) / n
    low = high = None
    if n >= 2:
        sd = math.sqrt(math.fsum((s - mean) ** 2 for s in scored) / (n - 1))
        half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
        low, high = max(0.0, mean - half), min(1.0, mean + half)
    return Cell(group, n, unscored, absent, mean, low, high)


# --------------------------------------------------------------------------- building


def build_leaderboard(
    items: Iterable[ScoredItem], *, total_questions: Mapping[tuple[str, str], int] | None = None
) -> Leaderboard:
    """Aggregate scored items into a :class:`Leaderboard` (see the module docstring).

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
    scores: dict[str, list[float | None]] = {group: [] for group in SCORE_GROUPS}
    steps: Counter[str] = Counter()
    counts: dict[str, Counter[str]] = {group: Counter() for group in ERROR_GROUPS}
    for item in rows:
        error_groups = (OVERALL, _stage_group(item.stage), _subject_group(item.subject), _type_group(item.qtype))
        for group in (*error_groups, _cell_group(item.subject, item.grade)):
            scores.setdefault(group, []).append(item.score)
        for group in error_groups:
            steps[group] += len(item.step_labels)
            counts[group].update(code for code in item.step_labels if code != CORRECT)
    cells = {
        group: _make_cell(group, scores[group], absent if group == OVERALL else 0)
        for group in sorted(scores, key=_group_sort_key)
    }
    errors = {
        group: ErrorDistribution(group, steps[group], {code: counts[group][code] for code in ERROR_CODES})
        for group in ERROR_GROUPS
    }
    return Entry(key[0], key[1], cells, errors)


# --------------------------------------------------------------------------- from database aggregates


@dataclass(frozen=True)
class GroupStats:
    """What a database aggregation returns for one (model, mode) and one slice
    of questions with the same subject, stage and type: the finest grouping
    every leaderboard group is a union of.

    ``items`` counts every response (scored or not), ``n`` the scored ones,
    ``total`` and ``squares`` are the sums of their scores and squared scores;
    ``labels`` counts the labelled steps of scored responses by label code,
    CS included."""

    subject: str
    stage: str
    qtype: str
    items: int = 0
    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    labels: Mapping[str, int] = field(default_factory=dict)


def _cell_from_sums(group: str, items: int, n: int, total: float, squares: float, absent: int = 0) -> Cell:
    """The same cell as :func:`_make_cell`, from sums instead of the scores: the
    mean is total / n, the sample variance (squares - total^2 / n) / (n - 1),
    clipped at 0 against rounding (scores lie in [0, 1], so the cancellation
    costs at most a few ulps of n)."""
    if n == 0:
        return Cell(group, 0, items, absent)
    mean = total / n
    low = high = None
    if n >= 2:
        sd = math.sqrt(max(0.0, squares - total * total / n) / (n - 1))
        half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
        low, high = max(0.0, mean - half), min(1.0, mean + half)
    return Cell(group, n, items - n, absent, mean, low, high)


def _stats_groups(stats: GroupStats) -> tuple[tuple[str, ...], str]:
    error_groups = (OVERALL, _stage_group(stats.stage), _subject_group(stats.subject), _type_group(stats.qtype))
    return error_groups, _cell_group(stats.subject, STAGE_LAST_GRADE[Stage(stats.stage)])


def build_entry_from_stats(key: tuple[str, str], stats: Iterable[GroupStats], absent: int = 0) -> Entry:
    """One entry from slice aggregates; equal to :func:`_build_entry` over the
    items the slices summarise (up to rounding in the last bits of the means)."""
    if key[1] not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {key[1]!r}")
    sums: dict[str, list] = {group: [0, 0, 0.0, 0.0] for group in SCORE_GROUPS}
    steps: Counter[str] = Counter()
    counts: dict[str, Counter[str]] = {group: Counter() for group in ERROR_GROUPS}
    for part in stats:
        error_groups, cell = _stats_groups(part)
        for group in (*error_groups, cell):
            acc = sums.setdefault(group, [0, 0, 0.0, 0.0])
            acc[0] += part.items
            acc[1] += part.n
            acc[2] += part.total
            acc[3] += part.squares
        labels = {(name if name in LABEL_CODES else label_from_name(name).code): count
                  for name, count in part.labels.items()}  # fmt: skip
        for group in error_groups:
            steps[group] += sum(labels.values())
            counts[group].update({code: count for code, count in labels.items() if code != CORRECT})
    cells = {
        group: _cell_from_sums(group, *sums[group], absent=absent if group == OVERALL else 0)
        for group in sorted(sums, key=_group_sort_key)
    }
    errors = {
        group: ErrorDistribution(group, steps[group], {code: counts[group][code] for code in ERROR_CODES})
        for group in ERROR_GROUPS
    }
    return Entry(key[0], key[1], cells, errors)


def build_leaderboard_from_stats(stats: Mapping[tuple[str, str], Iterable[GroupStats]]) -> Leaderboard:
    """A :class:`Leaderboard` from slice aggregates keyed by (model, mode)."""
    return Leaderboard(tuple(build_entry_from_stats(key, stats[key]) for key in sorted(stats, key=_entry_sort_key)))


# --------------------------------------------------------------------------- published numbers


@dataclass(frozen=True)
class PublishedRow:
    model: str
    mode: str
    group: str
    score: float  # 0-1
    source: str
    line: int


class PublishedCSVError(ValueError):
    """Every bad line of a published-results CSV; ``errors`` is [(line, message)]."""

    def __init__(self, errors: list[tuple[int, str]]):
        self.errors = errors
        super().__init__("\n".join(f"line {line}: {message}" for line, message in errors))


PUBLISHED_COLUMNS = ("model", "mode", "group", "score", "source")


def read_published_csv(text: str, *, scale: str = "auto") -> list[PublishedRow]:
    """Parse published results: a CSV with the columns model, mode, group,
    score, source (others are ignored; a UTF-8 BOM is allowed).

    Scores are returned on 0-1. With ``scale="auto"`` the whole file is read as
    percentages if any score ends in ``%`` or any score is above 1, and as
    fractions otherwise: the scale is decided per file, never per line, so that
    a 0.95 in a percent file is not silently read as 95 %. (A percent file whose
    scores are all at most 1 % would be misread; pass ``scale="percent"`` then.)
    ``scale`` may also be ``"percent"`` or ``"fraction"``.

    Raises :class:`PublishedCSVError` listing every bad line (line numbers are
    the file's physical lines, the header being line 1); blank lines are skipped.
    """
    if scale not in ("auto", "percent", "fraction"):
        raise ValueError(f"scale must be auto, percent or fraction, got {scale!r}")
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    header = [name.strip().lower() for name in (reader.fieldnames or [])]
    missing = [column for column in PUBLISHED_COLUMNS if column not in header]
    if missing:
        raise PublishedCSVError([(1, f"missing column(s): {', '.join(missing)}")])
    reader.fieldnames = header

    errors: list[tuple[int, str]] = []
    parsed: list[tuple[int, str, str, str, float, bool, str]] = []
    first_line: dict[tuple[str, str, str], int] = {}
    for record in reader:
        line = reader.line_num
        if None in record:
            errors.append((line, f"{len(header) + len(record[None])} fields, the header has {len(header)}"))
            continue
        values = {column: (record.get(column) or "").strip() for column in PUBLISHED_COLUMNS}
        if not any((value or "").strip() for value in record.values()):
            continue
        problems = [f"missing {column}" for column in ("model", "source") if not values[column]]
        try:
            mode = _parse_mode(values["mode"])
        except ValueError as exc:
            problems.append(str(exc))
        try:
            group = parse_group(values["group"])
        except ValueError as exc:
            problems.append(str(exc))
        raw = values["score"]
        percent_sign = raw.endswith("%")
        try:
            score = float(raw.removesuffix("%").strip())
            if not math.isfinite(score) or score < 0:
                raise ValueError
        except ValueError:
            problems.append(f"score {raw!r} is not a non-negative number")
        if percent_sign and scale == "fraction":
            problems.append(f"score {raw!r} is a percentage but scale='fraction' was asked for")
        if problems:
            errors.append((line, "; ".join(problems)))
            continue
        ident = (values["model"], mode, group)
        if ident in first_line:
            errors.append((line, f"duplicate of line {first_line[ident]} ({values['model']}, {mode}, {group})"))
            continue
        first_line[ident] = line
        parsed.append((line, values["model"], mode, group, score, percent_sign, values["source"]))

    percent = scale == "percent" or (scale == "auto" and any(p[5] or p[4] > 1.0 for p in parsed))
    rows = []
    for line, model, mode, group, score, _sign, source in parsed:
        limit = 100.0 if percent else 1.0
        if score > limit:
            errors.append((line, f"score {score:g} is above {limit:g} ({'percent' if percent else 'fraction'} scale)"))
            continue
        rows.append(PublishedRow(model, mode, group, score / 100.0 if percent else score, source, line))
    if errors:
        raise PublishedCSVError(sorted(errors))
    return rows


def merge_published(leaderboard: Leaderboard, rows: Iterable[PublishedRow]) -> Leaderboard:
    """A new leaderboard with published numbers beside ours (``Entry.published``).

    Our cells are never changed. A (model, mode) only in ``rows`` gets an entry
    with empty cells; a published cell outside our groups (such as
    ``cell:physics-g6``) gets an empty cell of ours. A published value already in
    ``leaderboard`` for the same group is replaced; the same group twice within
    ``rows`` raises ValueError. Model names must match exactly.
    """
    incoming: dict[tuple[str, str], dict[str, PublishedScore]] = {}
    for row in rows:
        bucket = incoming.setdefault((row.model, _parse_mode(row.mode)), {})
        group = parse_group(row.group)
        if group in bucket:
            raise ValueError(f"published {group} for {row.model!r} ({row.mode}) given twice")
        if not 0.0 <= row.score <= 1.0:
            raise ValueError(f"published score must be 0-1, got {row.score!r} for {row.model!r} {group}")
        bucket[group] = PublishedScore(float(row.score), row.source)

    by_key = {entry.key: entry for entry in leaderboard.entries}
    for key in incoming.keys() - by_key.keys():
        by_key[key] = _build_entry(key, [], 0)
    entries = []
    for key in sorted(by_key, key=_entry_sort_key):
        entry = by_key[key]
        if key in incoming:
            published = {**entry.published, **incoming[key]}
            cells = dict(entry.cells)
            for group in published:
                cells.setdefault(group, Cell(group))
            entry = replace(
                entry,
                cells={group: cells[group] for group in sorted(cells, key=_group_sort_key)},
                published={group: published[group] for group in sorted(published, key=_group_sort_key)},
            )
        entries.append(entry)
    return Leaderboard(tuple(entries))


# --------------------------------------------------------------------------- CSV and JSON

CSV_COLUMNS = (
    "model",
    "mode",
    "group",
    "n",
    "unscored",
    "absent",
    "items",
    "coverage",
    "mean",
    "ci_low",
    "ci_high",
    "steps",
    "error_steps",
    *ERROR_CODES,
    *(f"{code}_share" for code in ERROR_CODES),
    "published_score",
    "published_source",
)


def _num(value: float | int | None) -> str:
    return "" if value is None else repr(value)


def to_csv(leaderboard: Leaderboard) -> str:
    """One row per (model, mode, group), in the leaderboard's order.

    Scores, intervals, coverage and shares are on 0-1 and written with
    ``repr`` so they read back exactly; empty fields mean "not applicable" (no
    scored item, no error distribution for ``cell:`` groups, nothing published).
    ``items``, ``coverage``, ``error_steps`` and the ``_share`` columns are
    derived and ignored by :func:`from_csv`.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for entry in leaderboard.entries:
        for group, cell in entry.cells.items():
            dist = entry.errors.get(group)
            pub = entry.published.get(group)
            writer.writerow(
                [
                    entry.model,
                    entry.mode,
                    group,
                    cell.n,
                    cell.unscored,
                    cell.absent,
                    cell.items,
                    _num(cell.coverage),
                    _num(cell.mean),
                    _num(cell.ci_low),
                    _num(cell.ci_high),
                    *(
                        [dist.steps, dist.error_steps, *dist.counts.values(), *map(_num, dist.shares.values())]
                        if dist
                        else [""] * (2 + 2 * len(ERROR_CODES))
                    ),
                    _num(pub.score) if pub else "",
                    pub.source if pub else "",
                ]
            )
    return out.getvalue()


def _opt_float(text: str) -> float | None:
    return float(text) if text else None


def from_csv(text: str) -> Leaderboard:
    """Read back what :func:`to_csv` wrote."""
    by_key: dict[tuple[str, str], tuple[dict, dict, dict]] = {}
    for record in csv.DictReader(io.StringIO(text, newline="")):
        cells, errors, published = by_key.setdefault((record["model"], record["mode"]), ({}, {}, {}))
        group = record["group"]
        cells[group] = Cell(
            group,
            int(record["n"]),
            int(record["unscored"]),
            int(record["absent"]),
            _opt_float(record["mean"]),
            _opt_float(record["ci_low"]),
            _opt_float(record["ci_high"]),
        )
        if record["steps"]:
            errors[group] = ErrorDistribution(
                group, int(record["steps"]), {code: int(record[code]) for code in ERROR_CODES}
            )
        if record["published_score"]:
            published[group] = PublishedScore(float(record["published_score"]), record["published_source"])
    return Leaderboard(tuple(Entry(*key, *by_key[key]) for key in sorted(by_key, key=_entry_sort_key)))


def to_json(leaderboard: Leaderboard, *, indent: int | None = 2) -> str:
    """JSON with a fixed key order (format, interval, then entries in the
    leaderboard's order, groups in display order); scores on 0-1."""
    document = {
        "format": FORMAT,
        "interval": CI_METHOD,
        "entries": [
            {
                "model": entry.model,
                "mode": entry.mode,
                "cells": {
                    group: {
                        "n": cell.n,
                        "unscored": cell.unscored,
                        "absent": cell.absent,
                        "items": cell.items,
                        "coverage": cell.coverage,
                        "mean": cell.mean,
                        "ci_low": cell.ci_low,
                        "ci_high": cell.ci_high,
                    }
                    for group, cell in entry.cells.items()
                },
                "errors": {
                    group: {
                        "steps": dist.steps,
                        "error_steps": dist.error_steps,
                        "counts": dist.counts,
                        "shares": dist.shares,
                    }
                    for group, dist in entry.errors.items()
                },
                "published": {
                    group: {"score": pub.score, "source": pub.source} for group, pub in entry.published.items()
                },
            }
            for entry in leaderboard.entries
        ],
    }
    return json.dumps(document, ensure_ascii=False, indent=indent)


def from_json(text: str) -> Leaderboard:
    """Read back what :func:`to_json` wrote (derived fields are recomputed)."""
    document = json.loads(text)
    if document.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document (format {document.get('format')!r})")
    entries = []
    for raw in document["entries"]:
        cells = {
            group: Cell(group, c["n"], c["unscored"], c["absent"], c["mean"], c["ci_low"], c["ci_high"])
            for group, c in raw["cells"].items()
        }
        errors = {
            group: ErrorDistribution(group, d["steps"], {code: d["counts"][code] for code in ERROR_CODES})
            for group, d in raw["errors"].items()
        }
        published = {group: PublishedScore(p["score"], p["source"]) for group, p in raw["published"].items()}
        entries.append(Entry(raw["model"], raw["mode"], cells, errors, published))
    return Leaderboard(tuple(entries))


# --------------------------------------------------------------------------- LaTeX

GROUPINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "stage": (("stage:primary", "Primary"), ("stage:middle", "Middle"), ("stage:high", "High")),
    "subject": (
        ("subject:math", "Math"),
        ("subject:physics", "Physics"),
        ("subject:chemistry", "Chemistry"),
        ("subject:biology", "Biology"),
        ("subject:geography", "Geography"),
    ),
    "type": (
        ("type:multiple_choice", "Multiple choice"),
        ("type:fill_in_blank", "Fill-in-blank"),
        ("type:free_response", "Free response"),
    ),
    "cell": tuple((f"cell:{tag}", tag) for tag in RELEASE_TAGS),
}
MODE_TITLES = {"direct": "Direct Inference Score", "step_by_step": "Step-by-Step Score"}

_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
EM_DASH = "---"
DAGGER = r"$^\dagger$"


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(char, char) for char in text)


def to_latex(
    leaderboard: Leaderboard,
    *,
    mode: str,
    grouping: str = "stage",
    source: str = "ours",
    caption: str | None = None,
    label: str | None = None,
) -> str:
    """A booktabs table like the paper's Table 7 for one mode.

    Rows are models, sorted by Overall (highest first, empty last, then by
    name); columns are the grouping's groups (``stage``: Primary, Middle,
    High; also ``subject``, ``type``, ``cell``) and Overall. Scores are
    percentages with two decimals; the best value of each column as printed is
    bold (ties all bold); an empty cell is an em dash (``---``). With
    ``source="ours"`` a cell with items whose coverage is below 1 gets a dagger
    (an em dash too, when none of its items was scored) and the table a note;
    models with no item in this mode are left out, a model whose every response
    was unparsable is kept. ``source="published"`` tabulates the merged
    published numbers of models that have any. ``caption`` is LaTeX and is not
    escaped; model names are.
    """
    mode = _parse_mode(mode)
    if grouping not in GROUPINGS:
        raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}, got {grouping!r}")
    if source not in ("ours", "published"):
        raise ValueError(f"source must be ours or published, got {source!r}")
    columns = (*GROUPINGS[grouping], (OVERALL, "Overall"))

    table: list[tuple[str, list[float | None], list[bool]]] = []
    for entry in leaderboard.for_mode(mode):
        values: list[float | None] = []
        partial: list[bool] = []
        for group, _title in columns:
            if source == "ours":
                cell = entry.cells.get(group)
                values.append(cell.mean if cell else None)
                partial.append(bool(cell and cell.items and cell.n < cell.items))
            else:
                pub = entry.published.get(group)
                values.append(pub.score if pub else None)
                partial.append(False)
        if entry.cells[OVERALL].items if source == "ours" else any(v is not None for v in values):
            table.append((entry.model, values, partial))
    table.sort(key=lambda row: (row[1][-1] is None, -(row[1][-1] or 0.0), row[0]))

    printed = [[None if v is None else f"{v * 100:.2f}" for v in values] for _, values, _ in table]
    best = [max((float(row[i]) for row in printed if row[i] is not None), default=None) for i in range(len(columns))]
    body = []
    for (model, _values, partial), texts in zip(table, printed, strict=True):
        shown = []
        for i, text in enumerate(texts):
            if text is None:
                shown.append(EM_DASH + (DAGGER if partial[i] else ""))
                continue
            text = rf"\textbf{{{text}}}" if float(text) == best[i] else text
            shown.append(text + (DAGGER if partial[i] else ""))
        body.append(f"    {latex_escape(model)} & {' & '.join(shown)} \\\\")

    width = len(columns)
    what = {"stage": "stage", "subject": "subject", "type": "question type", "cell": "subject and stage"}[grouping]
    suffix = "-published" if source == "published" else ""
    if caption is None:
        caption = f"{MODE_TITLES[mode]} (\\%) by {what}" + (" (published)." if suffix else ".")
    label = label or f"tab:k12vista-{mode.replace('_', '-')}-{grouping}{suffix}"
    lines = [
        r"\begin{table}[htbp]",
        r"  \centering",
        f"  \\caption{{{caption}}}",
        f"  \\label{{{label}}}",
        f"  \\begin{{tabular}}{{l{'r' * width}}}",
        r"    \toprule",
        f"    & \\multicolumn{{{width}}}{{c}}{{{MODE_TITLES[mode]}}} \\\\",
        f"    \\cmidrule(lr){{2-{width + 1}}}",
        f"    Model & {' & '.join(latex_escape(title) for _, title in columns)} \\\\",
        r"    \midrule",
        *body,
        r"    \bottomrule",
        r"  \end{tabular}",
    ]
    if any(any(partial) for _, _, partial in table):
        lines += [
            r"  \par\smallskip",
            r"  {\footnotesize $^\dagger$ Coverage below 100\,\%: mean over scored responses only.}",
        ]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
