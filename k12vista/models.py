from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Self

from django.conf import settings
from django.db import models
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce, Least
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from k12vista import job_text


class Profile(models.Model):
    """Per-user settings; also declares the role capabilities (see roles.py)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        permissions = [
            ("annotate", "Annotate: review OCR, correct solutions, label steps"),
            ("inspect", "Inspect: audit samples and adjudicate"),
            ("research", "Research: run models, score, export"),
            ("administer", "Administer users and settings"),
        ]

    def __str__(self) -> str:
        return f"profile of {self.user}"


class JobQuerySet(models.QuerySet["Job"]):
    def started_by(self, user: Any) -> JobQuerySet:
        return self.filter(started_by=user)

    def visible_to(self, user: Any) -> JobQuerySet:
        """Everyone sees their own jobs; administrators see all."""
        if user.has_perm("k12vista.administer"):
            return self.all()
        return self.filter(started_by=user)

    def unfinished(self) -> JobQuerySet:
        return self.filter(status__in=Job.UNFINISHED)

    def needing_a_message(self, *, now: Any = None) -> JobQuerySet:
        """Jobs the broker no longer (or never) holds a live message for: queued
        ones whose message could not be sent or is overdue (lost in a broker
        restart), and running ones whose worker stopped beating its heart. A
        message sent less than JOB_STALE_AFTER_SECONDS ago is given its chance."""
        now = now or timezone.now()
        stale = now - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)
        silent = Q(status=Job.Status.QUEUED) | Q(status=Job.Status.RUNNING, heartbeat_at__lt=stale)
        not_in_flight = Q(message_due_at__isnull=True) | Q(message_due_at__lt=stale)
        return self.filter(silent, not_in_flight, cancel_requested=False)

    def orphaned_by_cancel(self, *, now: Any = None) -> JobQuerySet:
        """Running jobs someone cancelled whose worker is gone: no one is left to
        read the flag, so the cancel is final at once."""
        now = now or timezone.now()
        stale = now - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)
        return self.filter(status=Job.Status.RUNNING, cancel_requested=True, heartbeat_at__lt=stale)


# The claim token of a job held by no worker while it waits for the jobs it started (Job.park);
# uuid4 never makes it, and a running job with no token at all is not parked.
PARKED_TOKEN = uuid.UUID(int=0)
PARKED = Q(status="running", claim_token=PARKED_TOKEN)


class Job(models.Model):
    """One piece of long work, run by a Celery worker.

    The row, not the broker, is the truth about a job: its status, progress and
    error. ``claim()`` makes re-delivery safe: a message delivered twice runs the
    work once, unless the first worker stopped beating its heart (it died), in
    which case the second one takes over and the handler resumes (handlers are
    written to skip work already saved).
    """

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    class Queue(models.TextChoices):
        CPU = "cpu", "cpu"
        IO = "io", "io"
        GPU = "gpu", "gpu"

    UNFINISHED = (Status.QUEUED, Status.RUNNING)

    kind = models.CharField(max_length=100, db_index=True)
    title = models.CharField(max_length=300, blank=True)
    # The title worded at display time (k12vista.job_text.TITLES): its code and parameters; ``title`` keeps it
    # in English. Empty for a title a person chose (a run's name), which is shown as written.
    title_code = models.CharField(max_length=100, blank=True)
    title_params = models.JSONField(default=dict, blank=True)
    # One of the choices, or a GPU class's queue for an offline run ("gpu-4x80g", inference.gpu_classes).
    queue = models.CharField(max_length=20, choices=Queue.choices, default=Queue.CPU)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    # A failure worded at display time (k12vista.job_text): its code and parameters; ``error`` keeps it in English.
    error_code = models.CharField(max_length=100, blank=True)
    error_params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    created = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    attempts = models.PositiveIntegerField(default=0)
    # When the job's current broker message is due: the time it was sent, or the
    # end of a retry's countdown. Null while no message could be sent (the broker
    # was down). The sweeper (jobs.sweep) sends a new one when this is overdue.
    message_due_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["started_by", "-created"], name="job_user_created")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"

    @property
    def kind_label(self) -> str:
        return job_text.kind_label(self.kind)

    @property
    def display_title(self) -> str:
        """The title it was started with; a job started without one (its title is its kind) by its kind's label."""
        worded = job_text.title_text(self.title_code, self.title_params) if self.title_code else ""
        return worded or (self.title if self.title and self.title != self.kind else self.kind_label)

    @property
    def error_message(self) -> str:
        """The error in the reader's language when it was stored as a code, else as written."""
        return (job_text.failure_message(self.error_code, self.error_params) if self.error_code else "") or self.error

    @property
    def is_finished(self) -> bool:
        return self.status not in self.UNFINISHED

    @property
    def percent(self) -> int | None:
        if not self.total:
            return 100 if self.status == self.Status.SUCCEEDED else None
        return min(100, round(100 * self.done / self.total))

    def claim(self) -> uuid.UUID | None:
        """Atomically takes the job for this worker; None if someone else holds it.

        A conditional UPDATE, so two deliveries racing for the same job cannot
        both win.
        """
        now = timezone.now()
        stale = now - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)
        token = uuid.uuid4()
        claimable = Q(status=self.Status.QUEUED) | Q(status=self.Status.RUNNING, heartbeat_at__lt=stale) | PARKED
        won = (
            Job.objects.filter(pk=self.pk)
            .filter(claimable)
            .update(
                status=self.Status.RUNNING,
                claim_token=token,
                heartbeat_at=now,
                # A parked job woken up goes on with the same attempt, started when it first started.
                started_at=Case(When(PARKED, then=F("started_at")), default=Value(now)),
                attempts=Case(When(PARKED, then=F("attempts")), default=F("attempts") + 1),
            )
        )
        if not won:
            return None
        self.refresh_from_db()
        return token

    def report(self, token: uuid.UUID, *, done: int, total: int | None = None) -> bool:
        """Saves progress and beats the heart. Returns False when the worker
        no longer holds the job (it was cancelled, or taken over)."""
        fields: dict[str, Any] = {"done": done, "heartbeat_at": timezone.now()}
        if total is not None:
            fields["total"] = total
        held = Job.objects.filter(
            pk=self.pk, claim_token=token, status=self.Status.RUNNING, cancel_requested=False
        ).update(**fields)
        self.done = done
        if total is not None:
            self.total = total
        return bool(held)

    def park(self, token: uuid.UUID) -> bool:
        """Lets go of the job without finishing it (its own work is done, the jobs
        it started as its parts are not): it stays running, held by no worker,
        until a message wakes it (k12vista.jobs.wake). Returns False when the
        worker no longer holds it (it was cancelled, or taken over)."""
        parked = Job.objects.filter(
            pk=self.pk, claim_token=token, status=self.Status.RUNNING, cancel_requested=False
        ).update(claim_token=PARKED_TOKEN, heartbeat_at=timezone.now())
        return bool(parked)

    def finish(
        self, token: uuid.UUID, status: str, *, error: str = "", result: dict | None = None,
        error_code: str = "", error_params: dict | None = None,
    ) -> bool:  # fmt: skip
        fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "error": error[:10000],
                                  "error_code": error_code, "error_params": error_params or {}}  # fmt: skip
        if result is not None:
            fields["result"] = result
        updated = Job.objects.filter(pk=self.pk, claim_token=token, status=self.Status.RUNNING).update(**fields)
        self.refresh_from_db()
        return bool(updated)

    @property
    def waiting_for_broker(self) -> bool:
        """Queued, but no message could be sent yet: it starts once the broker is back."""
        return self.status == self.Status.QUEUED and self.message_due_at is None

    def request_cancel(self) -> None:
        """A queued or parked job is cancelled at once; a running one stops at its
        next report, or at once when its worker is gone (its heartbeat is stale)."""
        now = timezone.now()
        Job.objects.filter(Q(status=self.Status.QUEUED) | PARKED, pk=self.pk).update(
            status=self.Status.CANCELLED, cancel_requested=True, finished_at=now, claim_token=None
        )
        Job.objects.filter(pk=self.pk, status=self.Status.RUNNING).update(cancel_requested=True)
        Job.objects.filter(pk=self.pk).orphaned_by_cancel(now=now).update(
            status=self.Status.CANCELLED, finished_at=now, claim_token=None
        )
        self.refresh_from_db()


