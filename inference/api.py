"""The inference API: endpoints, runs, their answers and the leaderboard.

Input and output serializers sit around the same service calls the screens
make; querysets are scoped by the same access helpers (runs_for)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from django.urls import reverse
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import Question
from inference import assist, client, difficulty, leaderboard, models, sampling, scoring, services
from inference import standings as standings_service
from inference.forms import ENV_NAME
from inference.job_shapes import AssistCountsOutput, CoverageOutput
from inference.standings import board_state
from inference.views import (
    filter_runs_for,
    get_run_for_user,
    get_scoring_run_for_user,
    runs_for,
    scoring_method_for,
)
from k12vista.pagination import ById, Newest
from k12vista.roles import HasRole, Role, require_role
from k12vista.schema_fields import STRINGS, keyed, open_object, typed_json
from k12vista.serializers import InputSerializer, JobSerializer, ModelInputSerializer
from k12vista.vocabulary import GRADES, QuestionType, Stage, Subject

MANAGERS = HasRole(Role.RESEARCHER, Role.ADMIN)
LEADERBOARD_READERS = HasRole(Role.RESEARCHER, Role.ADMIN, Role.INSPECTOR)


# --- serializers -----------------------------------------------------------------

ENDPOINT_FIELDS = [
    "name", "kind", "base_url", "replica_urls", "model_name", "api_key_env", "max_concurrency", "timeout_seconds",
    "accepts_images", "max_image_side", "supports_json_schema", "default_params", "gpu_count", "gpu_memory_gib",
]  # fmt: skip


class EndpointInput(ModelInputSerializer):
    max_concurrency = serializers.IntegerField(min_value=1, max_value=512, default=8)
    # A served PEM keeps the prompt it learnt on whatever its kind (train_pem --register prints it).
    judge_prompt = serializers.PrimaryKeyRelatedField(
        queryset=models.PromptTemplate.objects.all(), required=False, allow_null=True, default=None,
        help_text="A trained step judge's own prompt: a judge_steps_trained prompt, or a registered reference "
        "set's judge_steps prompt (a K12-PEM-style PEM)",
    )  # fmt: skip
    replica_urls = serializers.ListField(
        child=serializers.CharField(max_length=300), max_length=64, default=list,
        help_text="More servers of the same model (base URLs), each passing the allowlist; calls go to the least "
                  "busy, and max_concurrency is each server's. An OpenAI-compatible endpoint's only",
    )  # fmt: skip
    default_params = sampling.DefaultParamsField(
        required=False, help_text="The sampling parameters sent with every call unless a run sets its own, and "
        "the offline engine's options (engine); another key is refused by name",
    )  # fmt: skip

    class Meta:
        model = models.ModelEndpoint
        fields = [*ENDPOINT_FIELDS, "judge_prompt"]

    def validate_judge_prompt(self, value: models.PromptTemplate | None) -> models.PromptTemplate | None:
        if value is not None and not trained_judge_prompt(value):
            raise serializers.ValidationError(
                gettext("prompt %(prompt)s is not a trained judge's prompt (a judge_steps_trained prompt or a "
                        "reference set's judge_steps prompt)") % {"prompt": value}
            )  # fmt: skip
        return value

    def validate(self, attrs: dict) -> dict:
        # Fields only an HTTP endpoint uses are refused on the engines, never kept and ignored.
        kind = attrs.get("kind", models.ModelEndpoint.Kind.OPENAI)
        errors = {name: [why] for name, why in services.fields_its_kind_never_uses(kind, attrs).items()}
        # What the offline engine needs of a GPU worker: another kind never reads it (issue 29).
        if kind != models.ModelEndpoint.Kind.VLLM_OFFLINE:
            for name in ("gpu_count", "gpu_memory_gib"):
                default = {"gpu_count": 1, "gpu_memory_gib": 0}[name]  # the model's defaults
                if name in attrs and attrs[name] != default:
                    errors[name] = [
                        gettext("only the vLLM offline engine uses %(field)s: leave it at %(default)s")
                        % {"field": name, "default": default}
                    ]  # fmt: skip
        if errors:
            raise ValidationError(errors)
        return attrs

    def validate_default_params(self, value: Any) -> Any:
        models.validate_default_params(value)  # as the form does
        return value

    def validate_api_key_env(self, value: str) -> str:
        # Worded in the request's language, as the endpoint form words the same refusals.
        if value and not ENV_NAME.match(value):
            raise serializers.ValidationError(
                gettext("Give the name of an environment variable (letters, digits, _), not a key.")
            )
        try:
            client.check_key_variable(value)
        except client.EndpointError as error:
            raise serializers.ValidationError(str(error)) from None
        return value


def trained_judge_prompt(prompt: models.PromptTemplate) -> bool:
    kind = models.PromptTemplate.Kind
    return prompt.kind == kind.JUDGE_STEPS_TRAINED or (prompt.kind == kind.JUDGE_STEPS and bool(prompt.prompt_set))


class EndpointOutput(serializers.ModelSerializer):
    # Whether the variable is set on this server; the key itself is never read into a reply.
    api_key_state = serializers.SerializerMethodField()
    default_params = sampling.DefaultParamsField(read_only=True)
    replica_urls = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = models.ModelEndpoint
        fields = ["id", *ENDPOINT_FIELDS, "api_key_state", "active", "judge_prompt", "created"]
        read_only_fields = fields

    def get_api_key_state(self, endpoint) -> str:
        return client.key_state(endpoint)


class FiltersInput(InputSerializer):
    subject = serializers.ChoiceField(choices=Subject.choices, required=False)
    grade = serializers.ChoiceField(choices=list(GRADES), required=False)
    stage = serializers.ChoiceField(choices=Stage.choices, required=False)
    qtype = serializers.ChoiceField(choices=QuestionType.choices, required=False)
    status = serializers.ChoiceField(choices=Question.Status.choices, required=False)


class ParamsInput(InputSerializer):
    temperature = serializers.FloatField(min_value=0, max_value=2, required=False)
    max_tokens = serializers.IntegerField(min_value=1, max_value=200_000, required=False)
    top_p = serializers.FloatField(min_value=0, max_value=1, required=False)


class RunInput(InputSerializer):
    endpoint = serializers.PrimaryKeyRelatedField(queryset=models.ModelEndpoint.objects.all())
    mode = serializers.ChoiceField(choices=models.InferenceRun.Mode.choices)
    input_form = serializers.ChoiceField(
        choices=models.InferenceRun.InputForm.choices, default=models.InferenceRun.InputForm.IMAGES
    )
    filters = FiltersInput(required=False, default=dict)
    params = ParamsInput(required=False, default=dict)
    seed = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    protocol = serializers.ChoiceField(choices=models.Protocol.choices, default=models.Protocol.STUDIO)
    prompt_set = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


# How a run's numbers were produced, frozen at its creation: prompts, endpoint, question set, studio version.
PROVENANCE = open_object(
    "Open by design: a run's provenance as recorded at its creation (prompts, endpoint, questions, parameters, "
    "studio version); its keys differ by the kind of run and its protocol."
)


class RunOutput(serializers.ModelSerializer):
    endpoint_name = serializers.CharField(source="endpoint.name", read_only=True)
    job = JobSerializer(read_only=True)
    counts = serializers.SerializerMethodField()
    # The stored JSON as it is, typed in the schema (issue 29); params: the endpoint's defaults and the run's own.
    filters = typed_json(FiltersInput)
    params = typed_json(sampling.DefaultParams)
    provenance = typed_json(PROVENANCE)

    class Meta:
        model = models.InferenceRun
        fields = [
            "id", "name", "endpoint", "endpoint_name", "mode", "input_form", "protocol", "filters", "params", "seed",
            "provenance",
            "job", "counts", "created",
        ]  # fmt: skip
        read_only_fields = fields

    def get_counts(self, run) -> dict[str, int]:
        if hasattr(run, "n_ok"):  # annotated by with_counts() in lists
            return {"ok": run.n_ok, "failed": run.n_failed, "pending": run.n_pending}
        counts = run.counts()
        return {key: counts[key] for key in ("ok", "failed", "pending")}


class ResponseOutput(serializers.ModelSerializer):
    question = serializers.CharField(source="question.hash_id", read_only=True)
    # ``error`` in English, for scripts that match on it; this one in the request's language.
    error_message = serializers.CharField(read_only=True)

    class Meta:
        model = models.Response
        fields = [
            "id", "question", "status", "raw_output", "latency_ms", "prompt_tokens", "completion_tokens",
            "finish_reason", "attempts", "error", "error_message", "finished",
        ]  # fmt: skip
        read_only_fields = fields


# --- views -------------------------------------------------------------------------


class EndpointList(generics.ListAPIView):
    serializer_class = EndpointOutput
    permission_classes = [MANAGERS]
    pagination_class = ById
    queryset = models.ModelEndpoint.objects.all()

    @extend_schema(request=EndpointInput, responses={201: EndpointOutput})
    def post(self, request: Request) -> Response:
        given = EndpointInput(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            endpoint = services.save_endpoint(endpoint=models.ModelEndpoint(**given.validated_data), user=request.user)
        except services.EndpointError as exc:
            field = "replica_urls" if isinstance(exc, services.ReplicaError) else "base_url"
            raise ValidationError({field: [str(exc)]}) from exc
        return Response(EndpointOutput(endpoint).data, status=status.HTTP_201_CREATED)


class ProbeOutput(serializers.Serializer):
    ok = serializers.BooleanField(allow_null=True, help_text="null: no call is possible from here (offline engines)")
    message = serializers.CharField(help_text="What the test found, in the caller's language")
    latency_ms = serializers.IntegerField(allow_null=True)
    model = serializers.CharField(help_text="The model name the server answered with")
    model_path_exists = serializers.BooleanField(allow_null=True, help_text="Offline engines: the model path exists")


@extend_schema(request=None, responses=ProbeOutput)
@api_view(["POST"])
@permission_classes([MANAGERS])
def endpoint_test(request: Request, pk: int) -> Response:
    """Test connection: one tiny request through the client every run uses; the result and its latency."""
    endpoint = generics.get_object_or_404(models.ModelEndpoint, pk=pk)
    return Response(ProbeOutput(client.probe_endpoint(endpoint)).data)


class RunList(generics.ListAPIView):
    serializer_class = RunOutput
    permission_classes = [MANAGERS]
    pagination_class = Newest

    def get_queryset(self):
        return runs_for(self.request.user).with_counts()

    @extend_schema(request=RunInput, responses={201: RunOutput})
    def post(self, request: Request) -> Response:
        given = RunInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            run = services.start_inference_run(
                endpoint=data["endpoint"], mode=data["mode"], filters=data["filters"], user=request.user,
                input_form=data["input_form"], params=data["params"], seed=data["seed"], name=data["name"],
                protocol=data["protocol"], prompt_set=data["prompt_set"],
            )  # fmt: skip
        except services.EndpointError as exc:
            field = "filters" if isinstance(exc, services.NoQuestions) else "endpoint"
            raise ValidationError({field: [str(exc)]}) from exc
        return Response(RunOutput(run).data, status=status.HTTP_201_CREATED)


class RunDetail(generics.RetrieveAPIView):
    serializer_class = RunOutput
    permission_classes = [MANAGERS]

    def get_object(self):
        return get_run_for_user(self.request.user, self.kwargs["pk"])


class RunResponses(generics.ListAPIView):
    """A run's answers in id order, a cursor page at a time."""

    serializer_class = ResponseOutput
    permission_classes = [MANAGERS]
    pagination_class = ById

    def get_queryset(self):
        run = get_run_for_user(self.request.user, self.kwargs["pk"])  # 404 for another person's run
        return run.responses.select_related("question")


