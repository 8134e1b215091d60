"""Audits: a seeded sample of the team's work, the inspectors' ratings of it,
and the rounds of rework a failed item goes through.

An audit records everything needed to draw its sample again (population,
strata, sizes or plan, seed) and a fingerprint of the population at the
moment it was drawn, so that later changes to the population are reported
while the sample stays as drawn.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from k12vista.models import HandedInQuerySet, TimedWork


class Kind(models.TextChoices):
    QUESTION = "question", _("Question")
    PEBENCH = "pebench", _("PEBench item")


# What inspectors rate, per kind of item (the paper's Tables 5 and 8).
DIMENSIONS: dict[str, list[tuple[str, Any]]] = {
    Kind.QUESTION: [("question", _("Question")), ("answer", _("Answer")), ("solution", _("Reference solution"))],
    Kind.PEBENCH: [("question", _("Question")), ("solution", _("Solution")), ("step_labels", _("Step labels"))],
}


class Stage(models.TextChoices):
    """The stage of work a failed item goes back to."""

    OCR_REVIEW = "ocr_review", _("OCR review")
    STEP_CORRECTION = "step_correction", _("Solution step correction")
    PEBENCH_LABELLING = "pebench_labelling", _("PEBench labelling")


# The stage that produced each dimension: where its failure is reworked.
STAGE_OF_DIMENSION: dict[tuple[str, str], Stage] = {  # keyed by text: an item's kind is stored as text
    (Kind.QUESTION, "question"): Stage.OCR_REVIEW,
    (Kind.QUESTION, "answer"): Stage.OCR_REVIEW,
    (Kind.QUESTION, "solution"): Stage.STEP_CORRECTION,
    (Kind.PEBENCH, "question"): Stage.PEBENCH_LABELLING,
    (Kind.PEBENCH, "solution"): Stage.PEBENCH_LABELLING,
    (Kind.PEBENCH, "step_labels"): Stage.PEBENCH_LABELLING,
}


class AuditQuerySet(models.QuerySet["Audit"]):
    def in_progress(self) -> AuditQuerySet:
        return self.filter(closed__isnull=True)


class Audit(models.Model):
    class Population(models.TextChoices):
        STATUS = "status", _("Questions in a lifecycle status")
        BATCH = "batch", _("A batch of questions (listed by hash id)")
        IMPORT = "import", _("Questions from one import")
        PEBENCH = "pebench", _("PEBench items")
        CANDIDATE_SET = "candidate_set", _("A candidate set drawn for the benchmark")

    class Stratum(models.TextChoices):
        SUBJECT = "subject", _("Subject")
        GRADE = "grade", _("Grade")
        QTYPE = "qtype", _("Question type")
        ANNOTATOR = "annotator", _("Annotator who did the work")

    class SizeRule(models.TextChoices):
        FIXED = "fixed", _("A fixed number per stratum")
        PLAN = "plan", _("An acceptance sampling plan (ISO 2859-1)")

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # {"kind": "status", "status": ...} | {"kind": "batch", "hash_ids": [...]} |
    # {"kind": "import", "source_document": id} | {"kind": "pebench", "build": id or null} |
    # {"kind": "candidate_set", "candidate_set": id}
    population = models.JSONField()
    strata = models.JSONField(default=list)  # field names from Stratum, in order
    size_rule = models.CharField(max_length=10, choices=SizeRule.choices, default=SizeRule.FIXED)
    per_stratum = models.PositiveIntegerField(null=True, blank=True)
    aql = models.FloatField(null=True, blank=True)
    seed = models.BigIntegerField()
    inspectors = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="audits")
    inspectors_per_item = models.PositiveSmallIntegerField(default=3)
    # What the population looked like when the sample was drawn.
    population_count = models.PositiveIntegerField(default=0)
    population_hash = models.CharField(max_length=64, blank=True)
    # Stratum key -> {"available", "size", "taken", "note", "plan"}; the plan is as_dict() of the lookup.
    strata_counts = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    closed = models.DateTimeField(null=True, blank=True)
    # The job that created it over a large population (a rerun of the job finds it).
    job = models.OneToOneField("k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="created_audit")  # fmt: skip

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name

    def dimensions(self) -> list[tuple[str, Any]]:
        return DIMENSIONS[self.kind]


class AuditItem(models.Model):
    """One sampled item in one round: round 1 is the sample as drawn, later
    rounds are re-audits after rework."""

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    question = models.ForeignKey("annotation.Question", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="+")  # fmt: skip
    cot = models.ForeignKey("pem.ChainOfThought", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    stratum = models.CharField(max_length=200)
    round = models.PositiveSmallIntegerField(default=1)
    position = models.PositiveIntegerField(default=0)  # order of drawing, for a stable listing
    # Who did each stage of the work when the item was drawn: {stage: [user ids]}.
    workers = models.JSONField(default=dict)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["audit", "round", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "question", "round"], name="review_item_question_round"),
            models.UniqueConstraint(fields=["audit", "cot", "round"], name="review_item_cot_round"),
            models.CheckConstraint(
                condition=Q(question__isnull=False, cot__isnull=True) | Q(question__isnull=True, cot__isnull=False),
                name="review_item_one_object",
            ),
        ]

    def __str__(self) -> str:
        return gettext("%(item)s (round %(round)s)") % {"item": self.label, "round": self.round}

    @property
    def label(self) -> str:
        if self.question is not None:
            return self.question.hash_id
        assert self.cot is not None  # the check constraint: a question or a chain of thought
        return self.cot.key

    def same_object(self) -> Q:
        return Q(question_id=self.question_id) if self.question_id else Q(cot_id=self.cot_id)


class RatingQuerySet(HandedInQuerySet["Rating"]):
    def for_inspector(self, user: Any) -> RatingQuerySet:
        return self.filter(inspector=user)


class Rating(TimedWork):
    """One inspector's verdict on one item. The row exists from the moment the
    item is put in the inspector's queue (submitted is null until rated), so
    "is this item in my audit" is "do I have a row", and a second submit edits
    the same row."""

    item = models.ForeignKey(AuditItem, on_delete=models.CASCADE, related_name="ratings")
    inspector = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="audit_ratings")
    verdicts = models.JSONField(default=dict)  # dimension -> True (pass) / False (fail)
    notes = models.JSONField(default=dict)  # dimension -> text
    submitted = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(null=True, blank=True)

    objects = RatingQuerySet.as_manager()

    class Meta:
        ordering = ["item", "inspector"]
        constraints = [models.UniqueConstraint(fields=["item", "inspector"], name="review_rating_once")]

    def __str__(self) -> str:
        return f"{self.item} by {self.inspector}"


class Rework(models.Model):
    """A failed item sent back to the stage that produced it, and what came of it."""

    item = models.ForeignKey(AuditItem, on_delete=models.CASCADE, related_name="reworks")
    stage = models.CharField(max_length=20, choices=Stage.choices)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    note = models.TextField()
    # The work order it created: an annotation Assignment or a pem LabellingTask (ids, by stage).
    work_ref = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    reaudit = models.OneToOneField(AuditItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["item", "created", "id"]
        constraints = [models.UniqueConstraint(fields=["item", "stage"], name="review_rework_once_per_stage")]

    def __str__(self) -> str:
        return f"rework of {self.item} at {self.stage}"


class LotDecision(models.Model):
    """What applying the sampling plan's decision did to one lot (a stratum of an
    audit with a plan): accepted lots moved to ``audited``, rejected lots went back
    for rework as a whole and are audited again (``reaudit``)."""

    class Decision(models.TextChoices):
        ACCEPT = "accept", _("Accepted")
        REJECT = "reject", _("Rejected")

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="lot_decisions")
    stratum = models.CharField(max_length=200)
    decision = models.CharField(max_length=10, choices=Decision.choices)
    defects = models.PositiveIntegerField(default=0)
    sampled = models.PositiveIntegerField(default=0)
    # The lot's question ids when decided: what a rejected lot's re-audit samples from.
    question_ids = models.JSONField(default=list)
    moved = models.PositiveIntegerField(default=0)  # questions moved to audited (summed over applications)
    reworked = models.PositiveIntegerField(default=0)  # questions sent back for rework
    reaudit = models.ForeignKey(Audit, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    decided = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["audit", "stratum"]
        constraints = [models.UniqueConstraint(fields=["audit", "stratum"], name="review_lot_decision_once")]

    def __str__(self) -> str:
        return f"{self.audit} / {self.stratum}: {self.decision}"
