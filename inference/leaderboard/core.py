"""The leaderboard's vocabulary: groups, the input item and the output types."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

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

FORMAT = "k12vista-leaderboard.v2"
READABLE_FORMATS = ("k12vista-leaderboard.v1", FORMAT)
MODES = ("direct", "step_by_step")
ERROR_CODES = tuple(code for code in LABEL_CODES if code != CORRECT)
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


def _grid_group(qtype: str, subject: str, grade: int) -> str:
    """One cell of the paper's tables: a question type within a subject-grade tag."""
    return f"grid:{QuestionType(qtype).value}:{release_tag(subject, grade)}"


def _tag_sort_key(tag: str) -> tuple[int, int]:
    subject, stage = parse_release_tag(tag)
    return list(Subject).index(subject), STAGE_LAST_GRADE[stage]


def tag_of(group: str) -> str | None:
    """The subject-grade tag of a ``cell:`` or ``grid:`` group, else None."""
    if group.startswith("cell:"):
        return group.removeprefix("cell:")
    if group.startswith("grid:"):
        return group.rsplit(":", 1)[1]
    return None


def in_release(group: str) -> bool:
    """False for a cell or grid group whose tag is not one of the release's
    eleven (primary physics, say): such groups are shown in their own columns,
    marked, everywhere (page, CSV, JSON, LaTeX); they count in overall, stage,
    subject and type like every other item."""
    tag = tag_of(group)
    return tag is None or tag in RELEASE_TAGS


# The groups every entry has, in display order; cells outside the release's
# eleven (such as primary physics) are appended when data or published rows use them.
TYPES = tuple(t.value for t in QuestionType)
ROLLUP_GROUPS = (
    OVERALL,
    *(_stage_group(s) for s in Stage),
    *(_subject_group(s) for s in Subject),
    *(_type_group(t) for t in QuestionType),
)
CELL_GROUPS = tuple(f"cell:{tag}" for tag in RELEASE_TAGS)
GRID_GROUPS = tuple(f"grid:{qtype}:{tag}" for qtype in TYPES for tag in RELEASE_TAGS)
SCORE_GROUPS = (*ROLLUP_GROUPS, *CELL_GROUPS, *GRID_GROUPS)
ERROR_GROUPS = SCORE_GROUPS  # error-type distributions exist for every group, cells and grid included


@cache
def _group_sort_key(group: str) -> tuple:
    """Roll-ups, then the release's cells, cells outside it, then the grid by
    type, each type's release tags before the tags outside it."""
    if group in ROLLUP_GROUPS:
        return 0, ROLLUP_GROUPS.index(group)
    tag = tag_of(group) or ""
    inside = tag in RELEASE_TAGS
    tag_key = (RELEASE_TAGS.index(tag), 0) if inside else _tag_sort_key(tag)
    if group.startswith("cell:"):
        return 1, not inside, tag_key
    return 2, TYPES.index(group.split(":")[1]), not inside, tag_key


def parse_group(text: str) -> str:
    """Canonical group key from ``overall``, ``stage:primary``, ``subject:math``,
    ``type:multiple_choice`` (the Chinese type name is accepted too),
    ``cell:math-g9`` or ``grid:multiple_choice:math-g9``. Raises ValueError naming the text."""
    raw = text.strip()
    kind, sep, value = raw.partition(":")
    kind, value = kind.strip().lower(), value.strip()

    def canonical_tag(tag: str) -> str:
        subject, stage = parse_release_tag(tag.lower())
        canonical = release_tag(subject, STAGE_LAST_GRADE[stage])
        if canonical != tag.lower():
            raise ValueError(tag)
        return canonical

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
            return f"cell:{canonical_tag(value)}"
        elif kind == "grid":
            qtype, _sep, tag = value.rpartition(":")
            qtype = question_type_from_name(qtype.lower() if qtype.isascii() else qtype)
            return f"grid:{qtype.value}:{canonical_tag(tag)}"
    except ValueError:
        pass
    raise ValueError(
        f"unknown group {text!r} (expected overall, stage:primary, subject:math, type:multiple_choice, "
        "cell:math-g9 or grid:multiple_choice:math-g9)"
    )


