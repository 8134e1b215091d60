"""Leaderboards from the database: stored slices written when scoring finishes.

Which scoring run fills an entry
--------------------------------
An entry is one inference run (a model in one mode). It is filled by one
*finished* scoring run of it: the one a researcher pinned
(:func:`pin_scoring_run`), else the newest whose job finished. A scoring run
still going, failed or cancelled never fills an entry; it is listed beside the
entry it would have replaced (``RunInfo.not_counted``), and an inference run
with no finished scoring run at all is listed as waiting. A rescore of the
failed judgments reruns the same scoring run: its entry keeps the slices of its
last finished job until the rescore finishes. When no run is pinned and a newer
finished scoring run takes an entry from an earlier one, the entry says so
(``RunInfo.replaced``, with what differs) and the page offers the pin: never
silently. ``protocol`` keeps the runs scored in one protocol; every entry names its own.

One rule for time: the snapshot
-------------------------------
When a scoring job finishes, :func:`take_snapshot` aggregates the run (three
GROUP BY queries and one for the absent questions; the rows never come into
Python) into at most 45 slices of questions with the same subject, stage and
type, and stores them (:class:`~inference.models.BoardSnapshot`,
:class:`~inference.models.BoardSlice`) in the same transaction. Every page,
download and API answer reads those rows: four small queries whatever the
number of responses, right after a restart as well (no cache to warm). Each
entry thus uses the bank as it was when its judge scored it, with the subject,
grade, type and answers it was judged against; an edit made later changes no
entry until that run is scored again. Entries are never recomputed from the
live bank, so the board never mixes before and after.

Every question of a scored inference run counts: a missing answer, a failed
call or an output the parser did not understand has no score (it lowers the
coverage), never a silent drop and never a 0; a question of the run's question
set with no response row at all is *absent* and lowers it too.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.db.models import Count, F, FloatField, Sum
from django.utils import timezone

from annotation.models import Question
from inference import leaderboard
from inference.models import (
    BoardPin,
    BoardSlice,
    BoardSnapshot,
    JudgedStep,
    Judgment,
    PublishedResult,
    Response,
    ScoringRun,
)
from k12vista.models import Job

# Keyed by text: a run's stored ``method`` is a plain str.
MODE_OF_METHOD: dict[str, str] = {
    ScoringRun.Method.JUDGE_DIRECT: "direct",
    ScoringRun.Method.JUDGE_STEPS: "step_by_step",
}
METHOD_OF_MODE = {mode: method for method, mode in MODE_OF_METHOD.items()}

Slice = tuple[int, str, str, str]  # (scoring run or inference run id, subject, stage, question type)


class BoardError(ValueError):
    """A board choice that cannot be made; the message says why."""


def model_label(run: ScoringRun) -> str:
    return run.inference_run.endpoint.name


def entry_keys(runs: list[ScoringRun]) -> dict[int, tuple[str, str]]:
    """(model, mode) of each scoring run. Two inference runs of one model and
    mode (the same endpoint run twice) would be one row mixing two runs; each
    gets the inference run's id beside the model name instead."""
    keys = {run.pk: (model_label(run), MODE_OF_METHOD[run.method]) for run in runs}
    seen = Counter(keys.values())
    return {
        run.pk: (f"{keys[run.pk][0]} (run {run.inference_run_id})", keys[run.pk][1])
        if seen[keys[run.pk]] > 1
        else keys[run.pk]
        for run in runs
    }


def question_set_text(filters: dict) -> str:
    """A run's question set (its frozen bank filters) as text; "all questions" when unfiltered."""
    shown = [f"{name}={value}" for name, value in sorted(filters.items()) if value not in (None, "", [])]
    return ", ".join(shown) or "all questions"


# --------------------------------------------------------------------------- aggregation (in a job)


def _by_slice(rows, run_field: str, prefix: str) -> dict[Slice, dict]:
    fields = (run_field, f"{prefix}subject", f"{prefix}stage", f"{prefix}qtype")
    return {tuple(row[name] for name in fields): row for row in rows}