# --- guidelines and timed work ------------------------------------------------------------------


class GuidelineQuerySet(models.QuerySet["Guideline"]):
    def of_kind(self, kind: str) -> GuidelineQuerySet:
        return self.filter(kind=kind).order_by("-version")


class Guideline(models.Model):
    """One version of the written rules for one kind of work. Never edited in place: every
    edit is a new row with the next version, so a label keeps pointing at the text it was made under."""

    class Kind(models.TextChoices):
        STEP_LABELS = "step_labels", _("Step labelling guideline")
        OCR_REVIEW = "ocr_review", _("OCR review rules")
        STEP_CORRECTION = "step_correction", _("Step correction rules")
        AUDIT = "audit", _("Audit criteria")

    kind = models.CharField(max_length=20, choices=Kind.choices)
    version = models.PositiveIntegerField()
    text = models.TextField()
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now)

    objects = GuidelineQuerySet.as_manager()

    class Meta:
        ordering = ["kind", "-version"]
        constraints = [models.UniqueConstraint(fields=["kind", "version"], name="guideline_kind_version_unique")]

    def __str__(self) -> str:
        return self.version_name

    @property
    def version_name(self) -> str:
        # Step labels keep the name PEM_GUIDELINE_VERSION has always stored ("guideline.v1"),
        # so labels made before the guideline lived in the database read the same way.
        prefix = "guideline" if self.kind == self.Kind.STEP_LABELS else self.kind
        return f"{prefix}.v{self.version}"