# --- the leaderboard document (leaderboard.to_document and what the API adds), typed for the schema -------


class NotCountedOutput(serializers.Serializer):
    """A scoring run of the same inference run that does not fill the entry (leaderboard.NotCounted)."""

    scoring_run = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    status = serializers.CharField(help_text='a job status, or "rescore <status>"')


class ReplacedOutput(serializers.Serializer):
    scoring_run = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    differs = serializers.ListField(child=serializers.CharField(), help_text="judge, prompts, protocol")


class BoardRunOutput(serializers.Serializer):
    """The runs behind an entry (leaderboard.RunInfo), with their addresses."""

    inference_run = serializers.IntegerField()
    inference_run_name = serializers.CharField(allow_blank=True)
    scoring_run = serializers.IntegerField()
    scoring_run_name = serializers.CharField(allow_blank=True)
    snapshot_at = serializers.CharField(help_text="ISO 8601: when the scoring run's slices were written")
    question_set = serializers.CharField()
    other_question_set = serializers.BooleanField()
    pinned = serializers.BooleanField()
    not_counted = NotCountedOutput(many=True)
    protocol = serializers.CharField()
    replaced = ReplacedOutput(allow_null=True)
    inference_run_url = serializers.CharField(help_text="the inference run in this API")
    scoring_run_page = serializers.CharField(help_text="the scoring run's page")


