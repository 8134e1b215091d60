"""A judge panel with a real majority (PIPELINE.md stage 7, PEM-800K labels).

N judge models label every step of some inference runs' chains through
step-by-step scoring runs (inference.scoring, one per run and judge). The
panel's job starts each scoring run's job as a part of itself, on its judge's
queue (io for HTTP, the GPU class queue for an offline engine, cpu for a
transformers judge), so the judges judge in parallel across workers, each split
into parts when large (run_parts); the panel's job parks until the last has
ended, then votes. Their labels are aligned onto the chains'
steps (``pem.chains.labels_from_scoring_run``), then ``vote`` decides each
step:

* a label needs ``threshold`` judges (default: a strict majority of the
  panel). The threshold is always more than half the panel, so two labels can
  never both win and nothing is settled by the order judges are listed in;
* a step where no label reaches it is NO_MAJORITY: it gets no panel label, is
  kept out of training (``ChainOfThought.objects.fully_decided_by``) and
  counted;
* a judge without a usable label for a step (its call failed or timed out,
  its output could not be read, its split did not cover the step) casts no
  vote there; it is counted per judge under ``missing_votes`` (the format
  filter's evidence), never guessed;
* the explanation is the designated explainer's when it voted with the
  majority, else the first majority judge's (panel order) that gave one; the
  vote records which (``PanelVote.explained_by``).

Panel, judges, threshold, explainer, scoring runs and every vote are stored
(PanelRun, PanelVote); decided labels are also ``StepLabel(source=PANEL,
rater=<panel name>)`` so agreement statistics read them with the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils.translation import gettext

from inference import run_parts, scoring
from inference.models import InferenceRun, Judgment, ModelEndpoint, Protocol, ScoringRun
from k12vista import job_text
from k12vista.job_text import failure_wording
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.models import Job
from k12vista.vocabulary import TAXONOMY_VERSION
from pem import agreement_store, chains
from pem.job_shapes import PanelParams, PanelResult
from pem.models import ChainOfThought, PanelRun, PanelVote, Step, StepLabel

JOB_KIND = "pem.panel"
JUDGES_FAILED = "pem.panel_judges_failed"
VOTE_CHUNK = 500  # chains per round of the vote: memory flat in the number of chains


class PanelError(ValueError):
    """A panel that cannot start; the message says why."""


def default_threshold(judges: int) -> int:
    return judges // 2 + 1


def check_panel(*, judges: Sequence[ModelEndpoint], threshold: int, explainer: str) -> None:
    names = [judge.name for judge in judges]
    if len(set(names)) != len(names):
        raise PanelError(gettext("each judge model can sit on the panel once"))
    if len(names) < threshold:
        raise PanelError(
            gettext("a threshold of %(threshold)s votes needs at least %(threshold)s judges; the panel has %(n)s")
            % {"threshold": threshold, "n": len(names)}
        )
    if threshold * 2 <= len(names):
        raise PanelError(
            gettext(
                "a threshold of %(threshold)s of %(n)s judges is not a majority: two labels could both reach it; "
                "use at least %(least)s"
            )
            % {"threshold": threshold, "n": len(names), "least": default_threshold(len(names))}
        )
    if explainer and explainer not in names:
        raise PanelError(gettext("the explainer %(name)s is not one of the panel's judges") % {"name": repr(explainer)})


@transaction.atomic
def start_panel(
    *, name: str, inference_runs: Sequence[InferenceRun], judges: Sequence[ModelEndpoint], user: Any,
    threshold: int | None = None, explainer: str = "", params: dict | None = None, protocol: str = Protocol.STUDIO,
) -> PanelRun:  # fmt: skip
    """Checks the panel, records it with one scoring run per inference run and
    judge, each in ``protocol`` (the studio's or the reference's, as any scoring
    run), and starts the panel's job. Refused (PanelError, ScoringError,
    EndpointError) before anything is saved."""
    name = name.strip()[:200]
    if not name:
        raise PanelError(gettext("a panel needs a name"))
    if PanelRun.objects.filter(name=name).exists():
        raise PanelError(gettext("a panel named %(name)s exists already") % {"name": repr(name)})
    if not inference_runs:
        raise PanelError(gettext("choose the inference runs whose chains the panel labels"))
    threshold = default_threshold(len(judges)) if threshold is None else threshold
    check_panel(judges=judges, threshold=threshold, explainer=explainer)
    panel = PanelRun.objects.create(name=name, judges=[j.name for j in judges], threshold=threshold,
                                    explainer=explainer, created_by=user)  # fmt: skip
    panel.inference_runs.set(inference_runs)
    method = ScoringRun.Method.JUDGE_STEPS
    for run in inference_runs:
        for judge in judges:
            title = f"{name} · {judge.name} · {run.name}"
            panel.scoring_runs.add(
                scoring.create_scoring_run(
                    inference_run=run,
                    judge=judge,
                    method=method,
                    user=user,
                    params=params,
                    name=title,
                    local_ok=True,  # each judge judges in a job of its own, on its kind's queue
                    protocol=protocol,
                )  # fmt: skip
            )
    panel.job = start_job(kind=JOB_KIND, user=user, params={"panel_run_id": panel.pk}, title=f"{name}")
    panel.save(update_fields=["job"])
    return panel


def restart_panel(*, panel: PanelRun, user: Any) -> Job:
    """Judges again what failed (call failed, unreadable output), then votes again."""
    if panel.job is not None and not panel.job.is_finished:
        raise PanelError(gettext("%(panel)s is still running") % {"panel": panel})
    Judgment.objects.filter(scoring_run__in=panel.scoring_runs.all(), status__in=scoring.FAILED_STATUSES).update(
        status=Judgment.Status.PENDING, error="", score=None
    )
    panel.job = start_job(
        kind=JOB_KIND, user=user, params={"panel_run_id": panel.pk}, title=job_text.title("again", name=panel)
    )
    panel.save(update_fields=["job"])
    return panel.job


@job_handler(JOB_KIND, queue=Job.Queue.IO, params=PanelParams, result=PanelResult)
def run_panel_job(job: Job, progress: Progress) -> dict:
    """Chains for every run (idempotent), then one job per scoring run (judge x run) as parts of
    this one, in parallel on their workers; once all have ended (it parks until then), their labels
    aligned and the vote. Safe to run again: the judges' jobs are started once per panel job, judged
    items are skipped and the labels and votes are replaced, never duplicated."""
    panel = PanelRun.objects.get(pk=job.params["panel_run_id"])
    runs = list(panel.scoring_runs.select_related("judge", "inference_run").order_by("id"))
    if not run_parts.has_parts(job):
        for inference_run in panel.inference_runs.all():
            chains.cots_from_run(inference_run=inference_run)
        with transaction.atomic():  # all the judges' jobs or none, queued when this commits
            for run in runs:
                scoring.start_judging(run, user=job.started_by, title=run.name, part_of=job)
    # Each judge's job stores its scoring run's slices (the leaderboard's) as it ends.
    run_parts.wait_for_parts(job, progress, failure=JUDGES_FAILED)
    progress(*run_parts.parts_progress(job.pk))
    labelled = {run.judge.name: chains.labels_from_scoring_run(scoring_run=run) for run in runs}
    counts = vote(panel)
    agreement_store.refresh_after_change()
    return {**counts, "labels": {name: report["labelled"] for name, report in labelled.items()}}


@failure_wording(JUDGES_FAILED)
def judges_failed_message(params: dict[str, Any]) -> str:
    return gettext("%(n)d of the panel's %(of)d judge jobs failed; nothing was voted; the first: %(error)s") % params


# --- the vote ---------------------------------------------------------------------------


def decide(votes: dict[str, str | None], *, threshold: int) -> str:
    """The label at least ``threshold`` judges gave, or "" when none did."""
    tally = Counter(label for label in votes.values() if label)
    if not tally:
        return ""
    label, count = tally.most_common(1)[0]
    return label if count >= threshold else ""


def explainer_of(panel: PanelRun, label: str, votes: dict[str, str | None], reasons: dict[str, str]) -> str:
    """Who explains a decided label: the designated explainer if it voted with
    the majority, else the first majority judge (panel order) with a reason."""
    majority = [judge for judge in panel.judges if votes.get(judge) == label]
    if panel.explainer in majority and reasons.get(panel.explainer):
        return panel.explainer
    return next((judge for judge in majority if reasons.get(judge)), majority[0])


def vote(panel: PanelRun) -> dict[str, Any]:
    """Decides every step of the panel's chains, replacing any earlier vote.
    The counts are stored on the panel and returned."""
    judges = list(panel.judges)
    scoring_runs = list(panel.scoring_runs.values_list("pk", flat=True))
    chains = ChainOfThought.objects.of_runs(panel.inference_runs.all()).order_by("id").values_list("pk", flat=True)
    counts: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    chain_ids = list(chains)
    for start in range(0, len(chain_ids), VOTE_CHUNK):
        chunk = chain_ids[start : start + VOTE_CHUNK]
        with transaction.atomic():
            _vote_chunk(panel, chunk, judges, scoring_runs, counts, missing, labels)
    result = {
        "judges": judges,
        "threshold": panel.threshold,
        "explainer": panel.explainer,
        "chains": len(chain_ids),
        "chains_fully_decided": counts["chains_fully_decided"],
        "chains_with_no_majority": counts["chains_with_no_majority"],
        "steps": counts["steps"],
        "decided": counts["decided"],
        "no_majority": counts["no_majority"],
        "missing_votes": {judge: missing[judge] for judge in judges},
        "labels": dict(sorted(labels.items())),
    }
    panel.counts = result
    panel.save(update_fields=["counts"])
    return result


def _vote_chunk(panel, chunk, judges, scoring_runs, counts, missing, labels) -> None:
    steps = list(Step.objects.filter(cot_id__in=chunk).order_by("cot_id", "position").values_list("pk", "cot_id"))
    given: dict[int, dict[str, tuple[str, str]]] = {}
    rows = StepLabel.objects.filter(step__cot_id__in=chunk, source=StepLabel.Source.MODEL, rater__in=judges,
                                    scoring_run_id__in=scoring_runs)  # fmt: skip
    for step_id, rater, label, explanation in rows.values_list("step_id", "rater", "label", "explanation"):
        given.setdefault(step_id, {})[rater] = (label, explanation)
    PanelVote.objects.filter(panel_run=panel, step__cot_id__in=chunk).delete()
    StepLabel.objects.filter(step__cot_id__in=chunk, source=StepLabel.Source.PANEL, rater=panel.name).delete()
    new_votes, new_labels = [], []
    undecided_chains = set()
    for step_id, cot_id in steps:
        by_judge = given.get(step_id, {})
        votes = {judge: by_judge[judge][0] if judge in by_judge else None for judge in judges}
        reasons = {judge: by_judge[judge][1] for judge in by_judge}
        for judge, given_label in votes.items():
            missing[judge] += given_label is None
        label = decide(votes, threshold=panel.threshold)
        counts["steps"] += 1
        if not label:
            counts["no_majority"] += 1
            undecided_chains.add(cot_id)
            new_votes.append(PanelVote(panel_run=panel, step_id=step_id, outcome=PanelVote.Outcome.NO_MAJORITY,
                                       votes=votes))  # fmt: skip
            continue
        counts["decided"] += 1
        labels[label] += 1
        explained_by = explainer_of(panel, label, votes, reasons)
        new_votes.append(PanelVote(panel_run=panel, step_id=step_id, outcome=PanelVote.Outcome.MAJORITY,
                                   label=label, votes=votes, explained_by=explained_by))  # fmt: skip
        new_labels.append(StepLabel(step_id=step_id, source=StepLabel.Source.PANEL, rater=panel.name[:200],
                                    label=label, explanation=reasons.get(explained_by, ""),
                                    taxonomy_version=TAXONOMY_VERSION))  # fmt: skip
    PanelVote.objects.bulk_create(new_votes, batch_size=1000)
    StepLabel.objects.bulk_create(new_labels, batch_size=1000)
    with_steps = {cot_id for _step, cot_id in steps}
    counts["chains_with_no_majority"] += len(undecided_chains)
    counts["chains_fully_decided"] += len(with_steps - undecided_chains)
