"""The audit API: list and create audits, read a report, submit a rating.

The same service calls as the screens; a rating is reached only through the
caller's own rating row, so an item outside their queue is a 404."""

from __future__ import annotations

from typing import cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista.models import Job
from k12vista.pagination import Newest
from k12vista.roles import HasRole, Role
from k12vista.schema_fields import EstimateOutput, ProportionOutput, keyed, typed_json
from k12vista.serializers import InputSerializer
from pem.agreement_shapes import RawAgreementOutput
from review import reports, services
from review.forms import inspectors
from review.job_shapes import PopulationInput
from review.models import Audit
from review.plan_api import SamplingPlanOutput
from review.views import get_audit_for_user, get_rating_for_user

READERS = HasRole(Role.INSPECTOR, Role.ADMIN)


class StratumCount(serializers.Serializer):
    """A stratum as the audit drew it (services.StratumDraw.summary)."""

    available = serializers.IntegerField()
    size = serializers.IntegerField(help_text="asked for: the fixed number or the plan's sample size")
    taken = serializers.IntegerField()
    note = serializers.CharField()
    plan = SamplingPlanOutput(allow_null=True, help_text="the single sampling plan, with an AQL")


class AuditOutput(serializers.ModelSerializer):
    items = serializers.SerializerMethodField()
    # The stored JSON as it is, typed in the schema (issue 29): the population by the input that wrote it.
    population = typed_json(PopulationInput)
    strata = serializers.ListField(child=serializers.CharField(), read_only=True)
    strata_counts = typed_json(serializers.DictField(child=StratumCount(), help_text="keyed by stratum"))
    # "question" or "pebench"; plain text, so its enum does not collide with other apps' "kind" fields.
    kind = serializers.CharField(read_only=True)
    inspectors: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="username"
    )

    class Meta:
        model = Audit
        fields = ["id", "name", "kind", "population", "strata", "size_rule", "per_stratum", "aql", "seed",
                  "inspectors", "inspectors_per_item", "population_count", "strata_counts", "created", "closed",
                  "items"]  # fmt: skip
        read_only_fields = fields

    def get_items(self, audit) -> int:
        return audit.items.filter(round=1).count()


# --- the audit report (reports.build_report), typed for the schema (issue 29) ----------------------

RATES = "dimension, and all (every dimension passed)"


class ReportAudit(serializers.Serializer):
    """The audit as the report names it."""

    id = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    kind = serializers.CharField()
    population = PopulationInput()
    strata = serializers.ListField(child=serializers.CharField())
    size_rule = serializers.CharField()
    per_stratum = serializers.IntegerField(allow_null=True)
    aql = serializers.FloatField(allow_null=True)
    seed = serializers.IntegerField()
    inspectors_per_item = serializers.IntegerField()
    population_count = serializers.IntegerField()
    created = serializers.DateTimeField()


class StratumDecision(serializers.Serializer):
    decision = serializers.CharField(help_text="accept, reject or pending (not every item rated yet)")
    defects = serializers.IntegerField()
    accept = serializers.IntegerField(help_text="Ac: accept with this many defective items or fewer")
    reject = serializers.IntegerField(help_text="Re")


class ReportStratum(serializers.Serializer):
    stratum = serializers.CharField()
    available = serializers.IntegerField()
    sampled = serializers.IntegerField()
    rated = serializers.IntegerField()
    complete = serializers.IntegerField()
    note = serializers.CharField(allow_blank=True)
    plan = SamplingPlanOutput(allow_null=True)
    rates = keyed(ProportionOutput(), RATES)
    decision = StratumDecision(allow_null=True, help_text="null without a plan or without rated items")


class ReportOverall(serializers.Serializer):
    rates = keyed(ProportionOutput(), RATES)
    decision = serializers.CharField(allow_null=True, help_text="accept, reject or pending; null without a plan")


class DimensionAgreement(serializers.Serializer):
    fleiss_kappa = EstimateOutput()
    unanimous = RawAgreementOutput()


class InspectorTime(serializers.Serializer):
    ratings_timed = serializers.IntegerField()
    median_seconds = serializers.FloatField()


class ActiveTime(serializers.Serializer):
    median_seconds = serializers.FloatField(allow_null=True, help_text="per rating; null when none was timed")
    by_inspector = keyed(InspectorTime(), "inspector's username")
    guideline_versions = serializers.ListField(child=serializers.CharField())


class AnnotatorDefects(serializers.Serializer):
    annotator = serializers.CharField()
    annotator_id = serializers.IntegerField()
    rate = ProportionOutput(help_text="the items they worked on that failed a dimension their stage produced")
    by_dimension = keyed(serializers.IntegerField(), "dimension: failed items")


