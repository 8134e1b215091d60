"""The API of corrections of released questions, with token auth: the same service calls as the pages
(annotation.corrections), so a script can open, fix, check and read a release's corrections."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import corrections
from annotation.benchmark_api import RESEARCHERS, ReleaseCorrectionRow
from annotation.benchmark_views import get_release_for_user
from annotation.models import Correction, Question
from k12vista.serializers import InputSerializer
from k12vista.vocabulary import QuestionType, Subject


class MayRead(BasePermission):
    def has_permission(self, request, view) -> bool:
        return corrections.may_read(request.user)


class ChangeOutput(serializers.Serializer):
    before = serializers.JSONField()
    after = serializers.JSONField()


class CorrectionOutput(serializers.ModelSerializer):
    hash_id = serializers.CharField(source="question.hash_id", read_only=True)
    found_in = serializers.IntegerField(source="found_in.version", read_only=True, allow_null=True, default=None)
    released_in = serializers.IntegerField(source="released_in.version", read_only=True, allow_null=True,
                                           default=None)  # fmt: skip
    opened_by = serializers.CharField(source="opened_by.username", read_only=True, default="")
    fixed_by = serializers.CharField(source="fixed_by.username", read_only=True, default="")
    checked_by = serializers.CharField(source="checked_by.username", read_only=True, default="")
    changes = serializers.DictField(child=ChangeOutput(), read_only=True, help_text="field -> {before, after}")

    class Meta:
        model = Correction
        fields = ["id", "hash_id", "state", "problem", "proposal", "found_in", "released_in", "opened_by", "opened",
                  "changes", "base_version", "fixed_by", "fixed", "checked_by", "checked", "check_note"]  # fmt: skip
        read_only_fields = fields


class OpenInput(InputSerializer):
    hash_id = serializers.CharField(max_length=64)
    problem = serializers.CharField(max_length=5000)
    proposal = serializers.CharField(max_length=5000, required=False, default="", allow_blank=True)


class OptionInput(InputSerializer):
    label = serializers.CharField(max_length=10)  # type: ignore[assignment]  # the option field "label" shadows Field.label in the stubs
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)


class QuestionChanges(InputSerializer):
    """The fields a fix may change (services.EDITABLE_FIELDS), each optional; services.validate checks
    what they mean."""

    subject = serializers.ChoiceField(choices=Subject.choices, required=False)
    grade = serializers.IntegerField(min_value=1, max_value=12, required=False)
    qtype = serializers.ChoiceField(choices=QuestionType.choices, required=False)
    text = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    options = OptionInput(many=True, required=False)
    answers = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    raw_solution = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    solution_steps = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    difficulty = serializers.FloatField(min_value=0, max_value=1, required=False, allow_null=True)
    source = serializers.CharField(required=False, allow_blank=True, max_length=300)  # type: ignore[assignment]  # the question field "source"
    knowledge_points = serializers.ListField(child=serializers.CharField(), required=False)


class FixInput(InputSerializer):
    changes = QuestionChanges(help_text="the corrected fields")


class CheckInput(InputSerializer):
    decision = serializers.ChoiceField(choices=["accept", "return"])
    note = serializers.CharField(max_length=5000, required=False, default="", allow_blank=True)


def _refused(exc: corrections.CorrectionError) -> Response:
    return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)


class CorrectionList(generics.ListCreateAPIView):
    """GET: the corrections (``?state=open|fixed|accepted|returned``); POST: open one on a released question."""

    serializer_class = CorrectionOutput
    permission_classes = [MayRead]

    def get_queryset(self):
        found = corrections.visible_to(self.request.user).order_by("-id")
        state = self.request.query_params.get("state", "")
        return found.filter(state=state) if state in Correction.State.values else found

    @extend_schema(request=OpenInput, responses={201: CorrectionOutput})
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        given = OpenInput(data=request.data)
        given.is_valid(raise_exception=True)
        question = get_object_or_404(Question, hash_id=given.validated_data["hash_id"])
        try:
            data = given.validated_data
            opened = corrections.open_correction(
                question=question, problem=data["problem"], proposal=data["proposal"], by=request.user
            )
        except corrections.CorrectionError as exc:
            return _refused(exc)
        return Response(CorrectionOutput(opened).data, status=status.HTTP_201_CREATED)


class CorrectionDetail(generics.RetrieveAPIView):
    serializer_class = CorrectionOutput
    permission_classes = [MayRead]
    queryset = Correction.objects.select_related("question", "found_in", "released_in")


class CorrectionFix(APIView):
    permission_classes = [MayRead]

    @extend_schema(request=FixInput, responses={200: CorrectionOutput})
    def post(self, request: Request, pk: int) -> Response:
        given = FixInput(data=request.data)
        given.is_valid(raise_exception=True)
        correction = get_object_or_404(Correction, pk=pk)
        try:
            fixed = corrections.fix_correction(correction=correction, changes=given.validated_data["changes"],
                                               by=request.user)  # fmt: skip
        except corrections.CorrectionError as exc:
            return _refused(exc)
        return Response(CorrectionOutput(fixed).data)


class CorrectionCheck(APIView):
    permission_classes = [MayRead]

    @extend_schema(request=CheckInput, responses={200: CorrectionOutput})
    def post(self, request: Request, pk: int) -> Response:
        given = CheckInput(data=request.data)
        given.is_valid(raise_exception=True)
        correction = get_object_or_404(Correction, pk=pk)
        try:
            checked = corrections.check_correction(correction=correction,
                                                   accept=given.validated_data["decision"] == "accept",
                                                   note=given.validated_data["note"], by=request.user)  # fmt: skip
        except corrections.CorrectionError as exc:
            return _refused(exc)
        return Response(CorrectionOutput(checked).data)


class ReleaseCorrections(APIView):
    """The corrections a release carries: question, field, before, after, who, why."""

    permission_classes = [RESEARCHERS]

    @extend_schema(responses={200: ReleaseCorrectionRow(many=True)})
    def get(self, request: Request, version: int) -> Response:
        release = get_release_for_user(request.user, version)
        return Response(release.summary.get("corrections", []))
