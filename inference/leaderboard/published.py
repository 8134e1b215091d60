"""Numbers others published (papers, public leaderboards): read from CSV, shown beside ours."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from inference.leaderboard.core import (
    Cell,
    Leaderboard,
    PublishedScore,
    _entry_sort_key,
    _group_sort_key,
    _parse_mode,
    parse_group,
)
from inference.leaderboard.statistics import _build_entry


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
#: The lengths of inference.models.PublishedResult's columns: a longer value is its line's error, not
#: the database's refusal of the whole file (a 500 on PostgreSQL).
MAX_LENGTHS = {"model": 200, "source": 300}


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
        problems += [f"{column} is longer than {limit} characters" for column, limit in MAX_LENGTHS.items()
                     if len(values[column]) > limit]  # fmt: skip
        problems += [f"{column} holds a NUL character" for column in PUBLISHED_COLUMNS if "\x00" in values[column]]
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
    return Leaderboard(tuple(entries), leaderboard.question_set)
