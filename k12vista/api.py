from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils.translation import get_language, gettext
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotAuthenticated, NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from k12vista import guidelines, jobs, work
from k12vista.models import Guideline, Job
from k12vista.roles import HasRole, Role, roles_of
from k12vista.serializers import InputSerializer, JobSerializer, MeSerializer

ADMINS = HasRole(Role.ADMIN)


@extend_schema(responses=MeSerializer)
@api_view(["GET"])
def me(request: Request) -> Response:
    user = request.user
    if isinstance(user, AnonymousUser):  # IsAuthenticated (the default) refuses it first; this tells mypy
        raise NotAuthenticated
    data = {
        "username": user.username,
        "email": user.email,
        "roles": [r.value for r in roles_of(user)],
        "language": get_language(),
    }
    return Response(MeSerializer(data).data)


class JobList(generics.ListAPIView):
    serializer_class = JobSerializer
    ordering = "-created"

    def get_queryset(self):
        return Job.objects.visible_to(self.request.user).select_related("started_by")


class JobDetail(generics.RetrieveAPIView):
    serializer_class = JobSerializer

    def get_queryset(self):
        return Job.objects.visible_to(self.request.user).select_related("started_by")


@extend_schema(request=None, responses=JobSerializer)
@api_view(["POST"])
def job_cancel(request: Request, pk: int) -> Response:
    job = generics.get_object_or_404(Job.objects.visible_to(request.user), pk=pk)
    jobs.cancel_job(job=job)
    return Response(JobSerializer(job).data)


# --- guidelines (issue 25): the text beside each task, as /manage/guidelines/ keeps it ---------------------


class GuidelineOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Guideline.Kind.choices)
    kind_label = serializers.CharField(help_text="The kind in words, in the caller's language.")
    version = serializers.IntegerField(allow_null=True, help_text="null while none has been written")
    version_name = serializers.CharField(
        help_text="what a label made now records as its guideline_version (e.g. guideline.v3; '' if none)"
    )
    text = serializers.CharField(allow_blank=True)
    updated_by = serializers.CharField(allow_null=True)
    created = serializers.DateTimeField(allow_null=True)


class GuidelineInput(InputSerializer):
    text = serializers.CharField(max_length=20000, help_text="the whole text of the new version")


def _guideline(kind: str) -> dict[str, Any]:
    current = guidelines.current(kind)
    return {
        "kind": kind, "kind_label": Guideline.Kind(kind).label,
        "version": current.version if current else None,
        "version_name": guidelines.current_version_name(kind),
        "text": current.text if current else "",
        "updated_by": current.updated_by.username if current and current.updated_by else None,
        "created": current.created if current else None,
    }  # fmt: skip


def _guideline_kind(kind: str) -> str:
    if kind not in Guideline.Kind.values:
        raise NotFound(gettext("No guideline is called %(kind)s.") % {"kind": kind})
    return kind


@extend_schema(responses=GuidelineOutput(many=True))
@api_view(["GET"])
def guideline_list(request: Request) -> Response:
    """The current guideline of every kind of work, for anyone signed in."""
    return Response(GuidelineOutput([_guideline(kind) for kind in Guideline.Kind.values], many=True).data)


KIND_PARAMETER = OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=Guideline.Kind.values)


@extend_schema(parameters=[KIND_PARAMETER])
class GuidelineDetail(APIView):
    """GET: one kind's current guideline (anyone signed in). POST (administrators): saves ``text`` as its next
    version, as /manage/guidelines/ does; the same text again makes no new version (200 instead of 201)."""

    def get_permissions(self) -> list[Any]:
        return [IsAuthenticated()] if self.request.method == "GET" else [ADMINS()]

    @extend_schema(responses=GuidelineOutput)
    def get(self, request: Request, kind: str) -> Response:
        return Response(GuidelineOutput(_guideline(_guideline_kind(kind))).data)

    @extend_schema(request=GuidelineInput, responses={200: GuidelineOutput, 201: GuidelineOutput})
    def post(self, request: Request, kind: str) -> Response:
        kind = _guideline_kind(kind)
        given = GuidelineInput(data=request.data)
        given.is_valid(raise_exception=True)
        before = guidelines.current(kind)
        saved = guidelines.publish(kind=kind, text=given.validated_data["text"], by=request.user)
        made = before is None or saved.pk != before.pk
        return Response(GuidelineOutput(_guideline(kind)).data, status=201 if made else 200)


# --- team progress (issue 25): the team page's numbers ------------------------------------------------------


class PersonProgressOutput(serializers.Serializer):
    person = serializers.CharField()
    kind = serializers.CharField(help_text="the kind of work's code (ocr_review, step_correction, pebench_labels...)")
    kind_label = serializers.CharField(help_text="The kind in words, in the caller's language.")
    held = serializers.IntegerField(allow_null=True, help_text="open items held now (null: not held before done)")
    done = serializers.IntegerField()
    done_today = serializers.IntegerField()
    done_week = serializers.IntegerField(help_text="done in the last 7 days")
    median_seconds = serializers.IntegerField(
        allow_null=True, help_text="median active seconds per finished item (null where no time was recorded)"
    )


class StageCountOutput(serializers.Serializer):
    stage = serializers.CharField(help_text="the stage in words, in the caller's language")
    items = serializers.IntegerField()


class OverallProgressOutput(serializers.Serializer):
    code = serializers.CharField()
    # A declared field, taken off the class by DRF's metaclass: it does not replace Field.label at run time.
    label = serializers.CharField(help_text="the body of work in words")  # type: ignore[assignment]
    counts = StageCountOutput(many=True)


class TeamProgressOutput(serializers.Serializer):
    people = PersonProgressOutput(many=True)
    overall = OverallProgressOutput(many=True)


@extend_schema(responses=TeamProgressOutput)
@api_view(["GET"])
@permission_classes([HasRole(Role.INSPECTOR, Role.ADMIN)])
def team_progress(request: Request) -> Response:
    """Progress per person and kind of work (PEBench labelling and adjudication included) and where each body
    of work stands, as the team page shows them; for inspectors and administrators."""
    overall = [{**o, "counts": [{"stage": stage, "items": n} for stage, n in o["counts"]]}
               for o in work.overall_progress()]  # fmt: skip
    return Response(TeamProgressOutput({"people": work.progress_by_person(), "overall": overall}).data)
