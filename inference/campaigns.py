"""Campaigns: many models answering one question set (PIPELINE.md stage 7).

A researcher picks a question set (a run's filters), the endpoints (the paper
used about forty models), the mode and the sampling, and starts one campaign:
one inference run per endpoint, each its own job, all with the same frozen
question set, mode, sampling and seed. The campaign shows them together:
progress, failures and tokens spent, per model and in total. The per-endpoint
limit holds across the runs (inference.calls), so two endpoints on one server
never get more than its max_concurrency between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, Sum

from inference import services
from inference.models import Campaign, InferenceRun, ModelEndpoint, Response
from k12vista.models import Job


class CampaignError(ValueError):
    """A campaign that cannot start; the message says why."""


@transaction.atomic
def start_campaign(
    *, name: str, endpoints: list[ModelEndpoint], mode: str, filters: dict, user: Any,
    input_form: str = InferenceRun.InputForm.IMAGES, params: dict | None = None, seed: int | None = None,
) -> Campaign:  # fmt: skip
    """Records the campaign and starts one run per endpoint, all or none: an
    endpoint that cannot run (switched off, key missing) refuses the campaign
    before any job is queued (jobs are queued when the transaction commits)."""
    name = name.strip()[:200]
    if not name:
        raise CampaignError("a campaign needs a name")
    if not endpoints:
        raise CampaignError("choose at least one endpoint")
    if len({endpoint.pk for endpoint in endpoints}) != len(endpoints):
        raise CampaignError("each endpoint can run once in a campaign")
    if mode not in InferenceRun.Mode.values:
        raise CampaignError(f"unknown mode {mode!r}")
    campaign = Campaign.objects.create(name=name, filters=filters, mode=mode, input_form=input_form,
                                       params=params or {}, seed=seed, created_by=user)  # fmt: skip
    for endpoint in endpoints:
        run = services.start_inference_run(endpoint=endpoint, mode=mode, filters=filters, user=user,
                                           input_form=input_form, params=params, seed=seed,
                                           name=f"{name} · {endpoint.name}")  # fmt: skip
        run.campaign = campaign
        run.save(update_fields=["campaign"])
    return campaign


def retry_failures(*, campaign: Campaign, user: Any) -> int:
    """Asks the failed questions of every finished run again; returns how many runs restarted."""
    restarted = 0
    for run in campaign.runs.select_related("job", "endpoint"):
        finished = run.job is None or run.job.is_finished
        if finished and run.responses.filter(status=Response.Status.FAILED).exists():
            services.retry_failed(run=run, user=user)
            restarted += 1
    return restarted


def answered_percent(ok: int, failed: int, total: int) -> int:
    """Questions answered or failed for good, in % of the run's (or campaign's) questions."""
    return round(100 * (ok + failed) / total) if total else 0


@dataclass
class RunRow:
    run: InferenceRun
    job: Job | None
    ok: int
    failed: int
    pending: int
    total: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def percent(self) -> int:
        return answered_percent(self.ok, self.failed, self.total)


@dataclass
class Summary:
    rows: list[RunRow]
    ok: int
    failed: int
    pending: int
    total: int
    prompt_tokens: int
    completion_tokens: int
    finished: bool

    @property
    def percent(self) -> int:
        return answered_percent(self.ok, self.failed, self.total)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "failed": self.failed, "pending": self.pending, "total": self.total,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "finished": self.finished, "percent": self.percent,
            "runs": [
                {"id": r.run.pk, "name": r.run.name, "endpoint": r.run.endpoint.name,
                 "status": r.job.status if r.job else None, "ok": r.ok, "failed": r.failed, "pending": r.pending,
                 "total": r.total, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens}
                for r in self.rows
            ],
        }  # fmt: skip


def summary(campaign: Campaign) -> Summary:
    """Every run's counts and tokens in one query (GROUP BY run), and the totals.

    A run whose job has not created its rows yet counts the campaign's
    question count as pending, so the bar does not jump back."""
    expected = {}
    runs = (
        campaign.runs.select_related("endpoint", "job")
        .annotate(
            n_ok=Count("responses", filter=Q(responses__status=Response.Status.OK)),
            n_failed=Count("responses", filter=Q(responses__status=Response.Status.FAILED)),
            n_total=Count("responses"),
            n_prompt=Sum("responses__prompt_tokens"),
            n_completion=Sum("responses__completion_tokens"),
        )
        .order_by("endpoint__name")
    )
    rows = []
    for run in runs:
        expected[run.pk] = (run.provenance.get("questions") or {}).get("count", 0)
        total = max(run.n_total, expected[run.pk])
        rows.append(RunRow(run=run, job=run.job, ok=run.n_ok, failed=run.n_failed,
                           pending=total - run.n_ok - run.n_failed, total=total,
                           prompt_tokens=run.n_prompt or 0, completion_tokens=run.n_completion or 0))  # fmt: skip
    return Summary(
        rows=rows,
        ok=sum(r.ok for r in rows),
        failed=sum(r.failed for r in rows),
        pending=sum(r.pending for r in rows),
        total=sum(r.total for r in rows),
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        completion_tokens=sum(r.completion_tokens for r in rows),
        finished=all(r.job is None or r.job.is_finished for r in rows),
    )
