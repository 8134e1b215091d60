"""The researcher's benchmark screens: core knowledge units, the stratified
draw, releases (build, publish, files, comparison).

Every view is for researchers and administrators (``role_required``); release
files are only ever sent from here, after that check, under the names the
build gave them.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from annotation import draw, knowledge, releases, statistics
from annotation.models import CandidateSet, CoreUnit, KnowledgePoint, Release, ReleaseFile
from k12vista.roles import Role, role_required, token_accepted
from k12vista.vocabulary import Subject

RESEARCHERS = (Role.RESEARCHER, Role.ADMIN)
UNITS_PER_PAGE = 30


def get_release_for_user(user, version: int) -> Release:
    return get_object_or_404(Release, version=version)  # the decorator limited it to researchers and admins


def digits(values: list[str]) -> list[int]:
    return [int(v) for v in values if v.isdecimal()]


def targets_from(data) -> draw.Targets:
    return draw.Targets.from_dict({
        "per_cell": data.get("per_cell") or draw.DEFAULT_PER_CELL,
        "cover_knowledge": data.get("cover_knowledge") in ("on", "1", "true", True),
        "subjects": data.getlist("subjects") if hasattr(data, "getlist") else data.get("subjects", []),
    })  # fmt: skip


# --- home: preview and draw ---------------------------------------------------------------


@role_required(*RESEARCHERS)
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Preview of the allocation (GET with targets), the draws and the releases."""
    allocation, error = None, ""
    if "per_cell" in request.GET:
        try:
            allocation = draw.preview(targets_from(request.GET))
        except draw.DrawError as exc:
            error = str(exc)
    ctx = {
        "allocation": allocation, "error": error, "subjects": Subject.choices,
        "per_cell": request.GET.get("per_cell", draw.DEFAULT_PER_CELL),
        "candidate_sets": CandidateSet.objects.select_related("job")[:20],
        "releases": Release.objects.all()[:20],
        "units": CoreUnit.objects.count(), "points": KnowledgePoint.objects.count(),
    }  # fmt: skip
    return render(request, "annotation/benchmark.html", ctx)


