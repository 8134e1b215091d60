"""The sampling-plan lookup over the API: GET ?lot_size=&aql= -> the plan as JSON."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista.roles import HasRole, Role
from review.sampling import AQL_HEADINGS, SamplingPlanError, single_sampling_plan

PLAN_READERS = HasRole(Role.INSPECTOR, Role.RESEARCHER, Role.ADMIN)


class PlanQuery(serializers.Serializer):
    # Only the types here; the table's own limits are checked (and explained) by the lookup.
    lot_size = serializers.IntegerField()
    aql = serializers.FloatField()


class SamplingPlanOutput(serializers.Serializer):
    lot_size = serializers.IntegerField()
    aql = serializers.FloatField()
    code_letter = serializers.CharField()
    plan_letter = serializers.CharField()
    sample_size = serializers.IntegerField()
    accept = serializers.IntegerField()
    reject = serializers.IntegerField()
    arrow = serializers.ChoiceField(choices=["down", "up"], allow_null=True)
    note = serializers.CharField()
    whole_lot = serializers.BooleanField()
    units_to_inspect = serializers.IntegerField()


@extend_schema(
    parameters=[
        OpenApiParameter("lot_size", int, required=True, description="Items in the lot (stratum), at least 2."),
        OpenApiParameter("aql", float, required=True, description=f"One of {', '.join(AQL_HEADINGS)}."),
    ],
    responses=SamplingPlanOutput,
)
@api_view(["GET"])
@permission_classes([PLAN_READERS])
def audit_plan(request: Request) -> Response:
    """ISO 2859-1 / ANSI Z1.4 single sampling, normal inspection, general level II."""
    query = PlanQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    try:
        plan = single_sampling_plan(**query.validated_data)
    except SamplingPlanError as exc:
        raise ValidationError({exc.field: [str(exc)]}) from None
    return Response(SamplingPlanOutput(plan).data)
