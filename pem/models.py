"""Chains of thought, their steps, and every label a step gets.

A chain of thought is a model's response split into ordered steps. People
label the steps on the labelling screen, judge models label them in scoring
runs (inference.JudgedStep, aligned onto these steps), and an inspector's
adjudication sets the gold label. All of them are StepLabel rows that differ
by source, so agreement statistics read one table.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from k12vista.vocabulary import STEP_LABEL_CHOICES, TAXONOMY_VERSION, QuestionType, Stage, Subject


class ChainOfThoughtQuerySet(models.QuerySet["ChainOfThought"]):
    def in_pebench(self) -> ChainOfThoughtQuerySet:
        return self.filter(pebench_item__isnull=False)

    def with_gold(self) -> ChainOfThoughtQuerySet:
        return self.filter(status=ChainOfThought.Status.GOLD)

    def eligible_for_pebench(self, min_steps: int) -> ChainOfThoughtQuerySet:
        """Long enough to judge, not yet in PEBench, and never used to train the PEM."""
        return (
            self.filter(pebench_item__isnull=True, in_training_data=False)
            .annotate(n_steps=models.Count("steps"))
            .filter(n_steps__gte=min_steps)
        )


class ChainOfThought(models.Model):
    class Origin(models.TextChoices):
        IMPORTED = "imported", _("Imported")
        INFERENCE = "inference", _("Inference run")

    class StepSource(models.TextChoices):
        IMPORT = "import", _("Fixed by the import")
        MODEL = "model", _("Split by a model")
        PERSON = "person", _("Split by a person")

    class Status(models.TextChoices):
        NEW = "new", _("New")
        LABELLING = "labelling", _("Being labelled")
        ADJUDICATION = "adjudication", _("Awaiting adjudication")
        GOLD = "gold", _("Gold labels set")

    # The import's hash_id, or "<question hash_id>:<run id>" for inference responses.
    key = models.CharField(max_length=200, unique=True)
    origin = models.CharField(max_length=10, choices=Origin.choices)
    question = models.ForeignKey(
        "annotation.Question", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    response = models.OneToOneField(
        "inference.Response", null=True, blank=True, on_delete=models.SET_NULL, related_name="chain_of_thought"
    )
    model_name = models.CharField(max_length=200, blank=True)
    # Snapshots, so an imported item stands alone and later edits to the bank
    # do not change what was labelled.
    question_text = models.TextField(blank=True)
    reference_solution = models.TextField(blank=True)
    reference_answer = models.TextField(blank=True)
    response_text = models.TextField(blank=True)
    subject = models.CharField(max_length=20, choices=Subject.choices, blank=True)
    grade = models.PositiveSmallIntegerField(null=True, blank=True)
    stage = models.CharField(max_length=10, choices=Stage.choices, blank=True)
    qtype = models.CharField(max_length=20, choices=QuestionType.choices, blank=True)
    step_source = models.CharField(max_length=10, choices=StepSource.choices, default=StepSource.IMPORT)
    status = models.CharField(max_length=15, choices=Status.choices, default=Status.NEW)
    # Set by the PEM training-data export; such items may never enter PEBench.
    in_training_data = models.BooleanField(default=False)
    created = models.DateTimeField(default=timezone.now)

    objects = ChainOfThoughtQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status"]), models.Index(fields=["subject", "qtype", "stage"])]

    def __str__(self) -> str:
        return self.key


class Step(models.Model):
    cot = models.ForeignKey(ChainOfThought, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveSmallIntegerField()  # 1-based
    text = models.TextField()

    class Meta:
        ordering = ["cot", "position"]
        constraints = [models.UniqueConstraint(fields=["cot", "position"], name="pem_step_unique")]

    def __str__(self) -> str:
        return f"{self.cot} #{self.position}"


class StepLabelQuerySet(models.QuerySet["StepLabel"]):
    def by_people(self) -> StepLabelQuerySet:
        return self.filter(source=StepLabel.Source.PERSON)

    def by_models(self) -> StepLabelQuerySet:
        return self.filter(source=StepLabel.Source.MODEL)

    def gold(self) -> StepLabelQuerySet:
        return self.filter(source=StepLabel.Source.GOLD)


class StepLabel(models.Model):
    """One judgment of one step: who or what judged it, the label, and why."""

    class Source(models.TextChoices):
        PERSON = "person", _("Annotator")
        MODEL = "model", _("Judge model")
        PANEL = "panel", _("Panel vote")
        GOLD = "gold", _("Gold (adjudicated)")
        IMPORTED = "imported", _("Imported label")

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="labels")
    source = models.CharField(max_length=10, choices=Source.choices)
    # Who: the username, the judge model's name, the panel's name, or the import's name.
    rater = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    scoring_run = models.ForeignKey(
        "inference.ScoringRun", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    label = models.CharField(max_length=3, choices=STEP_LABEL_CHOICES)
    explanation = models.TextField(blank=True)
    taxonomy_version = models.CharField(max_length=40, default=TAXONOMY_VERSION)
    guideline_version = models.CharField(max_length=40, blank=True)
    created = models.DateTimeField(default=timezone.now)

    objects = StepLabelQuerySet.as_manager()

    class Meta:
        ordering = ["step", "source", "rater"]
        constraints = [models.UniqueConstraint(fields=["step", "source", "rater"], name="pem_step_label_unique")]
        indexes = [models.Index(fields=["source", "rater"])]

    def __str__(self) -> str:
        return f"{self.step} {self.source}:{self.rater} {self.label}"


class PEBenchItem(models.Model):
    """Membership of a chain of thought in PEBench, with the build that chose it."""

    cot = models.OneToOneField(ChainOfThought, on_delete=models.CASCADE, related_name="pebench_item")
    build = models.ForeignKey("PEBenchBuild", null=True, blank=True, on_delete=models.SET_NULL, related_name="items")
    added = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"PEBench {self.cot}"


class PEBenchBuild(models.Model):
    """One stratified selection into PEBench: its parameters, seed and what it took per stratum."""

    target_size = models.PositiveIntegerField()
    min_steps = models.PositiveSmallIntegerField()
    strata = models.JSONField(default=list)  # the fields stratified on
    seed = models.BigIntegerField()
    counts = models.JSONField(default=dict, blank=True)  # stratum -> {available, taken}
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    # The job that made it: a job run again after a crash finds its build instead of making another.
    job = models.OneToOneField(
        "k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="pebench_build"
    )

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"PEBench build {self.pk}"


class LabellingTaskQuerySet(models.QuerySet["LabellingTask"]):
    def for_annotator(self, user: Any) -> LabellingTaskQuerySet:
        return self.filter(annotator=user)

    def open(self) -> LabellingTaskQuerySet:
        return self.filter(submitted__isnull=True)

    def submitted(self) -> LabellingTaskQuerySet:
        return self.filter(submitted__isnull=False)


class LabellingTask(models.Model):
    """One annotator's labelling of one chain of thought. The draft holds
    autosaved labels; they become StepLabel rows only on submit, which is what
    keeps everyone blind until then."""

    cot = models.ForeignKey(ChainOfThought, on_delete=models.CASCADE, related_name="labelling_tasks")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="labelling_tasks")
    draft = models.JSONField(default=dict, blank=True)  # {"<position>": {"label": code, "reason": text}}
    version = models.PositiveIntegerField(default=0)  # bumped on every save; stale autosaves are refused
    created = models.DateTimeField(default=timezone.now)
    submitted = models.DateTimeField(null=True, blank=True)
    # Set when an audit sends the work back; cleared on the next submit.
    rework_note = models.TextField(blank=True)

    objects = LabellingTaskQuerySet.as_manager()

    class Meta:
        ordering = ["created", "id"]
        constraints = [models.UniqueConstraint(fields=["cot", "annotator"], name="pem_labelling_task_unique")]
        # the label queue's keyset pages of a person's open tasks
        indexes = [models.Index(fields=["annotator", "created", "id"], condition=models.Q(submitted__isnull=True),
                                name="pem_task_open_queue")]  # fmt: skip

    def __str__(self) -> str:
        return f"labelling of {self.cot} by {self.annotator}"


class Adjudication(models.Model):
    """An inspector's decision on an item the annotators disagreed about."""

    cot = models.OneToOneField(ChainOfThought, on_delete=models.CASCADE, related_name="adjudication")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decided__isnull=True) | Q(decided_by__isnull=False), name="pem_adjudication_decider"
            )
        ]

    def __str__(self) -> str:
        return f"adjudication of {self.cot}"


