"""Imports through the API (issue 29): exam PDFs and question files (JSONL, or a zip of JSONL and
images), followed by the document and its job, and a stopped PDF import run again. The same services
and access rules as the imports page (annotation/views.py): annotators upload PDFs and see their own
uploads; researchers and administrators also import question files and see every import."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import parsers, serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotation import jsonl_import, pdf
from annotation.models import SourceDocument
from annotation.views import UPLOADERS, documents_for
from k12vista import import_files
from k12vista.roles import HasRole, Role
from k12vista.serializers import InputSerializer, JobSerializer
from k12vista.vocabulary import GRADES, Subject


class PdfImportInput(InputSerializer):
    file = serializers.FileField()
    subject = serializers.ChoiceField(choices=Subject.choices)
    grade = serializers.IntegerField(min_value=min(GRADES), max_value=max(GRADES))


class QuestionFileInput(InputSerializer):
    file = serializers.FileField(help_text="JSONL, or a zip of JSONL and images")


class DocumentOutput(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)
    questions = serializers.IntegerField(source="questions.count", read_only=True)
    error = serializers.CharField(
        source="error_message",
        read_only=True,
        help_text="Why the import stopped or was refused, in the caller's language ('' if it did not).",
    )

    class Meta:
        model = SourceDocument
        fields = ["id", "kind", "original_name", "sha256", "size", "page_count", "error", "created", "job",
                  "questions"]  # fmt: skip
        read_only_fields = fields


@extend_schema(request={"multipart/form-data": PdfImportInput}, responses={202: DocumentOutput})
@api_view(["POST"])
@permission_classes([HasRole(*UPLOADERS)])
@parser_classes([parsers.MultiPartParser])
def pdf_import(request: Request) -> Response:
    """One exam PDF: stored, then read by a job (follow ``job`` or the document)."""
    given = PdfImportInput(data=request.data)
    given.is_valid(raise_exception=True)
    data = given.validated_data
    try:
        document = pdf.register_pdf_upload(uploaded_file_or_path=data["file"], user=request.user)
        pdf.start_pdf_import(document=document, user=request.user, subject=data["subject"], grade=data["grade"])
    except pdf.PdfImportError as exc:
        raise ValidationError({"file": [str(exc)]}) from exc
    document.refresh_from_db()
    return Response(DocumentOutput(document).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request={"multipart/form-data": QuestionFileInput}, responses={202: DocumentOutput})
@api_view(["POST"])
@permission_classes([HasRole(Role.RESEARCHER, Role.ADMIN)])
@parser_classes([parsers.MultiPartParser])
def question_import(request: Request) -> Response:
    """A question file in the studio's or the reference's JSONL: stored, then imported by a job."""
    given = QuestionFileInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        document = jsonl_import.register_upload(uploaded_file=given.validated_data["file"], user=request.user)
    except import_files.ImportFileError as exc:
        raise ValidationError({"file": [str(exc)]}) from exc
    jsonl_import.start_import(document=document, user=request.user)
    document.refresh_from_db()
    return Response(DocumentOutput(document).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(responses={200: DocumentOutput})
@api_view(["GET"])
@permission_classes([HasRole(*UPLOADERS)])
def import_detail(request: Request, pk: int) -> Response:
    return Response(DocumentOutput(get_object_or_404(documents_for(request.user), pk=pk)).data)


@extend_schema(request=None, responses={202: DocumentOutput})
@api_view(["POST"])
@permission_classes([HasRole(*UPLOADERS)])
def import_retry(request: Request, pk: int) -> Response:
    """Runs a stopped PDF import again: it continues where the last run stopped."""
    document = get_object_or_404(documents_for(request.user).filter(kind=SourceDocument.Kind.PDF), pk=pk)
    try:
        pdf.retry_pdf_import(document=document, user=request.user)
    except pdf.PdfImportError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    document.refresh_from_db()
    return Response(DocumentOutput(document).data, status=status.HTTP_202_ACCEPTED)
