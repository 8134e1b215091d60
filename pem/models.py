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
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from inference.models import Protocol
from k12vista.models import HandedInQuerySet, JobAndCreator, TimedWork
from k12vista.releases import ReleaseBase
from k12vista.vocabulary import STEP_LABEL_CHOICES, TAXONOMY_VERSION, QuestionType, Stage, Subject


class ChainOfThoughtQuerySet(models.QuerySet["ChainOfThought"]):
    def in_pebench(self) -> ChainOfThoughtQuerySet:
        return self.filter(pebench_item__isnull=False)

    def with_gold(self) -> ChainOfThoughtQuerySet:
        return self.filter(status=ChainOfThought.Status.GOLD)

    def of_runs(self, runs) -> ChainOfThoughtQuerySet:
        """Chains made from the responses of these inference runs."""
        return self.filter(response__run__in=runs)

    def fully_decided_by(self, panel_run: PanelRun) -> ChainOfThoughtQuerySet:
        """Chains the panel voted on whose every step got a majority: the only
        ones whose panel labels may train a model."""
        return (
            self.filter(steps__panel_votes__panel_run=panel_run)
            .exclude(steps__panel_votes__panel_run=panel_run, steps__panel_votes__outcome=PanelVote.Outcome.NO_MAJORITY)
            .distinct()
        )

    def with_no_majority(self, panel_run: PanelRun) -> ChainOfThoughtQuerySet:
        """Chains with at least one step the panel could not decide: kept out of training."""
        return self.filter(
            steps__panel_votes__panel_run=panel_run, steps__panel_votes__outcome=PanelVote.Outcome.NO_MAJORITY
        ).distinct()

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
        # The rule (chains.split_response): chains from runs, and a model split that fell back (issue 29).
        RULE = "rule", _("Split by the rule")
        PERSON = "person", _("Split by a person")

    class Status(models.TextChoices):
        NEW = "new", _("New")
        LABELLING = "labelling", _("Being labelled")
        ADJUDICATION = "adjudication", _("Awaiting adjudication")
        GOLD = "gold", _("Gold labels set")

    # The import's hash_id, or "<question hash_id>:<run id>" for inference responses. Unique by a
    # constraint (Meta), not ``unique=True``: that adds a second index for LIKE 'prefix%' on
    # PostgreSQL, which no query uses (the search is icontains) and every import of 840K chains
    # paid for, a random-order insert each.
    key = models.CharField(max_length=200)
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
    # Which splitter produced the steps: "import" (the file's), "rule" (split_response),
    # or "model:<endpoint name>" (a splitting run whose split reproduced the text).
    splitter = models.CharField(max_length=200, default="import")
    # Indexed where set (below): imported chains have none, and a bulk import should not index 840K NULLs.
    split_run = models.ForeignKey(
        "SplitRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    status = models.CharField(max_length=15, choices=Status.choices, default=Status.NEW)
    # Set by the PEM training-data export; such items may never enter PEBench.
    in_training_data = models.BooleanField(default=False)
    created = models.DateTimeField(default=timezone.now)

    objects = ChainOfThoughtQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["key"], name="pem_cot_key_unique")]
        indexes = [
            models.Index(fields=["status"]),
            # The labelling pool's ids alone: the label queue's capped count of waiting items
            # reads this index, not the wide rows (texts) of every item in the pool.
            models.Index(fields=["id"], condition=models.Q(status="labelling"), name="pem_cot_labelling_pool"),
            models.Index(fields=["subject", "qtype", "stage"]),
            models.Index(
                fields=["split_run"], condition=models.Q(split_run__isnull=False), name="pem_cot_split_run_set"
            ),
        ]

    def __str__(self) -> str:
        return self.key


