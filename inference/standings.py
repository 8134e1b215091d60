"""Leaderboards from the database: scoring runs become ScoredItems for
leaderboard.py, and published numbers are merged beside them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from django.db.models import Max, Prefetch

from inference import leaderboard
from inference.models import JudgedStep, Judgment, PublishedResult, Response, ScoringRun

MODE_OF_METHOD = {ScoringRun.Method.JUDGE_DIRECT: "direct", ScoringRun.Method.JUDGE_STEPS: "step_by_step"}


def model_label(run: ScoringRun) -> str:
    return run.inference_run.endpoint.name


def scored_items(run: ScoringRun) -> Iterator[leaderboard.ScoredItem]:
    """Every question of the inference run counts: a missing answer, a failed
    call or an output the parser did not understand is score None (coverage),
    never a silent drop and never a 0."""
    judgments = Judgment.objects.filter(scoring_run=run).prefetch_related(
        Prefetch("steps", queryset=JudgedStep.objects.order_by("position"))
    )
    by_response = {j.response_id: j for j in judgments}
    responses = Response.objects.filter(run=run.inference_run).select_related("question")
    model, mode = model_label(run), MODE_OF_METHOD[run.method]
    for response in responses.iterator(chunk_size=2000):
        judgment = by_response.get(response.pk)
        ok = judgment is not None and judgment.status == Judgment.Status.OK
        question = response.question
        yield leaderboard.ScoredItem(
            model=model, mode=mode, question_id=question.pk, subject=question.subject, grade=question.grade,
            qtype=question.qtype, score=judgment.score if ok else None,
            step_labels=tuple(s.label for s in judgment.steps.all()) if ok else (),
        )  # fmt: skip


def latest_scoring_runs() -> list[ScoringRun]:
    """The newest scoring run for each inference run and method."""
    newest = (
        ScoringRun.objects.values("inference_run", "method").annotate(last=Max("id")).values_list("last", flat=True)
    )
    return list(ScoringRun.objects.filter(id__in=list(newest)).select_related("inference_run__endpoint"))


def published_rows() -> list[leaderboard.PublishedRow]:
    """One published number per model, mode and group: when several sources
    give one, the newest import is shown (the others stay stored)."""
    newest: dict[tuple[str, str, str], PublishedResult] = {}
    for p in PublishedResult.objects.order_by("created", "id"):
        newest[(p.model, p.mode, p.group)] = p
    return [
        leaderboard.PublishedRow(model=p.model, mode=p.mode, group=p.group, score=p.score, source=p.source, line=0)
        for p in newest.values()
    ]


def standings(runs: Iterable[ScoringRun] | None = None) -> leaderboard.Leaderboard:
    runs = latest_scoring_runs() if runs is None else list(runs)
    items = [item for run in runs for item in scored_items(run)]
    return leaderboard.merge_published(leaderboard.build_leaderboard(items), published_rows())