# Active time is what a person's tab measured; the bounds keep a hostile or broken client
# (a negative number, a week left open) out of the medians on the team page.
MAX_ACTIVE_SECONDS = 4 * 60 * 60


class HandedInQuerySet[M: models.Model](models.QuerySet[M]):
    """Work a person hands in (labelling tasks, audit ratings) is open until it is submitted: one pair
    of words for that state, read from the ``submitted`` time (the review app said pending and done)."""

    def open(self) -> Self:
        return self.filter(submitted__isnull=True)

    def submitted(self) -> Self:
        return self.filter(submitted__isnull=False)


class JobAndCreator(models.Model):
    """What a row made by a job carries (runs, candidate sets, releases): the job that does the
    work, who started it and when. One definition, so the fields read alike on every such model;
    the columns are the ones each model declared before (no migration)."""

    job = models.ForeignKey("k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True


class TimedWork(models.Model):
    """What every label, rating and review records besides its content: the active seconds the
    person spent on it (only while the tab was visible and they were at work) and the version of
    the guideline it was made under."""

    active_seconds = models.PositiveIntegerField(null=True, blank=True)
    guideline_version = models.CharField(max_length=40, blank=True)

    class Meta:
        abstract = True

    def add_active_seconds(self, seconds: int | None) -> None:
        """Adds the active seconds a save brought, in one UPDATE (two tabs saving at once both
        count), the total kept under MAX_ACTIVE_SECONDS."""
        if not seconds:
            return
        total = Least(Coalesce(F("active_seconds"), 0) + seconds, MAX_ACTIVE_SECONDS)
        type(self)._default_manager.filter(pk=self.pk).update(active_seconds=total)
        self.refresh_from_db(fields=["active_seconds"])
