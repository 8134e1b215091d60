"""Progress per person over every kind of work the studio hands out, for the team page.

Each app registers its kinds of work when it loads (its AppConfig.ready), so the team page
counts OCR review, step correction, PEBench labelling, adjudication and audit ratings alike
without the annotation app reaching into the apps above it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from django.db.models import Count, Model, Q, QuerySet
from django.utils import timezone


@dataclass(frozen=True)
class WorkKind:
    code: str
    label: Any  # a lazy translation
    rows: Callable[[], QuerySet[Any]]  # the rows of this kind of work (a model with TimedWork fields)
    person: str  # the field naming who does it
    done: str  # the date-time field set when it is done
    held: bool = True  # whether a row exists before it is done (then "held" counts those rows)


@dataclass(frozen=True)
class Overall:
    """Where a whole body of work stands (items per stage), beside the per-person rows."""

    code: str
    label: Any
    counts: Callable[[], list[tuple[Any, int]]]  # (stage in words, items) in order


KINDS: dict[str, WorkKind] = {}
OVERALL: dict[str, Overall] = {}


def register(kind: WorkKind | Overall) -> None:
    if isinstance(kind, Overall):
        OVERALL[kind.code] = kind
    else:
        KINDS[kind.code] = kind


def overall_progress() -> list[dict]:
    return [{"code": o.code, "label": o.label, "counts": o.counts()} for o in OVERALL.values()]


def start_of_today() -> datetime:
    return timezone.make_aware(datetime.combine(timezone.localdate(), time.min))


def progress_by_person(*, now: datetime | None = None) -> list[dict]:
    """One row per person and kind of work: held, done, done today, done in the last 7 days, and the
    median active seconds per finished item (None where no time was recorded)."""
    now = now or timezone.now()
    today, week = start_of_today(), now - timedelta(days=7)
    rows = []
    for kind in KINDS.values():
        person = f"{kind.person}__username"
        finished = Q(**{f"{kind.done}__isnull": False})
        counts = (
            kind.rows().filter(**{f"{kind.person}__isnull": False})
            .values(person)
            .annotate(
                held=Count("pk", filter=~finished), done=Count("pk", filter=finished),
                done_today=Count("pk", filter=Q(**{f"{kind.done}__gte": today})),
                done_week=Count("pk", filter=Q(**{f"{kind.done}__gte": week})),
            )
        )  # fmt: skip
        seconds: dict[str, list[int]] = {}
        timed = kind.rows().filter(finished, active_seconds__isnull=False).values_list(person, "active_seconds")
        for name, value in timed.iterator():
            seconds.setdefault(name, []).append(value)
        for row in counts:
            name = row[person]
            if not row["held"] and not row["done"]:
                continue
            rows.append({
                "person": name, "kind": kind.code, "kind_label": kind.label,
                "held": row["held"] if kind.held else None, "done": row["done"], "done_today": row["done_today"],
                "done_week": row["done_week"],
                "median_seconds": round(statistics.median(seconds[name])) if name in seconds else None,
            })  # fmt: skip
    return sorted(rows, key=lambda r: (r["person"], list(KINDS).index(r["kind"])))


def model_rows(model: type[Model], **filters: Any) -> Callable[[], QuerySet[Any]]:
    return lambda: model._default_manager.filter(**filters)