def slice_stats(runs: list[ScoringRun]) -> dict[int, list[leaderboard.GroupStats]]:
    """The per-slice aggregates of each scoring run, in three queries (absent
    questions not included: :func:`absent_by_slice`)."""
    scoring_ids = [run.pk for run in runs]
    inference_ids = {run.inference_run_id for run in runs}
    q = "question__"
    items = (
        Response.objects.filter(run__in=inference_ids)
        .values("run", f"{q}subject", f"{q}stage", f"{q}qtype")
        .annotate(items=Count("id"))
        .order_by()
    )
    rq = "response__question__"
    scored = (
        # response__run is implied by scoring_run; said again, it lets the
        # planner read one run's answers by index instead of scanning them all.
        Judgment.objects.filter(scoring_run__in=scoring_ids, response__run__in=inference_ids)
        .filter(status=Judgment.Status.OK, score__isnull=False)
        .values("scoring_run", f"{rq}subject", f"{rq}stage", f"{rq}qtype")
        .annotate(n=Count("id"), total=Sum("score"), squares=Sum(F("score") * F("score"), output_field=FloatField()))
        .order_by()
    )
    jq = "judgment__response__question__"
    labelled = (
        JudgedStep.objects.filter(judgment__scoring_run__in=scoring_ids, judgment__response__run__in=inference_ids)
        .filter(judgment__status=Judgment.Status.OK)
        .values("judgment__scoring_run", f"{jq}subject", f"{jq}stage", f"{jq}qtype", "label")
        .annotate(count=Count("id"))
        .order_by()
    )
    items_by = _by_slice(items, "run", q)
    scored_by = _by_slice(scored, "scoring_run", rq)
    labels_by: dict[Slice, dict[str, int]] = defaultdict(dict)
    for row in labelled:
        key = (row["judgment__scoring_run"], row[f"{jq}subject"], row[f"{jq}stage"], row[f"{jq}qtype"])
        labels_by[key][row["label"]] = row["count"]

    stats: dict[int, list[leaderboard.GroupStats]] = {}
    for run in runs:
        parts = []
        for (run_id, subject, stage, qtype), counted in items_by.items():
            if run_id != run.inference_run_id:
                continue
            key = (run.pk, subject, stage, qtype)
            found = scored_by.get(key, {})
            parts.append(
                leaderboard.GroupStats(
                    subject, stage, qtype, items=counted["items"], n=found.get("n", 0),
                    total=found.get("total") or 0.0, squares=found.get("squares") or 0.0,
                    labels=labels_by.get(key, {}),
                )
            )  # fmt: skip
        stats[run.pk] = parts
    return stats


def question_set(run: ScoringRun):
    """The questions of the run's question set: its frozen filters over the
    questions that existed when the inference run started."""
    inference_run = run.inference_run
    return Question.objects.matching(inference_run.filters).filter(created__lte=inference_run.created)


def absent_by_slice(run: ScoringRun) -> dict[tuple[str, str, str], int]:
    """Questions of the run's question set with no response row, per slice."""
    answered = Response.objects.filter(run=run.inference_run_id).values("question")
    rows = (
        question_set(run)
        .exclude(id__in=answered)
        .values("subject", "stage", "qtype")
        .annotate(count=Count("id", distinct=True))
        .order_by()
    )
    return {(row["subject"], row["stage"], row["qtype"]): row["count"] for row in rows}


def snapshot_stats(run: ScoringRun) -> list[leaderboard.GroupStats]:
    """What :func:`take_snapshot` stores: every slice with responses or absent questions."""
    parts = {(p.subject, p.stage, p.qtype): p for p in slice_stats([run])[run.pk]}
    for key, count in absent_by_slice(run).items():
        part = parts.get(key) or leaderboard.GroupStats(*key)
        parts[key] = replace(part, absent=count)
    return list(parts.values())


