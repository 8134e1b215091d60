"""Deciding and closing an audit through the API (issue 29): the audit page's decide button (the plan's
decision, or an inspector's decision on one lot of an audit without a plan) and its close button. The same
services and access rule as the pages (review/views.py: audit_decide, audit_close)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista.roles import HasRole, Role
from k12vista.serializers import InputSerializer
from review import decisions, services
from review.api import AuditOutput
from review.models import LotDecision
from review.views import get_audit_for_user

READERS = HasRole(Role.INSPECTOR, Role.ADMIN)


class DecideInput(InputSerializer):
    """Empty for an audit with a sampling plan; for one without, the lot (stratum) and the decision."""

    stratum = serializers.CharField(max_length=200, required=False, default="",
                                    help_text="an audit without a plan: the lot (one of its strata)")  # fmt: skip
    decision = serializers.ChoiceField(choices=LotDecision.Decision.choices, required=False, default="",
                                       help_text="an audit without a plan: accept or reject the lot")  # fmt: skip


class LotDecisionOutput(serializers.Serializer):
    id = serializers.IntegerField(help_text="the lot decision; a rejected lot is audited again at "
                                            "/api/inspect/lots/<id>/reaudit/")  # fmt: skip
    stratum = serializers.CharField()
    decision = serializers.CharField()
    defects = serializers.IntegerField()
    sampled = serializers.IntegerField()
    moved = serializers.IntegerField()
    reworked = serializers.IntegerField()
    reaudit = serializers.IntegerField(source="reaudit_id", allow_null=True)
    left_behind = serializers.SerializerMethodField(
        help_text="the lot's questions the decision could not move, by status (not yet at the audit stage)"
    )

    def get_left_behind(self, lot: LotDecision) -> dict[str, int]:
        return decisions.left_behind(lot)


class DecisionOutput(serializers.Serializer):
    lots = LotDecisionOutput(many=True, help_text="the lots decided; empty while no lot has all its ratings")


class ErrorOutput(serializers.Serializer):
    detail = serializers.CharField()


def _refused(exc: services.AuditError) -> Response:
    code = status.HTTP_409_CONFLICT if isinstance(exc, decisions.LotAlreadyDecided) else status.HTTP_400_BAD_REQUEST
    return Response({"detail": str(exc)}, status=code)


@extend_schema(request=DecideInput, responses={200: DecisionOutput, 400: ErrorOutput, 409: ErrorOutput})
@api_view(["POST"])
@permission_classes([READERS])
def audit_decide(request: Request, pk: int) -> Response:
    """Applies the plan's decision to every decided lot, or (an audit without a plan) accepts or rejects the
    lot named by ``stratum``: accepted lots move to audited, rejected lots go back for rework. Deciding a lot
    the other way than it was decided is a 409."""
    audit = get_audit_for_user(request.user, pk)
    given = DecideInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        lots = decisions.decide(audit=audit, by=request.user, **given.validated_data)
    except services.AuditError as exc:
        return _refused(exc)
    return Response(DecisionOutput({"lots": lots}).data)


@extend_schema(request=None, responses={200: AuditOutput})
@api_view(["POST"])
@permission_classes([READERS])
def audit_close(request: Request, pk: int) -> Response:
    """Closes the audit: its open ratings end and lots not yet decided stay undecided. Closing a closed audit
    leaves it as it was (``closed`` keeps its first date)."""
    audit = services.close_audit(audit=get_audit_for_user(request.user, pk), by=request.user)
    return Response(AuditOutput(audit).data)
