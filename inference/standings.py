"""Leaderboards from the database, aggregated by the database.

Every question of a scored inference run counts: a missing answer, a failed
call or an output the parser did not understand has no score (it lowers the
coverage), never a silent drop and never a 0. At the benchmark's scale (33,660
questions x 40 models x 2 modes = 2.7 million responses) the rows never come
into Python: three GROUP BY queries return, per scoring run and per slice of
questions with the same subject, stage and type (at most 45 slices a run),

* the number of responses (the items, from the inference run),
* the number, sum and sum of squares of the scores of usable judgments,
* the number of judged steps per label,

and :func:`inference.leaderboard.build_leaderboard_from_stats` combines the
slices into every leaderboard group (overall, stage, subject, type, cell).

Even so, joining millions of judgments to their answers and questions takes
seconds, too long for every page view. A scoring run's slices therefore go into
Django's cache once both jobs that wrote its rows (the scoring job and the
inference run's job) have finished: nothing else writes judgments, steps or
answers (a rescore or a retry starts a new job, which changes the key). Runs
still going, or with rows written without a job, are always computed fresh.
What the key cannot see is a question moved to another subject, grade or type
after scoring; cached slices expire after :data:`CACHE_SECONDS` (plus a spread
by run, so that they do not all expire at once), so such a move shows within
that time.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from django.core.cache import cache
from django.db.models import Count, F, FloatField, Max, Sum

from inference import leaderboard
from inference.models import JudgedStep, Judgment, PublishedResult, Response, ScoringRun
from k12vista.models import Job

logger = logging.getLogger(__name__)

MODE_OF_METHOD = {ScoringRun.Method.JUDGE_DIRECT: "direct", ScoringRun.Method.JUDGE_STEPS: "step_by_step"}
METHOD_OF_MODE = {mode: method for method, mode in MODE_OF_METHOD.items()}

Slice = tuple[int, str, str, str]  # (scoring run or inference run id, subject, stage, question type)


def model_label(run: ScoringRun) -> str:
    return run.inference_run.endpoint.name


def entry_keys(runs: list[ScoringRun]) -> dict[int, tuple[str, str]]:
    """(model, mode) of each scoring run. Two scoring runs of one model and
    mode (the same endpoint run twice) would be one row mixing two runs; each
    gets the inference run's id beside the model name instead."""
    keys = {run.pk: (model_label(run), MODE_OF_METHOD[run.method]) for run in runs}
    seen = defaultdict(int)
    for key in keys.values():
        seen[key] += 1
    return {
        run.pk: (f"{keys[run.pk][0]} (run {run.inference_run_id})", keys[run.pk][1])
        if seen[keys[run.pk]] > 1
        else keys[run.pk]
        for run in runs
    }


def _by_slice(rows, run_field: str, prefix: str) -> dict[Slice, dict]:
    fields = (run_field, f"{prefix}subject", f"{prefix}stage", f"{prefix}qtype")
    return {tuple(row[name] for name in fields): row for row in rows}


def slice_stats(runs: list[ScoringRun]) -> dict[int, list[leaderboard.GroupStats]]:
    """The per-slice aggregates of each scoring run, in three queries."""
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


CACHE_SECONDS = 3600
CACHE_SPREAD = 1800  # runs cached together expire over half an hour, a few per page view
SETTLED = {Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED}


def cache_key(run: ScoringRun) -> str | None:
    """Names a scoring run's slices while its rows cannot change; None while a
    job is still going or when rows were written without one."""
    jobs = (run.job, run.inference_run.job)
    if any(job is None or job.status not in SETTLED or job.finished_at is None for job in jobs):
        return None
    return "standings:v1:" + ":".join(
        [str(run.pk), *(f"{job.pk}-{job.status}-{job.finished_at.isoformat()}" for job in jobs)]
    )


def cached_slice_stats(runs: list[ScoringRun]) -> dict[int, list[leaderboard.GroupStats]]:
    """:func:`slice_stats`, from the cache where it can be, computing only the rest."""
    keys = {run.pk: cache_key(run) for run in runs}
    try:
        found = cache.get_many([key for key in keys.values() if key])
    except Exception:  # a cache that is down makes the page slow, not broken
        logger.warning("leaderboard cache unavailable; computing every run", exc_info=True)
        found = {}
    stats = {pk: found[key] for pk, key in keys.items() if key in found}
    missing = [run for run in runs if run.pk not in stats]
    if missing:
        fresh = slice_stats(missing)
        try:
            for run in missing:
                if keys[run.pk]:
                    cache.set(keys[run.pk], fresh[run.pk], CACHE_SECONDS + run.pk * 337 % CACHE_SPREAD)
        except Exception:
            logger.warning("leaderboard cache unavailable; slices not stored", exc_info=True)
        stats |= fresh
    return stats


def latest_scoring_runs(mode: str | None = None) -> list[ScoringRun]:
    """The newest scoring run for each inference run and method (of one mode, if given)."""
    runs = ScoringRun.objects.all()
    if mode is not None:
        runs = runs.filter(method=METHOD_OF_MODE[mode])
    newest = runs.values("inference_run", "method").annotate(last=Max("id")).values_list("last", flat=True)
    chosen = ScoringRun.objects.filter(id__in=list(newest))
    return list(chosen.select_related("inference_run__endpoint", "job", "inference_run__job"))


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


def standings(runs: Iterable[ScoringRun] | None = None, *, mode: str | None = None) -> leaderboard.Leaderboard:
    """The leaderboard of the given scoring runs (by default the newest of each
    inference run and method), with published numbers beside it. ``mode``
    limits both to one mode, which halves the work of a page that shows one."""
    if mode is not None and mode not in METHOD_OF_MODE:
        raise ValueError(f"mode must be one of {', '.join(leaderboard.MODES)}, got {mode!r}")
    if runs is None:
        runs = latest_scoring_runs(mode)
    else:
        runs = [r for r in runs if mode is None or MODE_OF_METHOD[r.method] == mode]
    keys = entry_keys(runs)
    stats = cached_slice_stats(runs) if runs else {}
    board = leaderboard.build_leaderboard_from_stats({keys[run.pk]: stats[run.pk] for run in runs})
    return leaderboard.merge_published(board, published_rows(mode))