class ReworkCounts(serializers.Serializer):
    sent = serializers.IntegerField()
    reaudited = serializers.IntegerField()
    passed_after_rework = serializers.IntegerField()


class StratumChange(serializers.Serializer):
    stratum = serializers.CharField()
    then = serializers.IntegerField()
    now = serializers.IntegerField()


class PopulationChange(serializers.Serializer):
    then = serializers.IntegerField()
    now = serializers.IntegerField()
    strata = StratumChange(many=True)


class AuditReportOutput(serializers.Serializer):
    """The audit's report as the JSON download has it (reports.build_report)."""

    audit = ReportAudit()
    dimensions = serializers.ListField(child=serializers.CharField())
    sampled = serializers.IntegerField()
    complete = serializers.IntegerField()
    strata = ReportStratum(many=True)
    overall = ReportOverall()
    agreement = keyed(DimensionAgreement(), "dimension")
    active_time = ActiveTime()
    annotators = AnnotatorDefects(many=True)
    rework = ReworkCounts()
    population_change = PopulationChange(allow_null=True, help_text="null: the population is as it was drawn")


class AuditInput(InputSerializer):
    name = serializers.CharField(max_length=200, required=False, default="")
    population = PopulationInput()
    strata = serializers.ListField(child=serializers.ChoiceField(choices=Audit.Stratum.choices), default=["subject"])
    per_stratum = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
    aql = serializers.FloatField(required=False, allow_null=True, default=None)
    seed = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    inspectors = serializers.SlugRelatedField(many=True, slug_field="username",
                                              queryset=get_user_model().objects.none())  # fmt: skip
    inspectors_per_item = serializers.IntegerField(min_value=1, max_value=20, required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        field = cast(serializers.ManyRelatedField, self.fields["inspectors"])  # many=True makes this class
        # The stubs read the Manager in the attribute's declared type as a descriptor.
        field.child_relation.queryset = inspectors()  # type: ignore[arg-type]


class RatingInput(InputSerializer):
    verdicts = serializers.DictField(child=serializers.BooleanField())
    notes = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=4000), required=False,
                                  default=dict)  # fmt: skip
    active_seconds = serializers.FloatField(required=False, allow_null=True, default=None,
                                            help_text="active seconds spent rating (clamped to 0..4 h)")  # fmt: skip


class RatingOutput(serializers.Serializer):
    item = serializers.IntegerField(source="item_id")
    inspector = serializers.CharField(source="inspector.username")
    verdicts = serializers.DictField(child=serializers.BooleanField())
    notes = serializers.DictField(child=serializers.CharField())
    submitted = serializers.DateTimeField()
    updated = serializers.DateTimeField()
    active_seconds = serializers.IntegerField(allow_null=True)
    guideline_version = serializers.CharField()


class AuditList(generics.ListAPIView):
    serializer_class = AuditOutput
    permission_classes = [READERS]
    pagination_class = Newest
    queryset = Audit.objects.prefetch_related("inspectors")

    @extend_schema(
        request=AuditInput,
        responses={
            201: AuditOutput,
            202: inline_serializer("AuditJob", {"job": serializers.IntegerField(), "status": serializers.CharField()}),
        },
    )
    def post(self, request: Request) -> Response:
        given = AuditInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        data.setdefault("inspectors_per_item", settings.AUDIT_INSPECTORS_PER_ITEM)
        try:
            made = services.start_audit(**data, by=request.user)
        except services.AuditError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        if isinstance(made, Job):  # a large population: the job draws it; /api/jobs/<id>/ follows it
            return Response({"job": made.pk, "status": made.status}, status=status.HTTP_202_ACCEPTED)
        return Response(AuditOutput(made).data, status=status.HTTP_201_CREATED)


class AuditDetail(generics.RetrieveAPIView):
    serializer_class = AuditOutput
    permission_classes = [READERS]

    def get_object(self):
        return get_audit_for_user(self.request.user, self.kwargs["pk"])


@extend_schema(responses={200: AuditReportOutput})
@api_view(["GET"])
@permission_classes([READERS])
def audit_report(request: Request, pk: int) -> Response:
    """The report as the JSON download has it."""
    return Response(reports.build_report(get_audit_for_user(request.user, pk)))


@extend_schema(request=RatingInput, responses={200: RatingOutput})
@api_view(["POST"])
@permission_classes([HasRole(Role.INSPECTOR)])
def submit_rating(request: Request, item_pk: int) -> Response:
    """Rates an item in the caller's queue; rating it again edits the same rating."""
    rating = get_rating_for_user(request.user, item_pk)
    given = RatingInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        saved = services.submit_rating(rating=rating, by=request.user, **given.validated_data)
    except services.AuditError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response(RatingOutput(saved).data)
