"""PEBench as the paper measures it, through the API: start a judge on the gold step lists
(pem.given_steps.start, the job that ``manage.py pebench_given_steps`` starts) and read its
positional accuracy per gold label and overall (the paper's Table 9)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from inference.models import ModelEndpoint
from inference.services import EndpointError
from k12vista.roles import HasRole, Role
from k12vista.serializers import InputSerializer, JobSerializer
from pem import given_steps
from pem.job_shapes import GivenStepsReport


class GivenStepsInput(InputSerializer):
    judge = serializers.PrimaryKeyRelatedField(queryset=ModelEndpoint.objects.all())
    prompt_set = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="",
        help_text="A registered reference prompt set (empty: the newest).",
    )  # fmt: skip


class GivenStepsQuery(InputSerializer):
    judge = serializers.PrimaryKeyRelatedField(queryset=ModelEndpoint.objects.all())


class GivenStepsStarted(serializers.Serializer):
    rater = serializers.CharField(help_text="The rater its step labels are stored under.")
    job = JobSerializer()


class GivenSteps(APIView):
    permission_classes = [HasRole(Role.RESEARCHER, Role.ADMIN)]

    @extend_schema(
        parameters=[OpenApiParameter("judge", int, required=True, description="the judge endpoint's id")],
        responses={200: GivenStepsReport},
    )
    def get(self, request: Request) -> Response:
        """The judge's labels of the given steps against gold, compared by position (computed now)."""
        given = GivenStepsQuery(data=request.query_params)
        given.is_valid(raise_exception=True)
        judge = given.validated_data["judge"]
        return Response(GivenStepsReport(given_steps.report(given_steps.rater_for(judge))).data)

    @extend_schema(request=GivenStepsInput, responses={202: GivenStepsStarted})
    def post(self, request: Request) -> Response:
        """Starts the judge on every PEBench item's gold step list that it has not labelled yet."""
        given = GivenStepsInput(data=request.data)
        given.is_valid(raise_exception=True)
        judge = given.validated_data["judge"]
        try:
            job = given_steps.start(judge=judge, user=request.user, prompt_set=given.validated_data["prompt_set"])
        except (given_steps.GivenStepsError, EndpointError) as exc:
            raise ValidationError({"judge": [str(exc)]}) from exc
        started = {"rater": given_steps.rater_for(judge), "job": JobSerializer(job).data}
        return Response(started, status=status.HTTP_202_ACCEPTED)
