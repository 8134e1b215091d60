"""Model endpoints, prompt templates, inference runs and their responses."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from inference import call_errors, client, sampling
from k12vista.models import JobAndCreator
from k12vista.text import unstorable_reason
from k12vista.vocabulary import STEP_LABEL_CHOICES, QuestionType


class Protocol(models.TextChoices):
    """How a run talks to a model and reads its replies (docs/formats.md lists the differences).
    The same values name the protocol of inference runs and of scoring runs."""

    STUDIO = "studio", _("Studio (structured output, every item counted)")
    REFERENCE = "reference", _("K12Vista reference code (as the paper)")


def validate_default_params(value: Any) -> None:
    """An endpoint's default parameters: a JSON object the database can store, of the sampling
    parameters the studio passes on and ``engine`` (the offline engines' options, an object), each of
    its type (inference.sampling.DefaultParams). The form and the API both call this: a list or
    a string saved here broke every later run on the endpoint (``{**endpoint.default_params}``)."""
    if not isinstance(value, dict):
        raise ValidationError(_("Sampling parameters are a JSON object."), code="not_an_object")
    # A key the studio does not pass on was kept and ignored ({"temprature": 0.5}): refused by name.
    unknown = sorted(str(key) for key in value if key not in sampling.KNOWN_KEYS)
    if unknown:
        raise ValidationError(
            _("Unknown sampling parameters: %(names)s (the studio passes %(known)s)."), code="unknown",
            params={"names": ", ".join(unknown), "known": ", ".join(sorted(sampling.KNOWN_KEYS))},
        )  # fmt: skip
    if not isinstance(value.get("engine", {}), dict):
        raise ValidationError(_("The engine's options are a JSON object."), code="engine")
    typed = sampling.DefaultParams(data=value)
    if not typed.is_valid():
        raise ValidationError(
            [
                ValidationError(_("%(name)s: %(error)s"), code="invalid", params={"name": name, "error": error})
                for name, error in sampling.error_lines(typed.errors)
            ]
        )
    reason = unstorable_reason(value)
    if reason:
        raise ValidationError(_("These parameters cannot be stored: %(reason)s"), params={"reason": reason})


class ModelEndpoint(models.Model):
    """Where a model answers. The API key is never stored: only the name of the
    environment variable that holds it on the workers."""

    class Kind(models.TextChoices):
        OPENAI = "openai", _("OpenAI-compatible HTTP (vllm serve, closed APIs)")
        VLLM_OFFLINE = "vllm_offline", _("vLLM offline engine on a GPU worker")
        TRANSFORMERS = "transformers", _("transformers on CPU")

    name = models.CharField(_("name"), max_length=100, unique=True)
    kind = models.CharField(_("kind"), max_length=20, choices=Kind.choices, default=Kind.OPENAI)
    base_url = models.URLField(_("base URL"), max_length=300, blank=True)  # for OPENAI
    # More servers of the same model (vllm serve --data-parallel-size behind separate ports or hosts):
    # calls are spread over base_url and these (inference.calls.Replicas), each its own max_concurrency.
    replica_urls = models.JSONField(_("replica URLs"), default=list, blank=True)
    # The served model name, or a local path for the engines.
    model_name = models.CharField(_("model name"), max_length=200)
    api_key_env = models.CharField(_("environment variable holding the API key"), max_length=100, blank=True)
    max_concurrency = models.PositiveSmallIntegerField(_("requests in flight at most"), default=8)
    timeout_seconds = models.PositiveIntegerField(_("timeout (seconds)"), default=120)
    accepts_images = models.BooleanField(_("accepts images"), default=True)
    max_image_side = models.PositiveIntegerField(_("longest image side (px)"), default=1024)
    supports_json_schema = models.BooleanField(_("supports JSON schema output"), default=True)
    # temperature, max_tokens, top_p...
    default_params = models.JSONField(_("default sampling parameters"), default=dict, blank=True)
    active = models.BooleanField(_("active"), default=True)
    # What the offline engine needs of a gpu worker: its runs go to the smallest GPU class that has
    # this many GPUs with this much memory each (inference.gpu_classes); 0 GiB: any card.
    gpu_count = models.PositiveSmallIntegerField(
        _("GPUs needed"), default=1, validators=[MinValueValidator(1), MaxValueValidator(64)],
        help_text=_("For the vLLM offline engine: its runs go to the smallest GPU class that has this many GPUs."),
    )  # fmt: skip
    gpu_memory_gib = models.PositiveSmallIntegerField(
        _("memory per GPU needed (GiB)"), default=0, validators=[MaxValueValidator(4096)],
        help_text=_("For the vLLM offline engine: each of its GPUs has at least this much memory (0: any)."),
    )  # fmt: skip
    # The judge prompt a trained judge (a PEM) learnt on: its step-by-step scoring runs use this
    # one for every question type instead of the studio's current judge_steps prompt.
    judge_prompt = models.ForeignKey(
        "inference.PromptTemplate", verbose_name=_("trained on the judge prompt"), null=True, blank=True,
        on_delete=models.PROTECT, related_name="+",
    )  # fmt: skip
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def server_urls(self) -> list[str]:
        """Every server of the endpoint: the base URL first, then its replicas."""
        return [self.base_url, *(url for url in self.replica_urls or [] if url)]

    @property
    def call_limit(self) -> int:
        """Requests in flight at most over all of its servers: max_concurrency is each server's."""
        servers = len(self.server_urls()) if self.kind == self.Kind.OPENAI else 1
        return self.max_concurrency * max(1, servers)

    def api_key(self) -> str:
        """Read on the worker at call time, only from a declared variable (see client.api_key)."""
        return client.api_key(self)


class PromptTemplate(models.Model):
    """One version of one prompt. Rows are never edited: a change is a new
    version, so every run can say exactly which text produced its numbers."""

    class Kind(models.TextChoices):
        ANSWER_DIRECT = "answer_direct", _("Answer directly")
        ANSWER_STEPS = "answer_step_by_step", _("Answer step by step")
        JUDGE_DIRECT = "judge_direct", _("Judge a direct answer")
        JUDGE_STEPS = "judge_steps", _("Judge the steps")
        SPLIT_STEPS = "split_steps", _("Split into steps")
        RESTRUCTURE = "restructure_solution", _("Restructure a solution")
        CAPTION = "caption_image", _("Caption an image")
        OCR_PAGE = "ocr_page", _("OCR a page")
        SEGMENT_PAGE = "segment_page", _("Cut a page into questions")
        CHECK_STRUCTURE = "check_structure", _("Check a question's structure")
        # A trained judge's own prompt (ModelEndpoint.judge_prompt): a kind of its own, so that no
        # version of it is ever prompts.current() of judge_steps for the other judges.
        JUDGE_STEPS_TRAINED = "judge_steps_trained", _("Judge the steps (a trained judge's own prompt)")
        # PEBench as the paper runs it: the judge is given the gold step list and labels each step.
        JUDGE_GIVEN_STEPS = "judge_given_steps", _("Label given steps (PEBench)")

    kind = models.CharField(max_length=30, choices=Kind.choices)
    qtype = models.CharField(max_length=20, choices=QuestionType.choices, blank=True)
    # "" for the studio's own prompts. Otherwise the set a researcher registered from a checkout
    # of the reference repository ("K12Vista@<commit>", inference.reference.register): its text is
    # the reference's as is, with the reference's str.format fields ({question}), and it is never
    # prompts.current() of its kind: only a run or scoring run of the reference protocol uses it.
    prompt_set = models.CharField(max_length=100, blank=True, default="")
    name = models.CharField(max_length=200)
    system = models.TextField(blank=True)
    user_template = models.TextField()
    content_hash = models.CharField(max_length=64)
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["prompt_set", "kind", "qtype", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["prompt_set", "kind", "qtype", "version"], name="prompt_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class InferenceRunQuerySet(models.QuerySet["InferenceRun"]):
    def visible_to(self, user) -> InferenceRunQuerySet:
        """The one rule for who reads a run, its answers and their scoring (docs/security.md, *Runs*),
        on every page and API route: its researcher; administrators; and inspectors, the experts who
        check the checkers by scoring any run's sampled answers. Researchers do not read each other's
        runs (a model under test and its answers may not be public yet)."""
        if user.has_perm("k12vista.administer") or user.has_perm("k12vista.inspect"):
            return self.all()
        return self.filter(created_by=user)

    def with_counts(self) -> InferenceRunQuerySet:
        """ok / failed / pending per run in the same query (no query per row)."""
        return self.annotate(
            n_ok=Count("responses", filter=Q(responses__status=Response.Status.OK)),
            n_failed=Count("responses", filter=Q(responses__status=Response.Status.FAILED)),
            n_pending=Count("responses", filter=Q(responses__status=Response.Status.PENDING)),
        )


class InferenceRun(JobAndCreator):
    """A model answering a set of questions, as one job."""

    class Mode(models.TextChoices):
        DIRECT = "direct", _("Direct")
        STEP_BY_STEP = "step_by_step", _("Step by step")

    class InputForm(models.TextChoices):
        IMAGES = "images", _("Text and images")
        CAPTIONS = "captions", _("Text and captions (text-only models)")

    name = models.CharField(max_length=200)
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="runs")
    mode = models.CharField(max_length=20, choices=Mode.choices)
    input_form = models.CharField(max_length=10, choices=InputForm.choices, default=InputForm.IMAGES)
    # How the questions are put to the model: the studio's messages, or as the reference code sends them
    # (inference.reference.messages; docs/formats.md lists the differences).
    protocol = models.CharField(_("protocol"), max_length=10, choices=Protocol.choices, default=Protocol.STUDIO)
    # The question set: the question bank's browse filters, frozen when the run starts.
    filters = models.JSONField(default=dict, blank=True)
    params = models.JSONField(default=dict, blank=True)  # sampling parameters, merged over the endpoint's
    seed = models.BigIntegerField(null=True, blank=True)
    # What produced the numbers: prompt ids and content hashes per question type,
    # the endpoint as it was, and the number and newest change of the questions.
    provenance = models.JSONField(default=dict, blank=True)
    # Set when the run is one model of a campaign; at most one run per endpoint there.
    campaign = models.ForeignKey("Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")

    objects = InferenceRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "endpoint"], name="inference_run_one_per_campaign_endpoint")
        ]

    def __str__(self) -> str:
        return self.name

    def counts(self) -> dict[str, int]:
        rows = self.responses.aggregate(
            total=Count("id"),
            ok=Count("id", filter=Q(status=Response.Status.OK)),
            failed=Count("id", filter=Q(status=Response.Status.FAILED)),
            pending=Count("id", filter=Q(status=Response.Status.PENDING)),
        )
        return rows


