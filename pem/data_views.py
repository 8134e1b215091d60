"""The researcher's PEBench data screens: imports, chains of thought, building and exporting.

Researchers and administrators only. The work (imports, exports, PEBench
builds, chains from a run, labels from a scoring run) runs as jobs and the
pages follow them. Jobs belong to whoever started them, as everywhere else;
administrators see all.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from k12vista.htmx import HtmxHttpRequest
from k12vista.import_files import ImportFileError
from k12vista.models import Job
from k12vista.pagination import keyset_page
from k12vista.roles import Role, role_required
from pem import jobs, services
from pem.data_forms import BuildForm, ChainFilterForm, ExportForm, ImportForm, RunChoiceForm, ScoringChoiceForm
from pem.models import ChainOfThought, PEBenchBuild

MANAGERS = (Role.RESEARCHER, Role.ADMIN)


def pem_jobs_for(user, kinds=jobs.KINDS):
    return Job.objects.visible_to(user).filter(kind__in=kinds).select_related("started_by")


def status_rows(counts: dict[str, int]) -> list[dict]:
    """Counts per status with the status's name in the reader's language, for the pills."""
    return [{"code": code, "name": ChainOfThought.Status(code).label, "n": n} for code, n in counts.items()]


def get_import_job_for_user(user, pk: int) -> Job:
    """An import job the user may see; others' give 404."""
    return get_object_or_404(pem_jobs_for(user, kinds=[jobs.IMPORT]), pk=pk)


@role_required(*MANAGERS)
@require_GET
def data_home(request: HttpRequest) -> HttpResponse:
    user = request.user
    ctx = {
        "counts": status_rows(services.status_counts()),
        "in_pebench": ChainOfThought.objects.in_pebench().count(),
        "import_form": ImportForm(),
        "build_form": BuildForm(),
        "export_form": ExportForm(),
        "run_form": RunChoiceForm(user=user),
        "scoring_form": ScoringChoiceForm(user=user),
        "builds": PEBenchBuild.objects.select_related("created_by")[:10],
        "jobs": pem_jobs_for(user)[:20],
    }
    return render(request, "pem/data_home.html", ctx)


@role_required(*MANAGERS)
@require_POST
def data_import(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            stored = jobs.store_upload(upload)
        except ImportFileError as exc:
            form.add_error("file", str(exc))
        else:
            name = form.cleaned_data["name"] or upload.name
            job = jobs.start_import(stored_name=stored, name=name, user=request.user)
            return redirect("pem:data_import_detail", pk=job.pk)
    for errors in form.errors.values():
        for error in errors:
            messages.error(request, str(error))  # each error is text here (ErrorList's items)
    return redirect("pem:data_home")


@role_required(*MANAGERS)
@require_GET
@vary_on_headers("HX-Request")
def data_import_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The import's progress, then its report with every problem line; polls while it runs."""
    job = get_import_job_for_user(request.user, pk)
    if request.htmx:
        return render(request, "pem/data_import.html#status", {"job": job})
    return render(request, "pem/data_import.html", {"job": job})


@role_required(*MANAGERS)
@require_GET
@vary_on_headers("HX-Request")
def data_chains(request: HtmxHttpRequest) -> HttpResponse:
    """Chains of thought with filters, counts by status of the filtered set, and a keyset "More"."""
    form = ChainFilterForm(request.GET)
    chains = form.filter(ChainOfThought.objects.all())
    page, next_query = keyset_page(chains.annotate(n_steps=Count("steps")).select_related("pebench_item"), request)
    ctx: dict[str, Any] = {"chains": page, "next_query": next_query}
    if request.htmx and request.GET.get("after"):
        return render(request, "pem/data_chains.html#rows", ctx)
    # Counted without the status filter, so the counts say where the other filters' chains stand.
    counts = services.status_counts(form.filter(ChainOfThought.objects.all(), status=False))
    ctx |= {"form": form, "counts": status_rows(counts)}
    return render(request, "pem/data_chains.html", ctx)


@role_required(*MANAGERS)
@require_POST
def data_build(request: HttpRequest) -> HttpResponse:
    """Starts the build; the job's page shows what it took per stratum, or why it refused."""
    form = BuildForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("The build settings are not valid: %(errors)s") % {"errors": form.errors.as_text()})
        return redirect("pem:data_home")
    job = jobs.start_build(**form.cleaned_data, user=request.user)
    return redirect("k12vista:job_detail", pk=job.pk)


@role_required(*MANAGERS)
@require_POST
def data_export(request: HttpRequest) -> HttpResponse:
    """Starts the export; the job's page offers the download once it is done."""
    form = ExportForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose a PEBench build, or none for all of PEBench."))
        return redirect("pem:data_home")
    job = jobs.start_export(user=request.user, build=form.cleaned_data["build"])
    return redirect("k12vista:job_detail", pk=job.pk)


@role_required(*MANAGERS)
@require_POST
def data_from_run(request: HttpRequest) -> HttpResponse:
    form = RunChoiceForm(request.POST, user=request.user)
    if not form.is_valid():
        messages.error(request, _("Choose one of your step-by-step inference runs."))
        return redirect("pem:data_home")
    try:
        job = jobs.start_cots_from_run(inference_run=form.cleaned_data["inference_run"], user=request.user)
    except services.PEBenchError as exc:
        messages.error(request, str(exc))
        return redirect("pem:data_home")
    return redirect("k12vista:job_detail", pk=job.pk)


@role_required(*MANAGERS)
@require_POST
def data_from_scoring(request: HttpRequest) -> HttpResponse:
    form = ScoringChoiceForm(request.POST, user=request.user)
    if not form.is_valid():
        messages.error(request, _("Choose one of your step-by-step scoring runs."))
        return redirect("pem:data_home")
    try:
        job = jobs.start_labels_from_scoring_run(scoring_run=form.cleaned_data["scoring_run"], user=request.user)
    except services.PEBenchError as exc:
        messages.error(request, str(exc))
        return redirect("pem:data_home")
    return redirect("k12vista:job_detail", pk=job.pk)