class Step(models.Model):
    # No index of its own: pem_step_unique (cot, position) serves every lookup by chain.
    cot = models.ForeignKey(ChainOfThought, on_delete=models.CASCADE, related_name="steps", db_index=False)
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

    # Indexes: pem_step_label_unique (step, source, rater) serves lookups by step; user and
    # scoring_run are indexed where set (Meta), since imported labels (millions) have neither.
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="labels", db_index=False)
    source = models.CharField(max_length=10, choices=Source.choices)
    # Who: the username, the judge model's name, the panel's name, or the import's name.
    rater = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    scoring_run = models.ForeignKey(
        "inference.ScoringRun", null=True, blank=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    label = models.CharField(max_length=3, choices=STEP_LABEL_CHOICES)
    explanation = models.TextField(blank=True)
    taxonomy_version = models.CharField(max_length=40, default=TAXONOMY_VERSION)
    guideline_version = models.CharField(max_length=40, blank=True)
    # A person's label: the active seconds they spent on the whole item (PRM800K's total_time, per item).
    active_seconds = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    objects = StepLabelQuerySet.as_manager()

    class Meta:
        ordering = ["step", "source", "rater"]
        constraints = [models.UniqueConstraint(fields=["step", "source", "rater"], name="pem_step_label_unique")]
        indexes = [
            models.Index(fields=["source", "rater"]),
            models.Index(fields=["user"], condition=models.Q(user__isnull=False), name="pem_label_user_set"),
            models.Index(
                fields=["scoring_run"], condition=models.Q(scoring_run__isnull=False), name="pem_label_scoring_run_set"
            ),
        ]

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
        return gettext("PEBench build %(id)s") % {"id": self.pk}

    @property
    def strata_names(self) -> str:
        """The fields stratified on, as people read them."""
        names = {"subject": _("Subject"), "qtype": _("Question type"), "stage": _("Stage"), "grade": _("Grade"),
                 "model_name": _("Model"), "origin": _("Origin")}  # fmt: skip
        return gettext(", ").join(str(names.get(field, field)) for field in self.strata)


class LabellingTaskQuerySet(HandedInQuerySet["LabellingTask"]):
    def for_annotator(self, user: Any) -> LabellingTaskQuerySet:
        return self.filter(annotator=user)


class LabellingTask(TimedWork):
    """One annotator's labelling of one chain of thought. The draft holds
    autosaved labels; they become StepLabel rows only on submit, which is what
    keeps everyone blind until then."""

    cot = models.ForeignKey(ChainOfThought, on_delete=models.CASCADE, related_name="labelling_tasks")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="labelling_tasks")
    draft = models.JSONField(default=dict, blank=True)  # {"<position>": {"label": code, "reason": text}}
    version = models.PositiveIntegerField(default=0)  # bumped on every save; stale autosaves are refused
    # The browser tab that saved last (an id the page keeps across its reloads): a save from that same tab is
    # never a conflict, even when a save it sent just before a reload landed after the page was drawn again.
    writer = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(default=timezone.now)
    submitted = models.DateTimeField(null=True, blank=True)
    # Set when an audit sends the work back; cleared on the next submit.
    rework_note = models.TextField(blank=True)

    objects = LabellingTaskQuerySet.as_manager()

    class Meta:
        ordering = ["created", "id"]
        constraints = [models.UniqueConstraint(fields=["cot", "annotator"], name="pem_labelling_task_unique")]
        indexes = [
            # the label queue's keyset pages of a person's open tasks
            models.Index(fields=["annotator", "created", "id"], condition=models.Q(submitted__isnull=True),
                         name="pem_task_open_queue"),
            # and their last submissions: 50 rows read in order, not all of them sorted
            models.Index(fields=["annotator", "-submitted"], condition=models.Q(submitted__isnull=False),
                         name="pem_task_submitted_list"),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"labelling of {self.cot} by {self.annotator}"


class Adjudication(TimedWork):
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


class SplitRun(JobAndCreator):
    """A splitting model splitting the chains of some inference runs into steps
    (the ``split_steps`` prompt, structured output), as one job. Where the
    model's split does not reproduce the chain's text, the rule-based split is
    kept and the fallback recorded (SplitResult)."""

    name = models.CharField(max_length=200)
    splitter = models.ForeignKey("inference.ModelEndpoint", on_delete=models.PROTECT, related_name="+")
    inference_runs = models.ManyToManyField("inference.InferenceRun", related_name="+")
    params = models.JSONField(default=dict, blank=True)
    # The prompt (id, version, hash), the schema, and the reproduction rule's threshold.
    provenance = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name


class SplitResult(models.Model):
    """What one splitting run did with one chain."""

    class Outcome(models.TextChoices):
        PENDING = "pending", _("Pending")
        MODEL = "model", _("Split by the model")
        FALLBACK = "fallback", _("Rule-based split kept")
        CONFLICT = "conflict", _("Already labelled by people; left as it was")
        SKIPPED = "skipped", _("No text to split")

    split_run = models.ForeignKey(SplitRun, on_delete=models.CASCADE, related_name="results")
    cot = models.ForeignKey(ChainOfThought, on_delete=models.CASCADE, related_name="split_results")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.PENDING)
    # Why the model's split was not used (fallback), in the reader's words.
    error = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["split_run", "id"]
        constraints = [models.UniqueConstraint(fields=["split_run", "cot"], name="pem_split_result_unique")]

    def __str__(self) -> str:
        return f"{self.split_run} {self.cot}: {self.outcome}"