class CampaignQuerySet(models.QuerySet["Campaign"]):
    def visible_to(self, user) -> CampaignQuerySet:
        """As with runs: everyone sees their own campaigns; administrators see all."""
        if user.has_perm("k12vista.administer"):
            return self.all()
        return self.filter(created_by=user)


class Campaign(JobAndCreator):
    """Many models answering one question set: one inference run per endpoint,
    all with the same mode, sampling and seed (PIPELINE.md stage 7)."""

    name = models.CharField(max_length=200)
    filters = models.JSONField(default=dict, blank=True)  # the question set, as a run's filters
    mode = models.CharField(max_length=20, choices=InferenceRun.Mode.choices)
    input_form = models.CharField(max_length=10, choices=InferenceRun.InputForm.choices,
                                  default=InferenceRun.InputForm.IMAGES)  # fmt: skip
    params = models.JSONField(default=dict, blank=True)
    seed = models.BigIntegerField(null=True, blank=True)
    # How every run of the campaign asks its model (and, by default, how its runs are scored).
    protocol = models.CharField(_("protocol"), max_length=10, choices=Protocol.choices, default=Protocol.STUDIO)
    prompt_set = models.CharField(_("reference prompt set"), max_length=100, blank=True, default="")
    # Its job (JobAndCreator's) is the campaign's one: it answers the HTTP runs together and starts the
    # engine runs' jobs.

    objects = CampaignQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name