class BoardCellOutput(serializers.Serializer):
    n = serializers.IntegerField(help_text="scored items")
    unscored = serializers.IntegerField()
    absent = serializers.IntegerField()
    items = serializers.IntegerField()
    coverage = serializers.FloatField(allow_null=True)
    mean = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    in_release = serializers.BooleanField()


class BoardErrorsOutput(serializers.Serializer):
    steps = serializers.IntegerField(help_text="every labelled step, CS included")
    error_steps = serializers.IntegerField()
    counts = keyed(serializers.IntegerField(), "error code (every one, zeros included)")
    shares = keyed(serializers.FloatField(allow_null=True), "error code: its share of the error steps")


class PublishedScoreOutput(serializers.Serializer):
    score = serializers.FloatField()
    source = serializers.CharField()  # type: ignore[assignment]  # off the class (DRF's metaclass)


GROUPS = "group (overall, stage:..., subject:..., type:..., cell:TAG, grid:TYPE:TAG): the columns vary with the cells"


class BoardEntryOutput(serializers.Serializer):
    model = serializers.CharField()
    mode = serializers.CharField(help_text="direct or step_by_step")
    run = BoardRunOutput(allow_null=True, help_text="null for a row of published numbers only")
    cells = keyed(BoardCellOutput(), GROUPS)
    errors = keyed(BoardErrorsOutput(), GROUPS)  # type: ignore[assignment]  # off the class (DRF's metaclass)
    published = keyed(PublishedScoreOutput(), GROUPS)


