"""PEBench releases through the API: the same services and the same blind rule as the pages
(``pem.releases.may_read``: never to annotators nor to anyone with an open labelling task)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista.schema_fields import keyed, typed_json
from k12vista.serializers import InputSerializer
from pem import releases
from pem.agreement_shapes import StepAgreementReport
from pem.models import PEBenchRelease


class Table3PEBench(serializers.Serializer):
    """The paper's Table 3 PEBench rows over the items with gold on every step (statistics.table_3_pebench)."""

    records = serializers.IntegerField()
    solution_tokens = serializers.FloatField(allow_null=True, help_text="means: null over no record")
    problem_tokens = serializers.FloatField(allow_null=True)
    student_input_tokens = serializers.FloatField(allow_null=True)
    student_input_steps = serializers.FloatField(allow_null=True)
    student_error_steps = serializers.FloatField(allow_null=True)
    tokenizer = serializers.CharField()


class JudgeAccuracy(serializers.Serializer):
    rater = serializers.CharField()
    accuracy = serializers.FloatField(allow_null=True)


class AgreementHeadline(serializers.Serializer):
    """The values of the release's agreement report people read first (its intervals are in ``agreement``)."""

    cohen_kappa = serializers.FloatField(allow_null=True)
    krippendorff_alpha = serializers.FloatField(allow_null=True)
    gwet_ac1 = serializers.FloatField(allow_null=True)
    judges = JudgeAccuracy(many=True)


class PEBenchSummary(serializers.Serializer):
    """The release's summary (releases.summarize): every key is there once the build has summarized it."""

    items = serializers.IntegerField(required=False)
    steps = serializers.IntegerField(required=False)
    reference_items = serializers.IntegerField(required=False, help_text="items with gold on every step")
    items_without_gold = serializers.IntegerField(required=False)
    gold_labels = keyed(serializers.IntegerField(), "step label: gold steps with it", required=False)
    statistics = Table3PEBench(required=False)
    agreement = AgreementHeadline(required=False)


class PEBenchReleaseOutput(serializers.ModelSerializer):
    download = serializers.SerializerMethodField()
    summary = typed_json(PEBenchSummary)

    class Meta:
        model = PEBenchRelease
        fields = ["version", "name", "status", "error", "studio_commit", "summary", "sha256", "size", "created",
                  "published", "job", "download"]  # fmt: skip

    def get_download(self, release: PEBenchRelease) -> str | None:
        return reverse("pem:pebench_release_file", args=[release.version]) if release.path else None


class PEBenchReleaseDetailOutput(PEBenchReleaseOutput):
    agreement = typed_json(StepAgreementReport)

    class Meta(PEBenchReleaseOutput.Meta):
        fields = [*PEBenchReleaseOutput.Meta.fields, "agreement"]


class PEBenchFieldChange(serializers.Serializer):
    field = serializers.CharField(help_text="steps, question_text, reference_answer, response or labels")
    diff = serializers.ListField(child=serializers.CharField(), help_text="unified diff lines")


class PEBenchChangedItem(serializers.Serializer):
    key = serializers.CharField()
    fields = PEBenchFieldChange(many=True)  # type: ignore[assignment]  # off the class (DRF's metaclass)


class PEBenchCompareOutput(serializers.Serializer):
    """What changed from one PEBench release to another (releases.compare_releases)."""

    old = serializers.IntegerField()
    new = serializers.IntegerField()
    added = serializers.ListField(child=serializers.CharField(), help_text="item keys")
    removed = serializers.ListField(child=serializers.CharField(), help_text="item keys")
    changed = PEBenchChangedItem(many=True)


class PEBenchReleaseInput(InputSerializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


def check_reader(request: Request, *, build: bool = False) -> None:
    if not (releases.may_build if build else releases.may_read)(request.user):
        raise PermissionDenied("PEBench releases hold every item's labels: not for annotators or open labelling tasks")


@extend_schema(request=PEBenchReleaseInput, responses={200: PEBenchReleaseOutput(many=True), 202: PEBenchReleaseOutput})
@api_view(["GET", "POST"])
def release_list(request: Request) -> Response:
    check_reader(request, build=request.method == "POST")
    if request.method == "POST":
        given = PEBenchReleaseInput(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            release = releases.start_release(by=request.user, name=given.validated_data["name"])
        except releases.PEBenchReleaseError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(PEBenchReleaseOutput(release).data, status=status.HTTP_202_ACCEPTED)
    return Response(PEBenchReleaseOutput(PEBenchRelease.objects.all()[:100], many=True).data)


@extend_schema(responses={200: PEBenchReleaseDetailOutput})
@api_view(["GET"])
def release_detail(request: Request, version: int) -> Response:
    check_reader(request)
    release = get_object_or_404(PEBenchRelease, version=version)
    return Response(PEBenchReleaseDetailOutput(release).data)


@extend_schema(request=None, responses={200: PEBenchReleaseOutput})
@api_view(["POST"])
def release_publish(request: Request, version: int) -> Response:
    check_reader(request, build=True)
    release = get_object_or_404(PEBenchRelease, version=version)
    try:
        release = releases.publish_release(release=release, by=request.user)
    except releases.PEBenchReleaseError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response(PEBenchReleaseOutput(release).data)


@extend_schema(responses={200: PEBenchCompareOutput})
@api_view(["GET"])
def release_compare(request: Request) -> Response:
    check_reader(request)
    versions = [request.query_params.get("old", ""), request.query_params.get("new", "")]
    if not all(v.isdecimal() for v in versions):
        raise ValidationError({"detail": "give the versions to compare as ?old=N&new=M"})
    old, new = (get_object_or_404(PEBenchRelease, version=int(v)) for v in versions)
    return Response(releases.compare_releases(old, new))
