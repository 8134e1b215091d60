"""API for PEBench data: start an import, an export or a PEBench build.

All three are jobs: the answer is the job (202), followed at
``/api/jobs/<id>/``; its ``result`` holds the import report, the export's
file path and SHA-256, or the build and what it took per stratum. The same services as the screens (pem/data_views.py).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import parsers, serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista.import_files import ImportFileError
from k12vista.roles import HasRole, Role
from k12vista.serializers import InputSerializer, JobSerializer
from pem import jobs, services
from pem.build import DEFAULT_STRATA, STRATUM_FIELDS
from pem.data_forms import RunChoiceForm, ScoringChoiceForm
from pem.models import PEBenchBuild

MANAGERS = HasRole(Role.RESEARCHER, Role.ADMIN)


class ImportInput(InputSerializer):
    file = serializers.FileField()
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class ExportInput(InputSerializer):
    build = serializers.PrimaryKeyRelatedField(queryset=PEBenchBuild.objects.all(), required=False, allow_null=True)


class BuildInput(InputSerializer):
    target_size = serializers.IntegerField(min_value=1, max_value=1_000_000)
    min_steps = serializers.IntegerField(min_value=1, max_value=1000)
    strata = serializers.ListField(child=serializers.ChoiceField(choices=STRATUM_FIELDS), default=list(DEFAULT_STRATA))
    seed = serializers.IntegerField(min_value=0, max_value=2**62)


@extend_schema(request={"multipart/form-data": ImportInput}, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
@parser_classes([parsers.MultiPartParser])
def import_file(request: Request) -> Response:
    given = ImportInput(data=request.data)
    given.is_valid(raise_exception=True)
    upload = given.validated_data["file"]
    try:
        stored = jobs.store_upload(upload)
    except ImportFileError as exc:
        raise ValidationError({"file": [str(exc)]}) from exc
    job = jobs.start_import(stored_name=stored, name=given.validated_data["name"] or upload.name, user=request.user)
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=ExportInput, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
def export(request: Request) -> Response:
    given = ExportInput(data=request.data)
    given.is_valid(raise_exception=True)
    job = jobs.start_export(user=request.user, build=given.validated_data.get("build"))
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=BuildInput, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
def build(request: Request) -> Response:
    """Starts a PEBench build; the job's result names the build and what it took per stratum."""
    given = BuildInput(data=request.data)
    given.is_valid(raise_exception=True)
    job = jobs.start_build(**given.validated_data, user=request.user)
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


# --- chains from runs, labels from scoring (issue 15) -----------------------------------


class FromRunInput(InputSerializer):
    inference_run = serializers.IntegerField(help_text="one of your step-by-step inference runs")


class FromScoringInput(InputSerializer):
    scoring_run = serializers.IntegerField(help_text="one of your step-by-step scoring runs")


@extend_schema(request=FromRunInput, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
def from_run(request: Request) -> Response:
    """Chains of thought from an inference run's answers (the data page's "From a run")."""
    given = FromRunInput(data=request.data)
    given.is_valid(raise_exception=True)
    runs = RunChoiceForm(user=request.user).runs  # the page's choices
    run = get_object_or_404(runs, pk=given.validated_data["inference_run"])
    try:
        job = jobs.start_cots_from_run(inference_run=run, user=request.user)
    except services.PEBenchError as exc:
        raise ValidationError({"inference_run": [str(exc)]}) from exc
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=FromScoringInput, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
def from_scoring(request: Request) -> Response:
    """Step labels from a step-by-step scoring run's judgments (the data page's "From scoring")."""
    given = FromScoringInput(data=request.data)
    given.is_valid(raise_exception=True)
    runs = ScoringChoiceForm(user=request.user).runs
    scoring_run = get_object_or_404(runs, pk=given.validated_data["scoring_run"])
    try:
        job = jobs.start_labels_from_scoring_run(scoring_run=scoring_run, user=request.user)
    except services.PEBenchError as exc:
        raise ValidationError({"scoring_run": [str(exc)]}) from exc
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
