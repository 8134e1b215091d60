"""An inspector's audit items through the API (issue 29): the list of their own rating slots (no
guessing ids), rework, re-audit of an item and of a rejected lot. The same services and access
rules as the pages (review/views.py)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista.pagination import ById
from k12vista.roles import HasRole, Role, has_role, people_with_role
from k12vista.serializers import InputSerializer
from review import decisions, services
from review.models import LotDecision, Rating, Stage
from review.views import get_item_for_user

READERS = HasRole(Role.INSPECTOR, Role.ADMIN)


class MyItemOutput(serializers.Serializer):
    item = serializers.IntegerField(source="item_id")
    audit = serializers.IntegerField(source="item.audit_id")
    audit_name = serializers.CharField(source="item.audit.name")
    kind = serializers.CharField(source="item.kind")
    round = serializers.IntegerField(source="item.round")
    position = serializers.IntegerField(source="item.position")
    name = serializers.CharField(source="item.label", help_text="the question's hash id or the chain's key")
    rated = serializers.SerializerMethodField(help_text="whether this inspector has submitted a rating")
    rating_url = serializers.SerializerMethodField()
    dimensions = serializers.SerializerMethodField(help_text="the verdicts a rating of this item gives, by name")

    def get_dimensions(self, rating: Rating) -> list[str]:
        # A script rates without the page's form: it needs the names the rating must cover.
        return list(services.dimension_names(rating.item.kind))

    def get_rated(self, rating: Rating) -> bool:
        return rating.submitted is not None

    def get_rating_url(self, rating: Rating) -> str:
        return f"/api/inspect/items/{rating.item_id}/rating/"


@extend_schema(
    parameters=[
        OpenApiParameter("audit", int, description="only this audit's items"),
        OpenApiParameter("pending", bool, description="true: only the items not rated yet"),
    ]
)
class MyItems(generics.ListAPIView):
    """The caller's own rating slots, in the order the rating page hands them out."""

    serializer_class = MyItemOutput
    permission_classes = [HasRole(Role.INSPECTOR)]
    pagination_class = ById

    def get_queryset(self):
        ratings = Rating.objects.for_inspector(self.request.user).select_related("item__audit", "item__question",
                                                                                 "item__cot")  # fmt: skip
        audit = self.request.query_params.get("audit", "")
        if audit:
            if not audit.isdecimal():
                raise ValidationError({"audit": ["an audit id"]})
            ratings = ratings.filter(item__audit_id=int(audit))
        if self.request.query_params.get("pending", "").lower() in ("1", "true", "yes"):
            ratings = ratings.open().filter(item__audit__closed__isnull=True)
        return ratings  # in the order the slots were made (ById): audit, round, position


class ReworkInput(InputSerializer):
    stage = serializers.ChoiceField(choices=Stage.choices)
    note = serializers.CharField(max_length=4000)
    annotator = serializers.SlugRelatedField(slug_field="username", queryset=people_with_role(Role.ANNOTATOR),
                                             required=False, allow_null=True,
                                             help_text="administrators only: who reworks it")  # fmt: skip


class ReworkOutput(serializers.Serializer):
    item = serializers.IntegerField(source="item_id")
    stage = serializers.CharField()
    annotator = serializers.CharField(source="annotator.username")
    note = serializers.CharField()


class ItemRoundOutput(serializers.Serializer):
    item = serializers.IntegerField(source="pk")
    audit = serializers.IntegerField(source="audit_id")
    round = serializers.IntegerField()


@extend_schema(request=ReworkInput, responses={201: ReworkOutput})
@api_view(["POST"])
@permission_classes([READERS])
def item_rework(request: Request, pk: int) -> Response:
    """Sends a failed item back to the stage that produced the failure (as the item page's form)."""
    item = get_item_for_user(request.user, pk)
    given = ReworkInput(data=request.data)
    given.is_valid(raise_exception=True)
    annotator = given.validated_data.get("annotator")
    if annotator is not None and not has_role(request.user, Role.ADMIN):
        raise ValidationError({"annotator": ["only an administrator chooses who reworks an item"]})
    try:
        rework = services.send_for_rework(item=item, stage=given.validated_data["stage"],
                                          note=given.validated_data["note"], annotator=annotator,
                                          by=request.user)  # fmt: skip
    except services.AuditError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response(ReworkOutput(rework).data, status=status.HTTP_201_CREATED)


@extend_schema(request=None, responses={201: ItemRoundOutput})
@api_view(["POST"])
@permission_classes([READERS])
def item_reaudit(request: Request, pk: int) -> Response:
    """Puts a reworked item before the inspectors again, as the next round."""
    item = get_item_for_user(request.user, pk)
    try:
        next_round = services.reaudit(item=item, by=request.user)
    except services.AuditError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response(ItemRoundOutput(next_round).data, status=status.HTTP_201_CREATED)


@extend_schema(request=None, responses={201: inline_serializer("LotReaudit", {"audit": serializers.IntegerField()})})
@api_view(["POST"])
@permission_classes([READERS])
def lot_reaudit(request: Request, pk: int) -> Response:
    """Audits a rejected lot again once its rework is done: answers the new audit's id."""
    lot = get_object_or_404(LotDecision, pk=pk)
    try:
        again = decisions.reaudit_lot(lot=lot, by=request.user)
    except services.AuditError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response({"audit": again.pk}, status=status.HTTP_201_CREATED)
