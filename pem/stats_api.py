"""The agreement API: a researcher uploads a ratings file and gets its statistics.

The same operation as ``manage.py agreement`` (pem.ratings.agreement_from_file);
the JSON shape is described there and in docs/agreement.md. Nothing is stored.
"""

from __future__ import annotations

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from k12vista.roles import HasRole, Role
from k12vista.serializers import InputSerializer
from pem.agreement_shapes import LabelRatingsReport, ScoreRatingsReport
from pem.ratings import SCALES, RatingsError, agreement_from_file

MAX_BYTES = 20 * 1024 * 1024


class RatingsInput(InputSerializer):
    file = serializers.FileField(help_text="CSV (header: item, rater, label or score) or JSONL")
    scale = serializers.ChoiceField(choices=SCALES, required=False, allow_blank=True, default="")
    categories = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="comma-separated; default: the nine step labels"
    )
    reference = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)

    def validate_file(self, upload):
        if upload.size > MAX_BYTES:
            raise serializers.ValidationError(f"the file is larger than {MAX_BYTES // (1024 * 1024)} MB")
        return upload


# The report's statistics differ by what was rated: labels (or scores on a nominal or ordinal scale) have
# label statistics, scores on an interval scale score statistics (pem.ratings.ratings_report). No key tells
# them apart, so the schema offers both, each strict enough that an answer is only ever one of them.
AgreementReportOutput = PolymorphicProxySerializer(
    component_name="AgreementReportOutput",
    serializers=[LabelRatingsReport, ScoreRatingsReport],
    resource_type_field_name=None,
)


class AgreementFromFile(APIView):
    permission_classes = [HasRole(Role.RESEARCHER)]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": RatingsInput},
        responses={
            200: AgreementReportOutput,
            400: inline_serializer("RatingsProblems", {"errors": serializers.ListField(child=serializers.CharField())}),
        },
    )
    def post(self, request: Request) -> Response:
        given = RatingsInput(data=request.data)
        given.is_valid(raise_exception=True)
        upload = given.validated_data["file"]
        categories = [c.strip() for c in given.validated_data["categories"].split(",") if c.strip()] or None
        try:
            report = agreement_from_file(
                upload.read(), filename=upload.name, categories=categories,
                scale=given.validated_data["scale"], reference=given.validated_data["reference"],
            )  # fmt: skip
        except RatingsError as exc:
            return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        except ValueError as exc:
            return Response({"errors": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(report)
