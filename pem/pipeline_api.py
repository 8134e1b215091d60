"""API for the PEM-800K pipeline: splitting runs and judge panels, with the same
services and access rules as the screens (pem/pipeline_views.py)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from inference.api import PROVENANCE
from inference.models import InferenceRun, ModelEndpoint, Protocol, ScoringRun
from inference.sampling import DefaultParams
from inference.scoring import NoAnswers, ScoringError
from inference.services import EndpointError
from k12vista.pagination import Newest
from k12vista.roles import HasRole, Role
from k12vista.schema_fields import typed_json
from k12vista.serializers import InputSerializer, JobSerializer
from pem import panel, splitting
from pem.models import PanelRun, SplitRun
from pem.pipeline_views import get_panel_for_user, get_split_run_for_user, mine

MANAGERS = HasRole(Role.RESEARCHER, Role.ADMIN)


class VisibleRuns(serializers.PrimaryKeyRelatedField):
    """Inference runs the requesting person may see; others read as unknown ids."""

    def get_queryset(self):
        return InferenceRun.objects.visible_to(self.context["request"].user)


class SplitInput(InputSerializer):
    splitter = serializers.PrimaryKeyRelatedField(queryset=ModelEndpoint.objects.all())
    runs = VisibleRuns(many=True, queryset=InferenceRun.objects.all())  # narrowed per request in get_queryset
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    min_coverage = serializers.FloatField(min_value=0.01, max_value=1, default=splitting.SPLIT_MIN_COVERAGE)


class SplitOutput(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)
    counts = serializers.SerializerMethodField()
    # As stored, typed in the schema (issue 29): the splitter's sampling parameters.
    params = typed_json(DefaultParams)
    provenance = typed_json(PROVENANCE)
    runs: serializers.PrimaryKeyRelatedField[InferenceRun] = serializers.PrimaryKeyRelatedField(
        source="inference_runs", many=True, read_only=True
    )

    class Meta:
        model = SplitRun
        fields = ["id", "name", "splitter", "runs", "params", "provenance", "job", "counts", "created"]
        read_only_fields = fields

    def get_counts(self, split_run) -> dict[str, int]:
        return splitting.counts(split_run)


class PanelInput(InputSerializer):
    name = serializers.CharField(max_length=200)
    judges = serializers.PrimaryKeyRelatedField(queryset=ModelEndpoint.objects.all(), many=True)
    runs = VisibleRuns(many=True, queryset=InferenceRun.objects.all())  # narrowed per request in get_queryset
    threshold = serializers.IntegerField(min_value=1, max_value=100, required=False, allow_null=True, default=None)
    explainer = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    protocol = serializers.ChoiceField(choices=Protocol.choices, default=Protocol.STUDIO)


class PanelCounts(serializers.Serializer):
    """What a panel decided (panel.vote); empty until its vote has run."""

    judges = serializers.ListField(required=False, child=serializers.CharField())
    threshold = serializers.IntegerField(required=False, allow_null=True)
    explainer = serializers.CharField(required=False)
    chains = serializers.IntegerField(required=False)
    chains_fully_decided = serializers.IntegerField(required=False)
    chains_with_no_majority = serializers.IntegerField(required=False)
    steps = serializers.IntegerField(required=False)
    decided = serializers.IntegerField(required=False)
    no_majority = serializers.IntegerField(required=False)
    missing_votes = serializers.DictField(
        required=False, child=serializers.IntegerField(), help_text="judge -> steps without vote"
    )
    labels = serializers.DictField(required=False, child=serializers.IntegerField(), help_text="label -> steps")


class PanelOutput(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)
    judges = serializers.ListField(child=serializers.CharField(), read_only=True, help_text="the judges' names")
    counts = typed_json(PanelCounts(required=False))
    runs: serializers.PrimaryKeyRelatedField[InferenceRun] = serializers.PrimaryKeyRelatedField(
        source="inference_runs", many=True, read_only=True
    )
    scoring_runs: serializers.PrimaryKeyRelatedField[ScoringRun] = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True
    )
    protocol = serializers.ChoiceField(choices=Protocol.choices, read_only=True)  # its judges' scoring runs'

    class Meta:
        model = PanelRun
        fields = ["id", "name", "judges", "threshold", "explainer", "protocol", "runs", "scoring_runs", "counts", "job",
                  "created"]  # fmt: skip
        read_only_fields = fields


class SplitList(generics.ListAPIView):
    serializer_class = SplitOutput
    permission_classes = [MANAGERS]
    pagination_class = Newest

    def get_queryset(self):
        return mine(SplitRun.objects.select_related("job"), self.request.user)

    @extend_schema(request=SplitInput, responses={201: SplitOutput})
    def post(self, request: Request) -> Response:
        given = SplitInput(data=request.data, context={"request": request})
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            split_run = splitting.start_split_run(splitter=data["splitter"], inference_runs=list(data["runs"]),
                                                  user=request.user, name=data["name"],
                                                  min_coverage=data["min_coverage"])  # fmt: skip
        except (splitting.SplitError, EndpointError) as exc:
            field = "runs" if isinstance(exc, splitting.NoAnswers) else "splitter"
            raise ValidationError({field: [str(exc)]}) from exc
        return Response(SplitOutput(split_run).data, status=status.HTTP_201_CREATED)


class SplitDetail(generics.RetrieveAPIView):
    serializer_class = SplitOutput
    permission_classes = [MANAGERS]

    def get_object(self):
        return get_split_run_for_user(self.request.user, self.kwargs["pk"])


class PanelList(generics.ListAPIView):
    serializer_class = PanelOutput
    permission_classes = [MANAGERS]
    pagination_class = Newest

    def get_queryset(self):
        return mine(PanelRun.objects.select_related("job"), self.request.user)

    @extend_schema(request=PanelInput, responses={201: PanelOutput})
    def post(self, request: Request) -> Response:
        given = PanelInput(data=request.data, context={"request": request})
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            started = panel.start_panel(name=data["name"], inference_runs=list(data["runs"]),
                                        judges=list(data["judges"]), user=request.user, threshold=data["threshold"],
                                        explainer=data["explainer"], protocol=data["protocol"])  # fmt: skip
        except (panel.PanelError, ScoringError, EndpointError) as exc:
            field = "runs" if isinstance(exc, NoAnswers) else "judges"
            raise ValidationError({field: [str(exc)]}) from exc
        return Response(PanelOutput(started).data, status=status.HTTP_201_CREATED)


class PanelDetail(generics.RetrieveAPIView):
    serializer_class = PanelOutput
    permission_classes = [MANAGERS]

    def get_object(self):
        return get_panel_for_user(self.request.user, self.kwargs["pk"])