class ModelCall(models.Model):
    """What one call to a model left behind: shared by answers and judgments."""

    raw_output = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=30, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def error_message(self) -> str:
        """The error in the reader's language (inference.call_errors); ``error`` keeps it in English."""
        return call_errors.message(self.error)


class Response(ModelCall):
    """One model answer to one question in one run: unique on (run, question),
    so a run restarted after a crash finishes with no duplicates."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        OK = "ok", _("Answered")
        FAILED = "failed", _("Failed")

    run = models.ForeignKey(InferenceRun, on_delete=models.CASCADE, related_name="responses")
    question = models.ForeignKey("annotation.Question", on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    prompt_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "question"], name="response_unique")]
        indexes = [models.Index(fields=["run", "status"], name="response_run_status")]

    def __str__(self) -> str:
        return f"{self.run} / {self.question_id}"


class ScoringRun(JobAndCreator):
    """A judge model (or the PEM) scoring the responses of one inference run."""

    class Method(models.TextChoices):
        JUDGE_DIRECT = "judge_direct", _("Judge extracts and scores sub-answers (direct mode)")
        JUDGE_STEPS = "judge_steps", _("Judge or PEM labels every step (step-by-step mode)")

    name = models.CharField(max_length=200)
    inference_run = models.ForeignKey(InferenceRun, on_delete=models.CASCADE, related_name="scoring_runs")
    judge = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="scoring_runs")
    method = models.CharField(max_length=20, choices=Method.choices)
    protocol = models.CharField(_("protocol"), max_length=10, choices=Protocol.choices, default=Protocol.STUDIO)
    params = models.JSONField(default=dict, blank=True)
    provenance = models.JSONField(default=dict, blank=True)  # prompt id/hash, judge, schema used

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name


class Judgment(ModelCall):
    """One scored response. ``score`` is None when the judge's output could not be
    parsed (or the call failed): such items count against coverage, never as 0."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        OK = "ok", _("Scored")
        PARSE_FAILED = "parse_failed", _("Output not understood")
        CALL_FAILED = "call_failed", _("Call failed")
        NO_RESPONSE = "no_response", _("The model gave no answer")

    scoring_run = models.ForeignKey(ScoringRun, on_delete=models.CASCADE, related_name="judgments")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="judgments")
    status = models.CharField(max_length=15, choices=Status.choices, default=Status.PENDING)
    score = models.FloatField(null=True, blank=True)
    parsed = models.JSONField(null=True, blank=True)
    parse_status = models.CharField(max_length=10, blank=True)  # ok | repaired | failed
    parse_notes = models.JSONField(default=list, blank=True)
    # direct mode: what the judge extracted and how it scored each sub-answer
    reference_answers = models.JSONField(default=list, blank=True)
    model_answers = models.JSONField(default=list, blank=True)
    item_scores = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["scoring_run", "id"]
        constraints = [models.UniqueConstraint(fields=["scoring_run", "response"], name="judgment_unique")]
        indexes = [models.Index(fields=["scoring_run", "status"], name="judgment_run_status")]

    def __str__(self) -> str:
        return f"{self.scoring_run} / {self.response_id}"