class WaitingOutput(serializers.Serializer):
    inference_run = serializers.IntegerField()
    model = serializers.CharField()
    mode = serializers.CharField()
    not_counted = NotCountedOutput(many=True)


class LeaderboardOutput(serializers.Serializer):
    """The leaderboard in the download's JSON format (leaderboard.to_document), with the protocols on the board
    and the inference runs waiting for a finished scoring run."""

    format = serializers.CharField()
    interval = serializers.CharField()
    time_rule = serializers.CharField()
    definitions = keyed(serializers.CharField(), "term")
    question_set = serializers.CharField(allow_blank=True)
    entries = BoardEntryOutput(many=True)
    protocols = serializers.ListField(child=serializers.CharField())
    waiting = WaitingOutput(many=True)


class PinOutput(serializers.Serializer):
    inference_run = serializers.IntegerField()
    scoring_run = serializers.IntegerField(help_text="the scoring run that now represents it")


@extend_schema(
    parameters=[
        OpenApiParameter("mode", str, enum=list(leaderboard.MODES), description="only this mode"),
        OpenApiParameter(
            "protocol",
            str,
            enum=list(models.Protocol.values),
            description="only entries scored in this protocol (each entry's run names its own)",
        ),
    ],  # fmt: skip
    responses={200: LeaderboardOutput},
)
@api_view(["GET"])
@permission_classes([LEADERBOARD_READERS])
def leaderboard_json(request: Request) -> Response:
    """The leaderboard in the download's JSON format (k12vista-leaderboard.v2):
    each entry names its inference and scoring run (``run``, with links here),
    and ``waiting`` lists inference runs with no finished scoring run yet."""
    mode = request.query_params.get("mode") or None
    if mode is not None and mode not in leaderboard.MODES:
        raise ValidationError({"mode": [f"one of {', '.join(leaderboard.MODES)}"]})
    protocol = request.query_params.get("protocol") or None
    if protocol is not None and protocol not in models.Protocol.values:
        raise ValidationError({"protocol": [f"one of {', '.join(models.Protocol.values)}"]})
    state = board_state(mode, protocol=protocol)
    document = leaderboard.to_document(state.board)
    document["protocols"] = state.protocols
    for entry in document["entries"]:
        if entry["run"]:
            entry["run"]["inference_run_url"] = reverse("inference_api:run", args=[entry["run"]["inference_run"]])
            entry["run"]["scoring_run_page"] = reverse("inference:scoring", args=[entry["run"]["scoring_run"]])
    document["waiting"] = [
        {"inference_run": w.inference_run, "model": w.model, "mode": w.mode,
         "not_counted": [{"scoring_run": n.scoring_run, "name": n.name, "status": n.status} for n in w.not_counted]}
        for w in state.waiting
    ]  # fmt: skip
    return Response(document)