@transaction.atomic
def take_snapshot(run: ScoringRun, *, job: Job | None = None) -> BoardSnapshot:
    """Stores the run's slices as they are now, replacing any earlier snapshot
    of it in one transaction (a reader sees the old or the new, never half).
    Called when a scoring job finishes; ``manage.py leaderboard_snapshots``
    takes those of runs scored before the board stored them."""
    run = ScoringRun.objects.select_related("inference_run").get(pk=run.pk)
    parts = snapshot_stats(run)
    BoardSnapshot.objects.filter(scoring_run=run).delete()
    snapshot = BoardSnapshot.objects.create(
        scoring_run=run, job=job if job is not None else run.job, question_set=run.inference_run.filters
    )
    BoardSlice.objects.bulk_create(
        BoardSlice(
            snapshot=snapshot,
            subject=p.subject,
            stage=p.stage,
            qtype=p.qtype,
            items=p.items,
            absent=p.absent,
            n=p.n,
            total=p.total,
            squares=p.squares,
            labels=dict(p.labels),
        )  # fmt: skip
        for p in parts
    )
    return snapshot


def runs_without_snapshot() -> list[ScoringRun]:
    """Scoring runs whose last job finished (or that have none) but that have no stored slices."""
    runs = ScoringRun.objects.filter(board_snapshot__isnull=True).select_related("job")
    return [run for run in runs if run.job is None or run.job.status == Job.Status.SUCCEEDED]


# --------------------------------------------------------------------------- choosing (every read)


# A scoring run whose judging finished with no slices stored for the board (scored inside another
# job before that job stored them, e.g. a judge panel's): why it is not on the board, never "succeeded".
NO_SNAPSHOT = "no_snapshot"


def status_of(run: ScoringRun) -> str:
    """Why the board does or does not use the scoring run: its job's status, or NO_SNAPSHOT."""
    stored = hasattr(run, "board_snapshot")
    if run.job is None or run.job.status == Job.Status.SUCCEEDED:
        return Job.Status.SUCCEEDED if stored else NO_SNAPSHOT
    return run.job.status


def differences(newer: ScoringRun, older: ScoringRun) -> tuple[str, ...]:
    """What makes two scoring runs of one inference run score differently: the judge, the judge
    prompts (their content hashes), the protocol."""

    def prompt_hashes(run: ScoringRun) -> dict:
        return {q: p.get("hash") for q, p in run.provenance.get("prompts", {}).items()}

    found = []
    if newer.judge_id != older.judge_id:
        found.append("judge")
    if prompt_hashes(newer) != prompt_hashes(older):
        found.append("prompts")
    if newer.protocol != older.protocol:
        found.append("protocol")
    return tuple(found)


@dataclass(frozen=True)
class Choice:
    """The scoring run that fills one inference run's entry, and those beside it."""

    run: ScoringRun
    snapshot: BoardSnapshot
    pinned: bool
    not_counted: tuple[leaderboard.NotCounted, ...]
    finished: tuple[ScoringRun, ...] = ()  # every scoring run that could fill the entry, newest first

    @property
    def replaced(self) -> leaderboard.Replaced | None:
        """The finished scoring run the newest took the entry from, when none is pinned."""
        if self.pinned or len(self.finished) < 2 or self.finished[0] is not self.run:
            return None
        older = self.finished[1]
        return leaderboard.Replaced(older.pk, older.name, differences(self.run, older))


@dataclass(frozen=True)
class Waiting:
    """An inference run with scoring runs but none finished: not on the board."""

    inference_run: int
    model: str
    mode: str
    not_counted: tuple[leaderboard.NotCounted, ...]


def _not_counted(run: ScoringRun, status: str | None = None) -> leaderboard.NotCounted:
    return leaderboard.NotCounted(run.pk, run.name, status or status_of(run))


