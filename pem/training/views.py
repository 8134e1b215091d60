"""The researcher's PEM-800K screens: import, filters with the funnel, training exports, training.

Researchers and administrators only; every action starts a job (pem/training/jobs.py)
and the pages follow it with the shared progress bar.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from k12vista.import_files import ImportFileError
from k12vista.models import Job
from k12vista.roles import Role, role_required, token_accepted
from pem import jobs as pem_jobs
from pem.models import FilterRun, TrainingExport, TrainingRun
from pem.training import exports, filters, jobs, train
from pem.training.forms import EndpointForm, ExportForm, FilterForm, ImportForm, TrainForm
from pem.training.funnel_table import funnel_rows

MANAGERS = (Role.RESEARCHER, Role.ADMIN)


def _error_messages(request: HttpRequest, form) -> None:
    for errors in form.errors.values():
        for error in errors:
            messages.error(request, error)


@role_required(*MANAGERS)
@require_GET
def training_home(request: HttpRequest) -> HttpResponse:
    ctx = {
        "import_form": ImportForm(),
        "filter_form": FilterForm(),
        "export_form": ExportForm(),
        "train_form": TrainForm(),
        "imports": Job.objects.visible_to(request.user).filter(kind=jobs.IMPORT)[:10],
        "filter_runs": FilterRun.objects.select_related("job")[:10],
        "exports": TrainingExport.objects.select_related("job", "filter_run")[:10],
        "training_runs": TrainingRun.objects.select_related("job", "export", "endpoint")[:10],
    }
    return render(request, "pem/training_home.html", ctx)


@role_required(*MANAGERS)
@require_POST
def training_import(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            stored = pem_jobs.store_upload(upload)
        except ImportFileError as exc:
            messages.error(request, str(exc))
        else:
            name = form.cleaned_data["name"] or upload.name
            job = jobs.start_import(path=default_storage.path(stored), name=name, user=request.user)
            return redirect("k12vista:job_detail", pk=job.pk)
    _error_messages(request, form)
    return redirect("pem:training_home")


@role_required(*MANAGERS)
@require_POST
def training_filter(request: HttpRequest) -> HttpResponse:
    form = FilterForm(request.POST)
    if form.is_valid():
        source, rater, params = form.source_and_params()
        try:
            run = jobs.start_filters(source=source, rater=rater, params=params, user=request.user)
        except filters.FilterError as exc:
            messages.error(request, str(exc))
        else:
            return redirect("pem:training_filter_run", pk=run.pk)
    _error_messages(request, form)
    return redirect("pem:training_home")


@role_required(*MANAGERS)
@require_GET
def training_filter_run(request: HttpRequest, pk: int) -> HttpResponse:
    """The funnel: what each filter removed, by reason, subject, stage and label."""
    run = get_object_or_404(FilterRun.objects.select_related("job", "created_by"), pk=pk)
    return render(request, "pem/training_funnel.html", {"run": run, **funnel_rows(run.funnel)})


@role_required(*MANAGERS)
@require_POST
def training_export(request: HttpRequest) -> HttpResponse:
    form = ExportForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            export = jobs.start_export(filter_run=data["filter_run"], user=request.user, formats_wanted=data["formats"],
                                       min_pixels=data["min_pixels"], max_pixels=data["max_pixels"],
                                       style=data["style"])  # fmt: skip
        except exports.ExportError as exc:
            messages.error(request, str(exc))
        else:
            return redirect("pem:training_export_detail", pk=export.pk)
    _error_messages(request, form)
    return redirect("pem:training_home")


@role_required(*MANAGERS)
@require_GET
def training_export_detail(request: HttpRequest, pk: int) -> HttpResponse:
    export = get_object_or_404(TrainingExport.objects.select_related("job", "filter_run"), pk=pk)
    files = sorted(exports.export_files(export).items())
    return render(request, "pem/training_export.html", {"export": export, "files": files})


@token_accepted
@role_required(*MANAGERS)
@require_GET
def training_export_file(request: HttpRequest, pk: int, name: str) -> FileResponse:
    """One file of an export: only names its manifest lists, under the export's own directory."""
    export = get_object_or_404(TrainingExport, pk=pk)
    if name not in exports.export_files(export):
        raise Http404
    path = exports.export_path(export) / name
    if not path.is_file():  # removed from the volume since: gone, not a server error
        raise Http404
    download = f"pem-export-{export.pk}-{name.replace('/', '-')}"
    return FileResponse(open(path, "rb"), as_attachment=True, filename=download)  # noqa: SIM115


@role_required(*MANAGERS)
@require_POST
def training_train(request: HttpRequest) -> HttpResponse:
    form = TrainForm(request.POST)
    if form.is_valid():
        try:
            run = jobs.start_training(export=form.cleaned_data["export"], base_model=form.cleaned_data["base_model"],
                                      hyperparameters=form.hyperparameters(), user=request.user)  # fmt: skip
        except train.TrainingError as exc:
            messages.error(request, str(exc))
        else:
            return redirect("pem:training_run", pk=run.pk)
    _error_messages(request, form)
    return redirect("pem:training_home")


@role_required(*MANAGERS)
@require_GET
def training_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(TrainingRun.objects.select_related("job", "export", "endpoint"), pk=pk)
    served = train.served_outline(run)
    form = EndpointForm(initial={"served_name": served["served_name"]} if served else None)
    return render(request, "pem/training_run.html", {"run": run, "served": served, "endpoint_form": form})


@role_required(*MANAGERS)
@require_POST
def training_register(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(TrainingRun, pk=pk)
    form = EndpointForm(request.POST)
    if form.is_valid():
        try:
            train.register_endpoint(run, **form.cleaned_data, user=request.user)
        except train.TrainingError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, _("The checkpoint is registered as an endpoint."))
    else:
        _error_messages(request, form)
    return redirect("pem:training_run", pk=run.pk)
