"""PEBench releases: the list (and building the next version), one release (publish, file,
compare), and the comparison of two. Every view starts with the blind rule for files that
hold many items' labels (``pem.releases.may_read``): a 403 for annotators and for anyone
holding an unsubmitted labelling task."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from annotation import statistics
from k12vista.roles import token_accepted
from pem import releases
from pem.models import PEBenchRelease


def readable_release(request: HttpRequest, version: int) -> PEBenchRelease:
    if not releases.may_read(request.user):
        raise PermissionDenied
    return get_object_or_404(PEBenchRelease, version=version)


@login_required
def release_list(request: HttpRequest) -> HttpResponse:
    if not releases.may_read(request.user):
        raise PermissionDenied
    if request.method == "POST":
        if not releases.may_build(request.user):
            raise PermissionDenied
        try:
            release = releases.start_release(by=request.user, name=request.POST.get("name", "")[:200])
        except releases.PEBenchReleaseError as exc:
            messages.error(request, str(exc))
            return redirect("pem:pebench_releases")
        return redirect("pem:pebench_release", version=release.version)
    ctx = {"releases": PEBenchRelease.objects.all()[:50], "may_build": releases.may_build(request.user)}
    return render(request, "pem/pebench_releases.html", ctx)


@login_required
@require_GET
def release_detail(request: HttpRequest, version: int) -> HttpResponse:
    release = readable_release(request, version)
    others = PEBenchRelease.objects.exclude(pk=release.pk).filter(status__in=["draft", "published"])
    found = release.summary.get("statistics")
    ctx = {"release": release, "job": release.job, "others": others, "may_build": releases.may_build(request.user),
           "statistics": statistics.table_3_pebench_rows(found) if found else None}  # fmt: skip
    return render(request, "pem/pebench_release.html", ctx)


@login_required
@require_POST
def release_publish(request: HttpRequest, version: int) -> HttpResponse:
    release = readable_release(request, version)
    if not releases.may_build(request.user):
        raise PermissionDenied
    try:
        releases.publish_release(release=release, by=request.user)
    except releases.PEBenchReleaseError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Published PEBench v%(version)s.") % {"version": release.version})
    return redirect("pem:pebench_release", version=release.version)


@token_accepted
@login_required
@require_GET
def release_file(request: HttpRequest, version: int) -> FileResponse:
    """Streams the release's zip, with its checksum."""
    release = readable_release(request, version)
    if not release.path:
        raise Http404
    root = Path(settings.MEDIA_ROOT).resolve()
    path = (root / release.path).resolve()
    if root not in path.parents or not path.is_file():
        raise Http404
    response = FileResponse(path.open("rb"), as_attachment=True, filename=path.name)
    response["X-Checksum-SHA256"] = release.sha256
    return response


@login_required
@require_GET
def release_compare(request: HttpRequest) -> HttpResponse:
    if not releases.may_read(request.user):
        raise PermissionDenied
    versions = [request.GET.get("old", ""), request.GET.get("new", "")]
    if not all(v.isdecimal() for v in versions):
        raise Http404
    old, new = (get_object_or_404(PEBenchRelease, version=int(v)) for v in versions)
    return render(request, "pem/pebench_release_compare.html",
                  {"diff": releases.compare_releases(old, new), "old": old, "new": new})  # fmt: skip