def choose(mode: str | None = None, protocol: str | None = None) -> tuple[list[Choice], list[Waiting]]:
    """Per inference run (of one mode, and scored in one protocol, if given): the pinned scoring
    run if it has stored slices, else the newest that has; the others that are not finished are
    listed beside it. Two queries."""
    runs = ScoringRun.objects.select_related("inference_run__endpoint", "job", "board_snapshot").order_by("-id")
    if mode is not None:
        runs = runs.filter(method=METHOD_OF_MODE[mode])
    if protocol is not None:
        runs = runs.filter(protocol=protocol)
    pins = dict(BoardPin.objects.values_list("inference_run", "scoring_run"))
    by_inference: dict[tuple[int, str], list[ScoringRun]] = defaultdict(list)
    for run in runs:
        by_inference[(run.inference_run_id, run.method)].append(run)

    choices, waiting = [], []
    for (inference_id, method), group in by_inference.items():  # newest first within each group
        finished = [run for run in group if hasattr(run, "board_snapshot")]
        pinned = next((run for run in finished if run.pk == pins.get(inference_id)), None)
        chosen = pinned or (finished[0] if finished else None)
        beside = []
        for run in group:
            status = status_of(run)
            if run is chosen:
                if status != Job.Status.SUCCEEDED:  # being rescored, or its rescore failed
                    beside.append(_not_counted(run, f"rescore {status}"))
            elif not hasattr(run, "board_snapshot") or status != Job.Status.SUCCEEDED:
                beside.append(_not_counted(run))
        if chosen is None:
            first = group[0]
            waiting.append(Waiting(inference_id, model_label(first), MODE_OF_METHOD[method], tuple(beside)))
        else:
            choices.append(Choice(chosen, chosen.board_snapshot, pinned is not None, tuple(beside), tuple(finished)))
    return choices, waiting


def stored_stats(snapshots: list[BoardSnapshot]) -> dict[int, list[leaderboard.GroupStats]]:
    """The stored slices of the given snapshots, in one query."""
    stats: dict[int, list[leaderboard.GroupStats]] = {s.pk: [] for s in snapshots}
    fields = ("snapshot", "subject", "stage", "qtype", "items", "n", "total", "squares", "labels", "absent")
    for row in BoardSlice.objects.filter(snapshot__in=list(stats)).values_list(*fields).order_by():
        snapshot, subject, stage, qtype, items, n, total, squares, labels, absent = row
        stats[snapshot].append(leaderboard.GroupStats(subject, stage, qtype, items, n, total, squares, labels, absent))
    return stats


def published_rows(mode: str | None = None) -> list[leaderboard.PublishedRow]:
    """One published number per model, mode and group: when several sources
    give one, the newest import is shown (the others stay stored)."""
    newest: dict[tuple[str, str, str], PublishedResult] = {}
    rows = PublishedResult.objects.order_by("created", "id")
    for p in rows.filter(mode=mode) if mode is not None else rows:
        newest[(p.model, p.mode, p.group)] = p
    return [
        leaderboard.PublishedRow(model=p.model, mode=p.mode, group=p.group, score=p.score, source=p.source, line=0)
        for p in newest.values()
    ]


def _set_key(filters: dict) -> str:
    return json.dumps({k: v for k, v in filters.items() if v not in (None, "", [])}, sort_keys=True)


def board_from_choices(choices: list[Choice], *, release: int | None = None) -> leaderboard.Leaderboard:
    """The leaderboard of the chosen runs, from their stored slices, each entry
    naming its runs; the board's question set is the one most entries cover, or,
    on a release's board, that release (runs over it with more filters are marked)."""
    keys = entry_keys([c.run for c in choices])
    stats = stored_stats([c.snapshot for c in choices])
    board = leaderboard.build_leaderboard_from_stats({keys[c.run.pk]: stats[c.snapshot.pk] for c in choices})
    sets = Counter(_set_key(c.snapshot.question_set) for c in choices)
    if release is not None:
        board_set = _set_key({"release": release})
    else:  # most common first; ties go to the wider set (fewer filters), then the text
        board_set = min(sets, key=lambda key: (-sets[key], len(json.loads(key)), key)) if sets else ""
    info = {}
    for c in choices:
        info[keys[c.run.pk]] = leaderboard.RunInfo(
            inference_run=c.run.inference_run_id, inference_run_name=c.run.inference_run.name,
            scoring_run=c.run.pk, scoring_run_name=c.run.name, snapshot_at=c.snapshot.taken_at.isoformat(),
            question_set=question_set_text(c.snapshot.question_set),
            other_question_set=_set_key(c.snapshot.question_set) != board_set, pinned=c.pinned,
            not_counted=c.not_counted, protocol=c.run.protocol, replaced=c.replaced,
        )  # fmt: skip
    entries = tuple(replace(entry, run=info[entry.key]) for entry in board.entries)
    return leaderboard.Leaderboard(entries, question_set_text(json.loads(board_set)) if board_set else "")


