"""PEM-800K: filter runs over chains of thought, training exports, training runs.

Imported from pem.models, so these are the pem app's models.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from k12vista.vocabulary import LABEL_CODES


class FilterRun(models.Model):
    """One pass of the four filters over the chains labelled by one label source.

    Thresholds and targets are the run's parameters; ``funnel`` is what each
    filter removed, by subject, stage and label, written when the run ends
    (a stored result, not a cache).
    """

    label_source = models.CharField(max_length=10)  # a StepLabel.Source value
    label_rater = models.CharField(max_length=200)
    params = models.JSONField(default=dict)
    funnel = models.JSONField(default=dict, blank=True)
    kept = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    finished = models.DateTimeField(null=True, blank=True)
    job = models.OneToOneField(
        "k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="pem_filter_run"
    )

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return gettext("filter run %(id)s") % {"id": self.pk}


class FilteredChain(models.Model):
    """The facts one filter run knows about one chain, and which filter removed it (blank: kept)."""

    class Stage(models.TextChoices):
        KEPT = "", _("Kept")
        FORMAT = "format", _("Format")
        CONSISTENCY = "consistency", _("Consistency")
        COVERAGE = "coverage", _("Coverage")
        BALANCE = "balance", _("Balance")

    # Derived rows, written 840K at a time by one INSERT ... SELECT: no database foreign keys (their
    # checks were a fifth of a filter run) and no unique index (GROUP BY c.id makes one row per chain).
    # Deleting a run or a chain still removes its rows, through Django's cascade.
    run = models.ForeignKey(
        FilterRun, on_delete=models.CASCADE, related_name="chains", db_constraint=False, db_index=False
    )
    cot = models.ForeignKey("pem.ChainOfThought", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    question_key = models.CharField(max_length=200)
    model_name = models.CharField(max_length=200, blank=True)
    subject = models.CharField(max_length=20, blank=True)
    stage = models.CharField(max_length=10, blank=True)
    n_steps = models.IntegerField(default=0)
    n_labelled = models.IntegerField(default=0)
    n_text_mismatch = models.IntegerField(default=0)
    n_error = models.IntegerField(default=0)
    n_error_no_reason = models.IntegerField(default=0)
    answer_matches = models.BooleanField(default=True)
    # "correct", or the label code of the first wrong step: what balance samples on.
    category = models.CharField(max_length=10, blank=True)
    removed_by = models.CharField(max_length=12, choices=Stage.choices, blank=True, default="")
    reason = models.CharField(max_length=30, blank=True)

    class Meta:
        ordering = ["run", "cot"]
        indexes = [models.Index(fields=["run", "removed_by"])]

    def __str__(self) -> str:
        return f"{self.cot_id} in {self.run}: {self.removed_by or 'kept'}"


# Steps per label (by the run's label source), so the funnel needs no join over steps.
for _code in LABEL_CODES:
    FilteredChain.add_to_class(f"n_{_code.lower()}", models.IntegerField(default=0))


class TrainingExport(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    filter_run = models.ForeignKey(FilterRun, on_delete=models.PROTECT, related_name="exports")

    class Style(models.TextChoices):
        STUDIO = "studio", _("Studio: JSON with label codes, the studio's judge prompt")
        REFERENCE = "reference", _("K12-PEM: the reference's step-judge prompt, its list with Chinese labels")

    formats = models.JSONField(default=list)
    # What a line holds (docs/formats.md "PEM training exports"); the reference style names the
    # registered reference prompt set whose step-judge prompt it fills.
    style = models.CharField(max_length=10, choices=Style.choices, default=Style.STUDIO)
    prompt_set = models.CharField(max_length=100, blank=True)
    min_pixels = models.PositiveIntegerField()
    max_pixels = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    records = models.PositiveIntegerField(default=0)
    images = models.PositiveIntegerField(default=0)
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    # Relative to MEDIA_ROOT; names are ours (ids), never the input's.
    directory = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    job = models.OneToOneField(
        "k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="pem_training_export"
    )

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return gettext("training export %(id)s") % {"id": self.pk}


class TrainingRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    export = models.ForeignKey(TrainingExport, on_delete=models.PROTECT, related_name="training_runs")
    export_sha256 = models.CharField(max_length=64)
    base_model = models.CharField(max_length=500)
    hyperparameters = models.JSONField(default=dict)
    commit = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    checkpoint = models.CharField(max_length=300, blank=True)  # relative to MEDIA_ROOT
    metrics = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    endpoint = models.ForeignKey(
        "inference.ModelEndpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    finished = models.DateTimeField(null=True, blank=True)
    job = models.OneToOneField(
        "k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="pem_training_run"
    )

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return gettext("training run %(id)s") % {"id": self.pk}
