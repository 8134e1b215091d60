"""The campaign API: start a campaign and watch its runs, with the same services as the screens."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from inference import campaigns, models, services
from inference.api import MANAGERS, FiltersInput, Newest, ParamsInput
from inference.campaign_views import get_campaign_for_user
from k12vista.schema_fields import typed_json
from k12vista.serializers import InputSerializer, JobSerializer


class CampaignInput(InputSerializer):
    name = serializers.CharField(max_length=200)
    endpoints = serializers.PrimaryKeyRelatedField(queryset=models.ModelEndpoint.objects.all(), many=True)
    mode = serializers.ChoiceField(choices=models.InferenceRun.Mode.choices)
    input_form = serializers.ChoiceField(
        choices=models.InferenceRun.InputForm.choices, default=models.InferenceRun.InputForm.IMAGES
    )
    filters = FiltersInput(required=False, default=dict)
    params = ParamsInput(required=False, default=dict)
    seed = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, allow_null=True, default=None)
    protocol = serializers.ChoiceField(choices=models.Protocol.choices, default=models.Protocol.STUDIO)
    prompt_set = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class CampaignRunCounts(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    endpoint = serializers.CharField(help_text="the endpoint's name")
    status = serializers.CharField(allow_null=True, help_text="its job's status; null before the job starts it")
    ok = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    total = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()


class CampaignSummary(serializers.Serializer):
    """Every run's counts and tokens, and the totals (campaigns.Summary.as_dict)."""

    ok = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    total = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    finished = serializers.BooleanField()
    percent = serializers.IntegerField()
    runs = CampaignRunCounts(many=True)


class CampaignOutput(serializers.ModelSerializer):
    summary = serializers.SerializerMethodField()
    filters = typed_json(FiltersInput)  # as stored, typed in the schema (issue 29)
    params = typed_json(ParamsInput)

    class Meta:
        model = models.Campaign
        fields = ["id", "name", "mode", "input_form", "protocol", "prompt_set", "filters", "params", "seed", "created",
                  "job", "summary"]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(CampaignSummary)
    def get_summary(self, campaign) -> dict:
        return campaigns.summary(campaign).as_dict()


class CampaignList(generics.ListAPIView):
    serializer_class = CampaignOutput
    permission_classes = [MANAGERS]
    pagination_class = Newest

    def get_queryset(self):
        return models.Campaign.objects.visible_to(self.request.user)

    @extend_schema(request=CampaignInput, responses={201: CampaignOutput})
    def post(self, request: Request) -> Response:
        given = CampaignInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            campaign = campaigns.start_campaign(
                name=data["name"], endpoints=list(data["endpoints"]), mode=data["mode"], filters=data["filters"],
                user=request.user, input_form=data["input_form"], params=data["params"], seed=data["seed"],
                protocol=data["protocol"], prompt_set=data["prompt_set"],
            )  # fmt: skip
        except (campaigns.CampaignError, services.EndpointError) as exc:
            field = "filters" if isinstance(exc, services.NoQuestions) else "endpoints"
            raise ValidationError({field: [str(exc)]}) from exc
        return Response(CampaignOutput(campaign).data, status=status.HTTP_201_CREATED)


class CampaignDetail(generics.RetrieveAPIView):
    serializer_class = CampaignOutput
    permission_classes = [MANAGERS]

    def get_object(self):
        return get_campaign_for_user(self.request.user, self.kwargs["pk"])


class CampaignRetryOutput(serializers.Serializer):
    restarted = serializers.IntegerField(help_text="how many runs ask their failed questions again (0: none failed)")
    job = JobSerializer(source="campaign.job", allow_null=True, help_text="the campaign's job; follow it")


@extend_schema(request=None, responses={202: CampaignRetryOutput, 200: CampaignRetryOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def campaign_retry(request: Request, pk: int) -> Response:
    """Asks the failed questions of every run of the campaign again (the campaign page's retry): 202 with the
    new job, or 200 with ``restarted`` 0 when nothing failed; a campaign still running is a 400."""
    campaign = get_campaign_for_user(request.user, pk)
    try:
        restarted = campaigns.retry_failures(campaign=campaign, user=request.user)
    except (campaigns.CampaignError, services.EndpointError) as exc:  # an engine that fits no GPU class
        raise ValidationError({"detail": [str(exc)]}) from exc
    campaign.refresh_from_db()
    body = CampaignRetryOutput({"restarted": restarted, "campaign": campaign}).data
    return Response(body, status=status.HTTP_202_ACCEPTED if restarted else status.HTTP_200_OK)