class JudgedStep(models.Model):
    """One step of a response as the judge split it, with its label and reason.
    The pem app reads these as model judgments of steps."""

    judgment = models.ForeignKey(Judgment, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveSmallIntegerField()
    text = models.TextField()
    label = models.CharField(max_length=3, choices=STEP_LABEL_CHOICES)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["judgment", "position"]
        constraints = [models.UniqueConstraint(fields=["judgment", "position"], name="judged_step_unique")]

    def __str__(self) -> str:
        return f"{self.judgment} #{self.position} {self.label}"


class AssistRun(JobAndCreator):
    """Model help for the question bank: the results go back into it as
    proposals, flags or captions, for people to review."""

    class Kind(models.TextChoices):
        RESTRUCTURE = "restructure_solution", _("Restructure solutions into steps")
        CHECK_STRUCTURE = "check_structure", _("Check question structure")
        CAPTION = "caption_image", _("Caption figures for text-only models")
        SMALL_MODEL_FILTER = "small_model_filter", _("Difficulty filter: small models answer")
        TEXT_ONLY_FILTER = "text_only_filter", _("Difficulty filter: a large model without the image")

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=30, choices=Kind.choices)
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="assist_runs")
    filters = models.JSONField(default=dict, blank=True)
    params = models.JSONField(default=dict, blank=True)
    provenance = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name


class AssistResult(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        OK = "ok", _("Done")
        PARSE_FAILED = "parse_failed", _("Output not understood")
        CALL_FAILED = "call_failed", _("Call failed")

    run = models.ForeignKey(AssistRun, on_delete=models.CASCADE, related_name="results")
    question = models.ForeignKey("annotation.Question", on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=15, choices=Status.choices, default=Status.PENDING)
    raw_output = models.TextField(blank=True)
    parsed = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "question"], name="assist_result_unique")]

    def __str__(self) -> str:
        return f"{self.run} / {self.question_id}"