def _parse_mode(text: str) -> str:
    mode = "_".join(text.strip().lower().replace("-", " ").split())
    if mode not in MODES:
        raise ValueError(f"unknown mode {text!r} (expected direct or step_by_step)")
    return mode


@cache
def groups_of(subject: str, stage: str, qtype: str) -> tuple[str, ...]:
    """Every group an item of this subject, stage and type counts in."""
    grade = STAGE_LAST_GRADE[Stage(stage)]
    return (
        OVERALL,
        _stage_group(stage),
        _subject_group(subject),
        _type_group(qtype),
        _cell_group(subject, grade),
        _grid_group(qtype, subject, grade),
    )


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


@dataclass(frozen=True)
class GroupStats:
    """What a database aggregation returns for one (model, mode) and one slice
    of questions with the same subject, stage and type: the finest grouping
    every leaderboard group is a union of.

    ``items`` counts every response (scored or not), ``n`` the scored ones,
    ``total`` and ``squares`` are the sums of their scores and squared scores;
    ``labels`` counts the labelled steps of scored responses by label code,
    CS included; ``absent`` counts questions of the run's question set with no
    response row at all."""

    subject: str
    stage: str
    qtype: str
    items: int = 0
    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    labels: Mapping[str, int] = field(default_factory=dict)
    absent: int = 0


# --------------------------------------------------------------------------- output


@dataclass(frozen=True)
class Cell:
    """The mean score of one group. ``n`` scored items, ``unscored`` items whose
    score is None, ``absent`` questions of the question set with no row."""

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
    """A number someone else published (0-1), shown beside our runs, never mixed in."""

    score: float
    source: str


@dataclass(frozen=True)
class NotCounted:
    """A scoring run of the same inference run that does not fill the entry:
    still going, failed, cancelled, or finished but not chosen (another is pinned)."""

    scoring_run: int
    name: str
    status: str  # a job status, or "rescore <status>" for the chosen run being scored again


@dataclass(frozen=True)
class RunInfo:
    """Which data an entry covers: its inference run and the scoring run whose
    stored slices fill it, when those slices were taken, and its question set."""

    inference_run: int
    inference_run_name: str
    scoring_run: int
    scoring_run_name: str
    snapshot_at: str  # ISO 8601, when the scoring run's slices were written
    question_set: str  # the run's frozen filters, as text ("all questions" when empty)
    other_question_set: bool = False  # differs from the board's question set
    pinned: bool = False
    not_counted: tuple[NotCounted, ...] = ()
    protocol: str = "studio"  # how its scoring run asked the judge and read it (inference.models.Protocol)
    # Not pinned, and a newer finished scoring run took the entry from an earlier one: that one,
    # and what differs between the two ("judge", "prompts", "protocol"), so it is never silent.
    replaced: Replaced | None = None


@dataclass(frozen=True)
class Replaced:
    scoring_run: int
    name: str
    differs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Entry:
    model: str
    mode: str
    cells: dict[str, Cell]
    errors: dict[str, ErrorDistribution]
    published: dict[str, PublishedScore] = field(default_factory=dict)
    run: RunInfo | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.model, self.mode


@dataclass(frozen=True)
class Leaderboard:
    """Entries sorted by model name, then mode (direct before step_by_step).
    ``question_set`` is the board's (the one most entries cover), when known."""

    entries: tuple[Entry, ...] = ()
    question_set: str = ""

    def entry(self, model: str, mode: str) -> Entry | None:
        return next((e for e in self.entries if e.key == (model, mode)), None)

    def for_mode(self, mode: str) -> list[Entry]:
        return [e for e in self.entries if e.mode == mode]


def _entry_sort_key(key: tuple[str, str]) -> tuple[str, int]:
    return key[0], MODES.index(key[1])


def label_codes(labels: Mapping[str, int]) -> dict[str, int]:
    """Label counts keyed by code (names accepted)."""
    out: dict[str, int] = {}
    for name, count in labels.items():
        code = name if name in LABEL_CODES else label_from_name(name).code
        out[code] = out.get(code, 0) + count
    return out