def standings(mode: str | None = None) -> leaderboard.Leaderboard:
    """The leaderboard (of one mode, if given) from stored slices, with
    published numbers beside it: a few small queries, whatever the number of
    responses behind it."""
    return board_state(mode).board


@dataclass(frozen=True)
class BoardState:
    board: leaderboard.Leaderboard
    waiting: list[Waiting]
    finished: dict[int, tuple[ScoringRun, ...]]  # inference run id -> the scoring runs that could fill its entry
    release: int | None = None  # the board covers this release only
    left_out: int = 0  # entries over other question sets, not on a release's board
    protocol: str | None = None  # the board ranks runs scored in this protocol only

    @property
    def protocols(self) -> list[str]:
        """The protocols of the entries on the board: more than one is said on every page that ranks them."""
        return sorted({entry.run.protocol for entry in self.board.entries if entry.run is not None})


def covers_release(question_set: dict, release: int) -> bool:
    return str(question_set.get("release", "")) == str(release)


def board_state(mode: str | None = None, *, release: int | None = None, protocol: str | None = None) -> BoardState:
    """:func:`standings`, the inference runs waiting for a finished scoring
    run, and the finished scoring runs a researcher may pin. With ``release``,
    only runs over that release are on the board (published numbers stay beside:
    they name their own data), and how many others were left out is counted."""
    if mode is not None and mode not in METHOD_OF_MODE:
        raise ValueError(f"mode must be one of {', '.join(leaderboard.MODES)}, got {mode!r}")
    choices, waiting = choose(mode, protocol)
    left_out = 0
    if release is not None:
        kept = [c for c in choices if covers_release(c.snapshot.question_set, release)]
        left_out, choices = len(choices) - len(kept), kept
    board = leaderboard.merge_published(board_from_choices(choices, release=release), published_rows(mode))
    finished = {c.run.inference_run_id: c.finished for c in choices}
    return BoardState(board, waiting, finished, release=release, left_out=left_out, protocol=protocol)


def live_standings(runs: Iterable[ScoringRun]) -> leaderboard.Leaderboard:
    """The leaderboard of the given scoring runs computed from their rows now
    (what a snapshot of each would store), for checks and tools; pages never call it."""
    runs = list(runs)
    keys = entry_keys(runs)
    return leaderboard.build_leaderboard_from_stats({keys[run.pk]: snapshot_stats(run) for run in runs})


# --------------------------------------------------------------------------- choosing by hand


@transaction.atomic
def pin_scoring_run(*, scoring_run: ScoringRun, user: Any) -> BoardPin:
    """Makes this finished scoring run represent its inference run on the board."""
    if not BoardSnapshot.objects.filter(scoring_run=scoring_run).exists():
        raise BoardError(
            f"{scoring_run} has not finished scoring; only a finished scoring run can represent a model on the board"
        )
    pin, _created = BoardPin.objects.update_or_create(
        inference_run_id=scoring_run.inference_run_id,
        defaults={"scoring_run": scoring_run, "pinned_by": user, "pinned_at": timezone.now()},
    )
    return pin


def unpin(*, inference_run_id: int) -> bool:
    """Back to the newest finished scoring run; False when nothing was pinned."""
    deleted, _rows = BoardPin.objects.filter(inference_run_id=inference_run_id).delete()
    return bool(deleted)