class Caption(models.Model):
    """A figure description written by a model, given to text-only models in place of the image."""

    question = models.ForeignKey("annotation.Question", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(AssistRun, on_delete=models.CASCADE, related_name="captions")
    text = models.TextField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["question", "-created"]
        constraints = [models.UniqueConstraint(fields=["question", "run"], name="caption_unique")]

    def __str__(self) -> str:
        return f"caption of {self.question_id}"


class PublishedResult(models.Model):
    """A number from a paper or leaderboard, shown beside our runs for comparison."""

    model = models.CharField(max_length=200)
    mode = models.CharField(max_length=20, choices=InferenceRun.Mode.choices)
    group = models.CharField(max_length=50)  # overall | stage:primary | subject:math | type:... | cell:math-g9
    score = models.FloatField()  # 0-1
    source = models.CharField(max_length=300)
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["model", "mode", "group"]
        constraints = [
            models.UniqueConstraint(fields=["model", "mode", "group", "source"], name="published_result_unique")
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.mode} {self.group}: {self.score:.4f}"


class BoardSnapshot(models.Model):
    """A scoring run's leaderboard slices as its job left them: written when the
    job finishes (and only then), read by every leaderboard page and download,
    so no page aggregates judgments and a restart loses nothing. The subject,
    grade and type of each question are those of the moment it was written: the
    board's one rule for time (see inference.standings)."""

    scoring_run = models.OneToOneField(ScoringRun, on_delete=models.CASCADE, related_name="board_snapshot")
    job = models.ForeignKey("k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    taken_at = models.DateTimeField(default=timezone.now)
    question_set = models.JSONField(default=dict, blank=True)  # the inference run's filters, as frozen

    def __str__(self) -> str:
        return f"board snapshot of {self.scoring_run}"


class BoardSlice(models.Model):
    """One slice of a snapshot: the questions of one subject, stage and type
    (the grid's cells: at most 45 a run). See inference.leaderboard.GroupStats."""

    snapshot = models.ForeignKey(BoardSnapshot, on_delete=models.CASCADE, related_name="slices")
    subject = models.CharField(max_length=20)
    stage = models.CharField(max_length=10)
    qtype = models.CharField(max_length=20)
    items = models.PositiveIntegerField(default=0)  # responses, scored or not
    absent = models.PositiveIntegerField(default=0)  # questions of the run's set with no response row
    n = models.PositiveIntegerField(default=0)  # scored
    total = models.FloatField(default=0.0)
    squares = models.FloatField(default=0.0)
    labels = models.JSONField(default=dict, blank=True)  # judged steps of scored responses, by label code

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "subject", "stage", "qtype"], name="board_slice_unique")
        ]

    def __str__(self) -> str:
        return f"{self.snapshot_id} {self.subject}/{self.stage}/{self.qtype}"


class BoardPin(models.Model):
    """The scoring run a researcher chose to represent an inference run on the
    leaderboard, instead of the newest finished one."""

    inference_run = models.OneToOneField(InferenceRun, on_delete=models.CASCADE, related_name="board_pin")
    scoring_run = models.ForeignKey(ScoringRun, on_delete=models.CASCADE, related_name="+")
    pinned_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    pinned_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.inference_run} -> {self.scoring_run}"


class CallLease(models.Model):
    """One of an endpoint's ``max_concurrency`` request slots, leased by one run
    (``holder``) until ``expires``. Every process that calls the endpoint takes
    slots from these rows, so two runs on one server share one limit; a run that
    dies stops renewing and its slots come free when the lease runs out."""

    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="+")
    slot = models.PositiveSmallIntegerField()
    holder = models.CharField(max_length=64, blank=True)
    expires = models.DateTimeField()

    class Meta:
        ordering = ["endpoint", "slot"]
        constraints = [models.UniqueConstraint(fields=["endpoint", "slot"], name="inference_call_lease_unique")]

    def __str__(self) -> str:
        return f"{self.endpoint_id}#{self.slot} {self.holder or 'free'}"


class CallDemand(models.Model):
    """A run that wants slots of an endpoint, renewed while it has work: the
    runs with a row share the endpoint's slots evenly (inference.calls), so a
    busy run cannot keep every slot from a second one."""

    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="+")
    holder = models.CharField(max_length=64)
    expires = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "holder"], name="inference_call_demand_unique")]

    def __str__(self) -> str:
        return f"{self.endpoint_id} {self.holder}"