class PanelRun(JobAndCreator):
    """N judge models labelling every step of some inference runs' chains
    through step-by-step scoring runs, and the vote that decides each label.

    A label needs ``threshold`` judges agreeing (always more than half the
    panel, so at most one label can win); a step without one is NO_MAJORITY,
    kept out of training and counted. A judge without a usable label for a step
    (call failed, output unreadable, step not matched) casts no vote there:
    counted, never guessed."""

    name = models.CharField(max_length=200, unique=True)
    inference_runs = models.ManyToManyField("inference.InferenceRun", related_name="+")
    # Judge endpoint names in panel order; the scoring runs that labelled for them.
    judges = models.JSONField(default=list)
    scoring_runs = models.ManyToManyField("inference.ScoringRun", related_name="+")
    threshold = models.PositiveSmallIntegerField()
    # The judge whose explanation is used when it voted with the majority ("" = the first majority judge).
    explainer = models.CharField(max_length=100, blank=True)
    # Steps decided / without majority, chains, missing votes per judge, labels: written by each vote.
    counts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def protocol(self) -> str:
        """The protocol (inference.models.Protocol) its judges' scoring runs speak: start_panel
        gives them all the panel's one."""
        found: str | None = self.scoring_runs.order_by("id").values_list("protocol", flat=True).first()
        return found or Protocol.STUDIO

    def get_protocol_display(self) -> str:
        return str(Protocol(self.protocol).label)


class PanelVoteQuerySet(models.QuerySet["PanelVote"]):
    def decided(self) -> PanelVoteQuerySet:
        return self.filter(outcome=PanelVote.Outcome.MAJORITY)

    def no_majority(self) -> PanelVoteQuerySet:
        return self.filter(outcome=PanelVote.Outcome.NO_MAJORITY)


class PanelVote(models.Model):
    """The panel's vote on one step: every judge's label (null: no usable label), and the outcome."""

    class Outcome(models.TextChoices):
        MAJORITY = "majority", _("Majority")
        NO_MAJORITY = "no_majority", _("No majority")

    panel_run = models.ForeignKey(PanelRun, on_delete=models.CASCADE, related_name="votes")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="panel_votes")
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    label = models.CharField(max_length=3, choices=STEP_LABEL_CHOICES, blank=True)
    votes = models.JSONField(default=dict)  # {judge name: label code or null}
    explained_by = models.CharField(max_length=100, blank=True)

    objects = PanelVoteQuerySet.as_manager()

    class Meta:
        ordering = ["panel_run", "step"]
        constraints = [models.UniqueConstraint(fields=["panel_run", "step"], name="pem_panel_vote_unique")]
        indexes = [models.Index(fields=["panel_run", "outcome"])]

    def __str__(self) -> str:
        return f"{self.panel_run} {self.step}: {self.outcome} {self.label}"


# PEM-800K filter runs, training exports and training runs (pem/training/models.py).
from pem.training.models import FilteredChain, FilterRun, TrainingExport, TrainingRun  # noqa: E402, F401


class StoredAgreement(models.Model):
    """The agreement report over one scope of chains, computed by a job
    (``pem.agreement_store``) so that the page reads it instead of working it
    out over every label in the request. ``fingerprint`` is what the labels
    looked like when it was computed; a page finding other labels says so."""

    class Scope(models.TextChoices):
        ALL = "all", _("All chains of thought")
        PEBENCH = "pebench", "PEBench"

    scope = models.CharField(max_length=10, choices=Scope.choices, unique=True)
    report = models.JSONField(default=dict)
    fingerprint = models.JSONField(default=dict)
    computed = models.DateTimeField(default=timezone.now)
    seconds = models.FloatField(default=0)  # how long the computation took
    job = models.ForeignKey("k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    def __str__(self) -> str:
        return f"agreement report ({self.scope}) of {self.computed:%Y-%m-%d %H:%M}"


class PEBenchRelease(ReleaseBase):
    """An immutable, versioned snapshot of PEBench: its items with their gold labels and the
    agreement report, written to one checksummed zip (``pem.releases``). Published, it never
    changes; later labels go into the next version (the life cycle is ``k12vista.releases``)."""

    summary = models.JSONField(default=dict, blank=True)  # counts, labels per code, agreement headline
    agreement = models.JSONField(default=dict, blank=True)  # the full agreement report over its items
    fingerprint = models.JSONField(default=dict, blank=True)  # PEBench's labels when it was built
    path = models.CharField(max_length=300, blank=True)  # the zip, under MEDIA_ROOT
    sha256 = models.CharField(max_length=64, blank=True)
    size = models.PositiveBigIntegerField(default=0)

    class Meta(ReleaseBase.Meta):
        pass

    def __str__(self) -> str:
        return f"PEBench v{self.version}"

    def label(self) -> str:
        return gettext("PEBench v%(version)s") % {"version": self.version}

    def files_written(self) -> bool:
        return bool(self.path)


class PEBenchReleaseItem(models.Model):
    """One PEBench item as its release holds it: steps, gold labels and every label then."""

    release = models.ForeignKey(PEBenchRelease, on_delete=models.CASCADE, related_name="items")
    cot = models.ForeignKey(ChainOfThought, null=True, on_delete=models.SET_NULL, related_name="+")
    key = models.CharField(max_length=200)
    content_hash = models.CharField(max_length=64)
    content = models.JSONField()  # {"studio": record, "reference": record or null}

    class Meta:
        ordering = ["release", "key"]
        constraints = [models.UniqueConstraint(fields=["release", "key"], name="pebench_release_item_unique")]

    def __str__(self) -> str:
        return f"{self.key} in {self.release}"