class Alignment(models.Model):
    """How a judge model's own step split was mapped onto the gold steps."""

    cot = models.ForeignKey(ChainOfThought, on_delete=models.CASCADE, related_name="alignments")
    scoring_run = models.ForeignKey("inference.ScoringRun", on_delete=models.CASCADE, related_name="+")
    gold_steps = models.PositiveSmallIntegerField()
    judge_steps = models.PositiveSmallIntegerField()
    # [[gold position, judge position or null, similarity], ...]; unmatched judge steps are listed too.
    pairs = models.JSONField(default=list)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["cot", "scoring_run"]
        constraints = [models.UniqueConstraint(fields=["cot", "scoring_run"], name="pem_alignment_unique")]

    def __str__(self) -> str:
        return f"alignment of {self.cot} for scoring run {self.scoring_run_id}"


class ExpertScore(models.Model):
    """An expert's 0-1 score for a model response, to check the judge models (paper Table 6)."""

    response = models.ForeignKey("inference.Response", on_delete=models.CASCADE, related_name="+")
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    score = models.FloatField()
    note = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["response", "expert"]
        constraints = [
            models.UniqueConstraint(fields=["response", "expert"], name="pem_expert_score_unique"),
            models.CheckConstraint(condition=Q(score__gte=0) & Q(score__lte=1), name="pem_expert_score_range"),
        ]

    def __str__(self) -> str:
        return f"{self.expert} scored {self.response_id}: {self.score}"