@role_required(*RESEARCHERS)
@require_POST
def draw_create(request: HttpRequest) -> HttpResponse:
    try:
        seed = int(request.POST["seed"]) if request.POST.get("seed") else None
        candidate = draw.start_draw(targets=targets_from(request.POST), by=request.user,
                                    name=request.POST.get("name", ""), seed=seed)  # fmt: skip
    except (draw.DrawError, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect("annotation:benchmark")
    return redirect("annotation:candidate_set", pk=candidate.pk)


@role_required(*RESEARCHERS)
@require_GET
def candidate_set(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = get_object_or_404(CandidateSet.objects.select_related("job"), pk=pk)
    ctx = {"candidate": candidate, "job": candidate.job, "not_audited": releases.not_releasable(candidate).count(),
           "releases": candidate.releases.all()}  # fmt: skip
    return render(request, "annotation/candidate_set.html", ctx)


# --- releases --------------------------------------------------------------------------------


@role_required(*RESEARCHERS)
@require_POST
def release_create(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = get_object_or_404(CandidateSet, pk=pk)
    try:
        release = releases.start_release(candidate_set=candidate, by=request.user, name=request.POST.get("name", ""),
                                         licence=request.POST.get("licence", releases.DEFAULT_LICENCE))  # fmt: skip
    except releases.ReleaseError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:candidate_set", pk=candidate.pk)
    return redirect("annotation:release", version=release.version)


@role_required(*RESEARCHERS)
@require_GET
def release_detail(request: HttpRequest, version: int) -> HttpResponse:
    release = get_release_for_user(request.user, version)
    found = release.summary.get("statistics")
    ctx = {"release": release, "job": release.job, "files": release.files.all(),
           "statistics": statistics.table_2_rows(found) if found else None,
           "others": Release.objects.exclude(pk=release.pk).filter(status__in=["draft", "published"])}  # fmt: skip
    return render(request, "annotation/release.html", ctx)


@role_required(*RESEARCHERS)
@require_POST
def release_publish(request: HttpRequest, version: int) -> HttpResponse:
    release = get_release_for_user(request.user, version)
    try:
        releases.publish_release(release=release, by=request.user)
    except releases.ReleaseError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Published release v%(version)s.") % {"version": release.version})
    return redirect("annotation:release", version=release.version)


@token_accepted
@role_required(*RESEARCHERS)
@require_GET
def release_file(request: HttpRequest, version: int, form: str) -> FileResponse:
    """Streams one release file, with its checksum, to researchers and administrators."""
    release = get_release_for_user(request.user, version)
    found = get_object_or_404(ReleaseFile, release=release, form=form)
    root = Path(settings.MEDIA_ROOT).resolve()
    path = (root / found.path).resolve()
    if root not in path.parents or not path.is_file():
        raise Http404
    response = FileResponse(path.open("rb"), as_attachment=True, filename=path.name)
    response["X-Checksum-SHA256"] = found.sha256
    return response


@role_required(*RESEARCHERS)
@require_GET
def release_compare(request: HttpRequest) -> HttpResponse:
    try:
        old = get_release_for_user(request.user, int(request.GET.get("old", "")))
        new = get_release_for_user(request.user, int(request.GET.get("new", "")))
    except ValueError:
        raise Http404 from None
    return render(request, "annotation/release_compare.html", {"diff": releases.compare_releases(old, new),
                                                                "old": old, "new": new})  # fmt: skip


# --- core knowledge units ------------------------------------------------------------------


@role_required(*RESEARCHERS)
@require_GET
def units(request: HttpRequest) -> HttpResponse:
    subject = request.GET.get("subject") or Subject.MATH
    if subject not in Subject.values:
        raise Http404
    query = request.GET.get("q", "").strip()
    page = Paginator(knowledge.units_for_review(subject, query=query), UNITS_PER_PAGE).get_page(request.GET.get("page"))
    knowledge.attach_members(list(page.object_list))
    choices = CoreUnit.objects.filter(subject=subject).only("id", "name").order_by("name")[:2000]
    ctx = {"page": page, "subject": subject, "subjects": Subject.choices, "q": query, "all_units": choices}
    return render(request, "annotation/knowledge_units.html", ctx)


@role_required(*RESEARCHERS)
@require_POST
def cluster(request: HttpRequest) -> HttpResponse:
    try:
        params = knowledge.ClusterParams.from_dict({
            name: request.POST[name] for name in ("points_per_unit", "ngram_min", "ngram_max") if request.POST.get(name)
        })  # fmt: skip
        job = knowledge.start_clustering(by=request.user, subjects=request.POST.getlist("subjects"), params=params)
    except knowledge.KnowledgeError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:units")
    return redirect("k12vista:job_detail", pk=job.pk)


@role_required(*RESEARCHERS)
@require_POST
def unit_action(request: HttpRequest, pk: int) -> HttpResponse:
    """Rename, merge another unit in, split points off, or move a point here."""
    unit = get_object_or_404(CoreUnit, pk=pk)
    action = request.POST.get("action")
    same_subject = CoreUnit.objects.filter(subject=unit.subject)
    try:
        if action == "rename":
            knowledge.rename_unit(unit=unit, name=request.POST.get("name", ""), by=request.user)
        elif action == "merge":
            others = list(same_subject.filter(pk__in=digits(request.POST.getlist("other"))))
            knowledge.merge_units(into=unit, others=others, by=request.user)
        elif action == "split":
            ids = digits(request.POST.getlist("point"))
            knowledge.split_unit(unit=unit, point_ids=ids, name=request.POST.get("name", ""), by=request.user)
        elif action == "move":
            point = get_object_or_404(KnowledgePoint, subject=unit.subject, name=request.POST.get("point_name", ""))
            knowledge.move_point(point=point, unit=unit, by=request.user)
        else:
            raise Http404
    except knowledge.KnowledgeError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Saved: %(unit)s.") % {"unit": unit.name})
    return redirect(f"{reverse('annotation:units')}?subject={unit.subject}")
