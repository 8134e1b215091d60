from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from k12vista.roles import Role, role_required


@role_required(Role.INSPECTOR)
def home(request: HttpRequest) -> HttpResponse:
    """The inspector's home: the audits they take part in."""
    return render(request, "review/home.html")
