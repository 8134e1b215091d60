from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from k12vista.models import Job
from k12vista.roles import Role, role_required


@role_required(Role.RESEARCHER)
def home(request: HttpRequest) -> HttpResponse:
    """The researcher's home: runs, datasets and exports they started."""
    recent = Job.objects.started_by(request.user)[:20]
    return render(request, "inference/home.html", {"jobs": recent})
