"""The agreement report over all chains as a stored result (issue 15: no heavy
work in a request).

``pem.reports.agreement_report`` reads every label of its scope; at a million
labels that is seconds of work and hundreds of MiB. A job (``pem.agreement``)
computes it and keeps it in ``StoredAgreement``; the page reads the stored JSON
(flat memory whatever the label count) and says when it was computed, whether
the labels changed since (a cheap fingerprint: counts and last ids), and lets a
reader start a new computation. The things that change labels (a PEBench
import, labels from scoring, a judge panel, labelling submissions and
adjudications) call ``refresh_after_change``, which starts the job itself,
debounced: at most one queued or running per scope, none while the stored report
is fresh, and for submissions none while it is younger than
``AGREEMENT_REFRESH_SECONDS``. Below ``AGREEMENT_INLINE_LABELS`` labels the
page may still compute a stale or missing report in the request (a test
database, a small lab): it is quick there, and nothing is written by a GET.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Max
from django.utils import timezone

from k12vista import job_text
from k12vista.jobs import start_job
from k12vista.models import Job
from pem.models import ChainOfThought, PEBenchItem, Step, StepLabel, StoredAgreement
from pem.reports import agreement_report

KIND = "pem.agreement"
SCOPES = StoredAgreement.Scope.values
LOCK_KEY = 1_512_770_401  # the PostgreSQL advisory lock that serialises starting the job
log = logging.getLogger(__name__)


def inline_limit() -> int:
    return getattr(settings, "AGREEMENT_INLINE_LABELS", 50_000)


def fingerprint() -> dict:
    """What the report depends on, read from indexes: the labels, steps and PEBench membership."""
    labels = StepLabel.objects.order_by().aggregate(n=Count("id"), last=Max("id"), newest=Max("created"))
    return {
        "labels": labels["n"],
        "last_label": labels["last"],
        "newest_label": labels["newest"].isoformat() if labels["newest"] else None,
        "last_step": Step.objects.order_by().aggregate(v=Max("id"))["v"],
        "pebench": PEBenchItem.objects.order_by().aggregate(n=Count("id"), last=Max("id")),
    }


def plain(value: Any) -> Any:
    """The report as JSON keeps it: numpy numbers as Python ones, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def compute(scope: str) -> dict:
    return plain(agreement_report(ChainOfThought.objects.in_pebench() if scope == "pebench" else None))


def compute_and_store(scope: str, *, job: Job | None = None, progress: Any = None) -> StoredAgreement:
    """Computes the scope's report and keeps it. The fingerprint is read first, so labels
    saved during the computation make the stored report stale, never wrongly fresh."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    if progress:
        progress(0, 2)
    seen = fingerprint()
    started = time.perf_counter()
    report = compute(scope)
    took = time.perf_counter() - started
    if progress:
        progress(1, 2)
    stored, _ = StoredAgreement.objects.update_or_create(
        scope=scope,
        defaults={"report": report, "fingerprint": seen, "computed": timezone.now(), "seconds": round(took, 3),
                  "job": job},
    )  # fmt: skip
    if progress:
        progress(2, 2)
    return stored


def running_job(scope: str) -> Job | None:
    return Job.objects.unfinished().filter(kind=KIND, params__scope=scope).order_by("-created").first()


def _lock_starting() -> None:
    """Inside a transaction: one starter at a time, so two triggers never both find no job
    and both start one. SQLite needs nothing: its transactions are IMMEDIATE (settings)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])


def _start(scope: str, user: Any) -> Job:
    return start_job(kind=KIND, user=user, params={"scope": scope}, title=job_text.title("agreement", scope=scope))


def start_agreement(*, scope: str, user: Any) -> Job:
    """Starts the computation, or returns the one already queued or running for the scope."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    with transaction.atomic():
        _lock_starting()
        return running_job(scope) or _start(scope, user)


def refresh_after_change(*, min_age_seconds: int = 0) -> list[Job]:
    """Called by what changes labels, once it is done: starts (as the system, no user)
    the computation of each scope whose stored report is out of date. Starts none for a
    scope with one queued or running (it reads the labels when it runs, so it covers this
    change), none when the stored report is fresh or younger than ``min_age_seconds``, and
    none where the page computes the report in the request anyway (few labels)."""
    started: list[Job] = []
    with transaction.atomic():
        _lock_starting()
        now = fingerprint()
        if now["labels"] <= inline_limit():
            return started
        stored = {s.scope: s for s in StoredAgreement.objects.only("scope", "fingerprint", "computed")}
        recent = timezone.now() - timedelta(seconds=min_age_seconds)
        for scope in SCOPES:
            old = stored.get(scope)
            if old is not None and (old.fingerprint == now or (min_age_seconds and old.computed > recent)):
                continue
            if running_job(scope) is None:
                started.append(_start(scope, None))
    return started


def refresh_quietly(*, min_age_seconds: int = 0) -> list[Job]:
    """For a request whose own work is already saved: a failure to start the refresh is
    logged, never the user's error (the page still offers "Compute again")."""
    try:
        return refresh_after_change(min_age_seconds=min_age_seconds)
    except DatabaseError:
        log.exception("the agreement report's refresh could not be started")
        return []


def report_for_page(scope: str) -> dict:
    """What the page shows: the report (or None), whether it is fresh, when it was computed,
    and the job computing a new one. A GET never writes."""
    stored = StoredAgreement.objects.filter(scope=scope).first()
    now = fingerprint()
    fresh = stored is not None and stored.fingerprint == now
    out = {"report": stored.report if stored else None, "stored": stored, "fresh": fresh, "inline": False,
           "labels": now["labels"], "job": running_job(scope)}  # fmt: skip
    if not fresh and now["labels"] <= inline_limit():
        out |= {"report": compute(scope), "fresh": True, "inline": True}
    return out