class PinInput(InputSerializer):
    scoring_run = serializers.IntegerField(help_text="a finished scoring run of one of your inference runs")


@extend_schema(request=PinInput, responses={201: PinOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def leaderboard_pin(request: Request) -> Response:
    """Makes a finished scoring run represent its inference run on the leaderboard."""
    data = PinInput(data=request.data)
    data.is_valid(raise_exception=True)
    scoring_run = get_scoring_run_for_user(request.user, data.validated_data["scoring_run"])
    try:
        pin = standings_service.pin_scoring_run(scoring_run=scoring_run, user=request.user)
    except standings_service.BoardError as exc:
        raise ValidationError({"scoring_run": [str(exc)]}) from None
    return Response({"inference_run": pin.inference_run_id, "scoring_run": pin.scoring_run_id}, status=201)


@extend_schema(request=None, responses={204: None})
@api_view(["DELETE"])
@permission_classes([MANAGERS])
def leaderboard_unpin(request: Request, pk: int) -> Response:
    """Back to the newest finished scoring run of inference run ``pk``."""
    run = get_run_for_user(request.user, pk)
    if not standings_service.unpin(inference_run_id=run.pk):
        raise NotFound("nothing is pinned for this run")
    return Response(status=status.HTTP_204_NO_CONTENT)


# --- the whole pipeline: scoring, assist runs, difficulty filters (issue 15) -------------
#
# Each start is the same service call as the page's (inference/views.py), behind
# the same access helpers; the reply names the run and its job, followed at
# /api/jobs/<id>/ or by reading the run again.


class ScoringInput(InputSerializer):
    judge = serializers.PrimaryKeyRelatedField(queryset=models.ModelEndpoint.objects.filter(active=True))
    method = serializers.ChoiceField(
        choices=models.ScoringRun.Method.choices, required=False, help_text="by default the one the run's mode needs"
    )
    params = ParamsInput(required=False, default=dict)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    protocol = serializers.ChoiceField(
        choices=models.Protocol.choices, default=models.Protocol.STUDIO,
        help_text="studio (structured output, our prompts) or reference (the K12Vista code's prompts and reading)",
    )  # fmt: skip


class ScoringRunOutput(serializers.ModelSerializer):
    judge_name = serializers.CharField(source="judge.name", read_only=True)
    job = JobSerializer(read_only=True)
    coverage = serializers.SerializerMethodField()
    params = typed_json(sampling.DefaultParams)
    provenance = typed_json(PROVENANCE)

    class Meta:
        model = models.ScoringRun
        fields = [
            "id", "name", "inference_run", "judge", "judge_name", "method", "protocol", "params", "provenance", "job",
            "coverage", "created",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(CoverageOutput)
    def get_coverage(self, scoring_run) -> dict:
        return scoring.coverage(scoring_run)


class JudgedStepOutput(serializers.ModelSerializer):
    class Meta:
        model = models.JudgedStep
        fields = ["position", "text", "label", "reason"]
        read_only_fields = fields


class JudgmentOutput(serializers.ModelSerializer):
    response = serializers.IntegerField(source="response_id", read_only=True)
    question = serializers.CharField(source="response.question.hash_id", read_only=True)
    steps = JudgedStepOutput(many=True, read_only=True)
    error_message = serializers.CharField(read_only=True)
    # A direct judgment's answers and scores, item by item (empty for step-by-step judgments).
    item_scores = typed_json({"type": "array", "items": {"type": "number"}})
    reference_answers = typed_json(STRINGS)
    model_answers = typed_json(STRINGS)

    class Meta:
        model = models.Judgment
        fields = [
            "id", "response", "question", "status", "score", "item_scores", "reference_answers", "model_answers",
            "parse_status", "raw_output", "attempts", "error", "error_message", "finished", "steps",
        ]  # fmt: skip
        read_only_fields = fields


def scoring_runs_for(user):
    """Scoring runs of the inference runs a person may see (as get_scoring_run_for_user)."""
    visible = runs_for(user)
    return models.ScoringRun.objects.filter(inference_run__in=visible).select_related("judge", "job__started_by")


class RunScoringList(generics.ListAPIView):
    """An inference run's scoring runs; POST starts one (the page's "Score")."""

    serializer_class = ScoringRunOutput
    permission_classes = [MANAGERS]
    pagination_class = Newest

    def get_queryset(self):
        run = get_run_for_user(self.request.user, self.kwargs["pk"])
        return scoring_runs_for(self.request.user).filter(inference_run=run)

    @extend_schema(request=ScoringInput, responses={201: ScoringRunOutput})
    def post(self, request: Request, pk: int) -> Response:
        run = get_run_for_user(request.user, pk)
        given = ScoringInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            scoring_run = scoring.start_scoring_run(
                inference_run=run, judge=data["judge"], method=data.get("method") or scoring_method_for(run),
                user=request.user, params=data["params"], name=data["name"], protocol=data["protocol"],
            )  # fmt: skip
        except (scoring.ScoringError, services.EndpointError) as exc:
            raise ValidationError({"detail": [str(exc)]}) from exc
        return Response(ScoringRunOutput(scoring_run).data, status=status.HTTP_201_CREATED)


class ScoringList(generics.ListAPIView):
    """Every scoring run the caller may see, newest first."""

    serializer_class = ScoringRunOutput
    permission_classes = [MANAGERS]
    pagination_class = Newest

    def get_queryset(self):
        return scoring_runs_for(self.request.user)


class ScoringDetail(generics.RetrieveAPIView):
    """A scoring run with its job and coverage (judgments per status)."""

    serializer_class = ScoringRunOutput
    permission_classes = [MANAGERS]

    def get_object(self):
        return get_scoring_run_for_user(self.request.user, self.kwargs["pk"])


class ScoringJudgments(generics.ListAPIView):
    """A scoring run's judgments in id order, with their labelled steps, a cursor page at a time."""

    serializer_class = JudgmentOutput
    permission_classes = [MANAGERS]
    pagination_class = ById

    def get_queryset(self):
        scoring_run = get_scoring_run_for_user(self.request.user, self.kwargs["pk"])
        steps = Prefetch("steps", queryset=models.JudgedStep.objects.order_by("position"))
        return scoring_run.judgments.select_related("response__question").prefetch_related(steps)


@extend_schema(request=None, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
def scoring_rescore(request: Request, pk: int) -> Response:
    """Scores the failed or unreadable judgments again (the page's "Score the failed again")."""
    scoring_run = get_scoring_run_for_user(request.user, pk)
    try:
        job = scoring.rescore_failed(scoring_run=scoring_run, user=request.user)
    except scoring.ScoringError as exc:
        raise ValidationError({"detail": [str(exc)]}) from exc
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=None, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
def run_retry(request: Request, pk: int) -> Response:
    """Asks the failed answers of run ``pk`` again (the page's "Retry the failed")."""
    run = get_run_for_user(request.user, pk)
    try:
        job = services.retry_failed(run=run, user=request.user)
    # Still being answered (400, as a rescore of a running scoring run), or an offline engine that fits no
    # GPU class any more.
    except (services.RetryRefused, services.EndpointError) as exc:
        raise ValidationError({"detail": [str(exc)]}) from exc
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class AssistInput(InputSerializer):
    kind = serializers.ChoiceField(choices=models.AssistRun.Kind.choices)
    endpoint = serializers.PrimaryKeyRelatedField(queryset=models.ModelEndpoint.objects.all())
    filters = FiltersInput(required=False, default=dict)
    params = ParamsInput(required=False, default=dict)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class AssistRunOutput(serializers.ModelSerializer):
    endpoint_name = serializers.CharField(source="endpoint.name", read_only=True)
    job = JobSerializer(read_only=True)
    counts = serializers.SerializerMethodField()
    filters = typed_json(FiltersInput)
    params = typed_json(sampling.DefaultParams)
    provenance = typed_json(PROVENANCE)

    class Meta:
        model = models.AssistRun
        fields = ["id", "name", "kind", "endpoint", "endpoint_name", "filters", "params", "provenance", "job", "counts",
                  "created"]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(AssistCountsOutput)
    def get_counts(self, run) -> dict:
        return assist.counts(run)


def assist_runs_for(user):
    """A person's own assist runs; administrators see all (as filter_runs_for and runs_for)."""
    require_role(user, Role.RESEARCHER, Role.ADMIN)
    runs = models.AssistRun.objects.select_related("endpoint", "job__started_by")
    return runs if user.has_perm("k12vista.administer") else runs.filter(created_by=user)


class AssistList(generics.ListAPIView):
    """Assist runs (restructuring, structure checks, captions, difficulty filters); POST starts one."""

    serializer_class = AssistRunOutput
    permission_classes = [MANAGERS]
    pagination_class = Newest

    def get_queryset(self):
        return assist_runs_for(self.request.user)

    @extend_schema(request=AssistInput, responses={201: AssistRunOutput})
    def post(self, request: Request) -> Response:
        given = AssistInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            run = assist.start_assist_run(
                kind=data["kind"], endpoint=data["endpoint"], filters=data["filters"], user=request.user,
                params=data["params"], name=data["name"],
            )  # fmt: skip
        except services.EndpointError as exc:
            field = "filters" if isinstance(exc, services.NoQuestions) else "endpoint"
            raise ValidationError({field: [str(exc)]}) from exc
        return Response(AssistRunOutput(run).data, status=status.HTTP_201_CREATED)


class AssistDetail(generics.RetrieveAPIView):
    serializer_class = AssistRunOutput
    permission_classes = [MANAGERS]

    def get_queryset(self):
        return assist_runs_for(self.request.user)


@extend_schema(request=None, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
def assist_retry(request: Request, pk: int) -> Response:
    """Asks the failed items of assist run ``pk`` again."""
    run = generics.get_object_or_404(assist_runs_for(request.user), pk=pk)
    try:
        job = assist.retry_failed(run=run, user=request.user)
    except services.RetryRefused as exc:  # its job is still queued or running (400, as a run's retry)
        raise ValidationError({"detail": [str(exc)]}) from exc
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class FilterRunsInput(InputSerializer):
    small = serializers.ListField(child=serializers.IntegerField(), required=False, default=list,
                                  help_text="small-model filter runs")  # fmt: skip
    text_only = serializers.IntegerField(required=False, allow_null=True, default=None,
                                         help_text="a text-only filter run")  # fmt: skip


class FilterConfirmInput(FilterRunsInput):
    fingerprint = serializers.CharField(help_text="the preview's fingerprint: confirms exactly what it counted")


class VerdictOutput(serializers.Serializer):
    run = serializers.IntegerField(source="run.pk")
    correct = serializers.BooleanField(allow_null=True)
    answer = serializers.CharField(allow_blank=True)
    status = serializers.CharField(allow_null=True)


class EvidenceOutput(serializers.Serializer):
    question = serializers.CharField(source="question.hash_id")
    question_id = serializers.IntegerField(source="question.pk")
    rules = serializers.ListField(child=serializers.CharField())
    verdicts = VerdictOutput(many=True)
    removed = serializers.BooleanField()
    released = serializers.BooleanField()


class FilterPreviewOutput(serializers.Serializer):
    fingerprint = serializers.CharField()
    candidates = serializers.IntegerField()
    to_remove = serializers.ListField(child=serializers.IntegerField())
    already_rejected = serializers.IntegerField()
    released = serializers.IntegerField()
    unchecked = serializers.DictField(child=serializers.IntegerField())
    evidence = EvidenceOutput(many=True, help_text="the first 200 with each run's verdict, as on the page")


def chosen_filter_runs(user, data) -> tuple[list, models.AssistRun | None]:
    """The runs named in ``data``, among those the caller may combine (404 otherwise)."""
    runs = filter_runs_for(user)
    small = [generics.get_object_or_404(runs, pk=pk) for pk in data["small"]]
    text_only = generics.get_object_or_404(runs, pk=data["text_only"]) if data["text_only"] is not None else None
    return small, text_only


def preview_document(preview: difficulty.FilterPreview) -> dict:
    return {
        "fingerprint": preview.fingerprint, "candidates": len(preview.candidates), "to_remove": list(preview.to_remove),
        "already_rejected": preview.already_rejected, "released": preview.released,
        "unchecked": {str(pk): n for pk, n in preview.unchecked.items()},
        "evidence": difficulty.filter_evidence(preview),
    }  # fmt: skip


@extend_schema(request=FilterRunsInput, responses={200: FilterPreviewOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def filters_preview(request: Request) -> Response:
    """What the difficulty filters would remove (nothing changes); confirm with its fingerprint."""
    given = FilterRunsInput(data=request.data)
    given.is_valid(raise_exception=True)
    small, text_only = chosen_filter_runs(request.user, given.validated_data)
    try:
        preview = difficulty.preview_filters(small, text_only)
    except difficulty.FilterError as exc:
        raise ValidationError({"detail": [str(exc)]}) from exc
    return Response(FilterPreviewOutput(preview_document(preview)).data)


@extend_schema(request=FilterConfirmInput, responses={202: JobSerializer, 409: FilterPreviewOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def filters_confirm(request: Request) -> Response:
    """Starts the job that rejects what the preview with this fingerprint showed (202 with the job);
    409 with the new preview if it changed since."""
    given = FilterConfirmInput(data=request.data)
    given.is_valid(raise_exception=True)
    small, text_only = chosen_filter_runs(request.user, given.validated_data)
    try:
        fingerprint = given.validated_data["fingerprint"]
        job = difficulty.start_confirm_filters(
            small_runs=small, text_only_run=text_only, fingerprint=fingerprint, user=request.user
        )
    except difficulty.StaleConfirmation:
        preview = difficulty.preview_filters(small, text_only)
        return Response(FilterPreviewOutput(preview_document(preview)).data, status=status.HTTP_409_CONFLICT)
    except difficulty.FilterError as exc:
        raise ValidationError({"detail": [str(exc)]}) from exc
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
