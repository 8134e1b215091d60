from django.contrib.auth.models import AnonymousUser
from django.utils.translation import get_language
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista import jobs
from k12vista.models import Job
from k12vista.roles import roles_of
from k12vista.serializers import JobSerializer, MeSerializer


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
