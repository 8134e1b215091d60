"""Model calls per endpoint from the rows they leave behind, for the jobs page's
dashboard (registered with k12vista.metrics in InferenceConfig.ready).

Every call of a run ends in a row stamped ``finished`` (an answer, a judgment, an
assist result), so the database counts the calls of every worker in the cluster,
where a process's Prometheus counters know only its own. Only runs whose job is
running or ended within the window are looked at, so the count reads the rows of a
few runs through their (run, status) index, never a scan of millions of answers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Q

from inference.models import AssistResult, AssistRun, InferenceRun, Judgment, Response, ScoringRun
from k12vista.models import Job


def calls_ended_since(since: datetime) -> Iterable[tuple[str, int]]:
    """(endpoint name, calls that ended since ``since``), one pair per endpoint."""
    live = Q(job__status=Job.Status.RUNNING) | Q(job__finished_at__gte=since)
    counts: Counter[str] = Counter()
    sources = (
        (Response, InferenceRun, "run", "run__endpoint__name"),
        (Judgment, ScoringRun, "scoring_run", "scoring_run__judge__name"),
        (AssistResult, AssistRun, "run", "run__endpoint__name"),
    )
    for call_model, run_model, run_field, endpoint_name in sources:
        runs = run_model.objects.filter(live).values("pk")
        rows = (
            call_model.objects.filter(**{f"{run_field}__in": runs}, finished__gte=since)  # type: ignore[attr-defined]
            .order_by()
            .values_list(endpoint_name)
            .annotate(n=Count("id"))
        )
        for name, n in rows:
            counts[name] += n
    return counts.items()
