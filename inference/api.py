"""The inference API: endpoints, runs, their answers and the leaderboard.

Input and output serializers sit around the same service calls the screens
make; querysets are scoped by the same access helpers (runs_for)."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import Question
from inference import client, leaderboard, models, services
from inference import standings as standings_service
from inference.forms import ENV_NAME
from inference.standings import board_state
from inference.views import get_run_for_user, get_scoring_run_for_user, runs_for
from k12vista.pagination import ById, Newest
from k12vista.roles import HasRole, Role
from k12vista.serializers import JobSerializer
from k12vista.vocabulary import GRADES, QuestionType, Stage, Subject

MANAGERS = HasRole(Role.RESEARCHER, Role.ADMIN)
LEADERBOARD_READERS = HasRole(Role.RESEARCHER, Role.ADMIN, Role.INSPECTOR)


# --- serializers -----------------------------------------------------------------

ENDPOINT_FIELDS = [
    "name", "kind", "base_url", "model_name", "api_key_env", "max_concurrency", "timeout_seconds", "accepts_images",
    "max_image_side", "supports_json_schema", "default_params",
]  # fmt: skip


class EndpointInput(serializers.ModelSerializer):
    max_concurrency = serializers.IntegerField(min_value=1, max_value=512, default=8)

    class Meta:
        model = models.ModelEndpoint
        fields = ENDPOINT_FIELDS

    def validate_api_key_env(self, value: str) -> str:
        if value and not ENV_NAME.match(value):
            raise serializers.ValidationError("the name of an environment variable (letters, digits, _), not a key")
        if value and not client.key_variable_declared(value):
            raise serializers.ValidationError(
                f"{value} is not one of MODEL_API_KEY_VARIABLES ({', '.join(settings.MODEL_API_KEY_VARIABLES)})"
            )
        return value


class EndpointOutput(serializers.ModelSerializer):
    # Whether the variable is set on this server; the key itself is never read into a reply.
    api_key_state = serializers.SerializerMethodField()

    class Meta:
        model = models.ModelEndpoint
        fields = ["id", *ENDPOINT_FIELDS, "api_key_state", "active", "created"]
        read_only_fields = fields

    def get_api_key_state(self, endpoint) -> str:
        return client.key_state(endpoint)


class FiltersInput(serializers.Serializer):
    subject = serializers.ChoiceField(choices=Subject.choices, required=False)
    grade = serializers.ChoiceField(choices=list(GRADES), required=False)
    stage = serializers.ChoiceField(choices=Stage.choices, required=False)
    qtype = serializers.ChoiceField(choices=QuestionType.choices, required=False)
    status = serializers.ChoiceField(choices=Question.Status.choices, required=False)


class ParamsInput(serializers.Serializer):
    temperature = serializers.FloatField(min_value=0, max_value=2, required=False)
    max_tokens = serializers.IntegerField(min_value=1, max_value=200_000, required=False)
    top_p = serializers.FloatField(min_value=0, max_value=1, required=False)


class RunInput(serializers.Serializer):
    endpoint = serializers.PrimaryKeyRelatedField(queryset=models.ModelEndpoint.objects.all())
    mode = serializers.ChoiceField(choices=models.InferenceRun.Mode.choices)
    input_form = serializers.ChoiceField(
        choices=models.InferenceRun.InputForm.choices, default=models.InferenceRun.InputForm.IMAGES
    )
    filters = FiltersInput(required=False, default=dict)
    params = ParamsInput(required=False, default=dict)
    seed = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class RunOutput(serializers.ModelSerializer):
    endpoint_name = serializers.CharField(source="endpoint.name", read_only=True)
    job = JobSerializer(read_only=True)
    counts = serializers.SerializerMethodField()

    class Meta:
        model = models.InferenceRun
        fields = [
            "id", "name", "endpoint", "endpoint_name", "mode", "input_form", "filters", "params", "seed", "provenance",
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

    class Meta:
        model = models.Response
        fields = [
            "id", "question", "status", "raw_output", "latency_ms", "prompt_tokens", "completion_tokens",
            "finish_reason", "attempts", "error", "finished",
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
            raise ValidationError({"base_url": [str(exc)]}) from exc
        return Response(EndpointOutput(endpoint).data, status=status.HTTP_201_CREATED)


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
            )  # fmt: skip
        except services.EndpointError as exc:
            raise ValidationError({"endpoint": [str(exc)]}) from exc
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


@extend_schema(
    parameters=[OpenApiParameter("mode", str, enum=list(leaderboard.MODES), description="only this mode")],
    responses={200: dict},
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
    state = board_state(mode)
    document = leaderboard.to_document(state.board)
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


class PinInput(serializers.Serializer):
    scoring_run = serializers.IntegerField(help_text="a finished scoring run of one of your inference runs")


@extend_schema(request=PinInput, responses={201: dict})
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
