from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from k12vista.roles import Role, role_required


@role_required(Role.ANNOTATOR)
def queue(request: HttpRequest) -> HttpResponse:
    """The annotator's home: their own open assignments, nobody else's."""
    return render(request, "annotation/queue.html")
