"""The PEM-800K pipeline screens: splitting chains by a model, and the judge panel.

Researchers and administrators only; each run belongs to whoever started it
(administrators see all), as with inference runs. The work runs as jobs and
the pages follow them with the shared progress fragment.
"""

from __future__ import annotations

from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from inference.models import Protocol
from inference.scoring import ScoringError
from inference.services import EndpointError
from k12vista.roles import Role, require_role, role_required
from pem import panel, splitting
from pem.models import PanelRun, PanelVote, SplitRun
from pem.pipeline_forms import PanelForm, SplitForm

MANAGERS = (Role.RESEARCHER, Role.ADMIN)
SHOWN = 50  # rows of results / undecided votes on a page


def mine(rows: QuerySet, user) -> QuerySet:
    """The runs a person may see: their own; administrators see all."""
    require_role(user, *MANAGERS)
    return rows if user.has_perm("k12vista.administer") else rows.filter(created_by=user)


def get_split_run_for_user(user, pk: int) -> SplitRun:
    return get_object_or_404(mine(SplitRun.objects.select_related("splitter", "job"), user), pk=pk)


def get_panel_for_user(user, pk: int) -> PanelRun:
    return get_object_or_404(mine(PanelRun.objects.select_related("job"), user), pk=pk)


# --- splitting ----------------------------------------------------------------------


@role_required(*MANAGERS)
def split_create(request: HttpRequest) -> HttpResponse:
    form = SplitForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            split_run = splitting.start_split_run(
                splitter=data["splitter"], inference_runs=list(data["runs"]), user=request.user, name=data["name"],
                min_coverage=data["min_coverage"] or splitting.SPLIT_MIN_COVERAGE,
            )  # fmt: skip
        except (splitting.SplitError, EndpointError) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("pem:split", pk=split_run.pk)
    runs = mine(SplitRun.objects.select_related("splitter", "job"), request.user)[:50]
    return render(request, "pem/split_list.html", {"form": form, "split_runs": runs})


@role_required(*MANAGERS)
@require_GET
def split_detail(request: HttpRequest, pk: int) -> HttpResponse:
    split_run = get_split_run_for_user(request.user, pk)
    results = split_run.results.exclude(outcome="model").select_related("cot").order_by("id")[:SHOWN]
    ctx = {"split_run": split_run, "counts": splitting.counts(split_run), "results": results}
    return render(request, "pem/split_detail.html", ctx)


# --- the judge panel --------------------------------------------------------------------


@role_required(*MANAGERS)
def panel_create(request: HttpRequest) -> HttpResponse:
    form = PanelForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            started = panel.start_panel(
                name=data["name"], inference_runs=list(data["runs"]), judges=list(data["judges"]), user=request.user,
                threshold=data["threshold"], explainer=data["explainer"].name if data["explainer"] else "",
                protocol=data["protocol"] or Protocol.STUDIO,
            )  # fmt: skip
        except (panel.PanelError, ScoringError, EndpointError) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("pem:panel", pk=started.pk)
    panels = mine(PanelRun.objects.select_related("job"), request.user)[:50]
    return render(request, "pem/panel_list.html", {"form": form, "panels": panels})


@role_required(*MANAGERS)
@require_GET
def panel_detail(request: HttpRequest, pk: int) -> HttpResponse:
    found = get_panel_for_user(request.user, pk)
    undecided = (
        PanelVote.objects.no_majority().filter(panel_run=found).select_related("step__cot").order_by("id")[:SHOWN]
    )
    ctx = {
        "panel": found,
        "scoring_runs": found.scoring_runs.select_related("judge", "inference_run").order_by("id"),
        "undecided": undecided,
        "missing": sorted((found.counts.get("missing_votes") or {}).items()),
    }
    return render(request, "pem/panel_detail.html", ctx)


@role_required(*MANAGERS)
@require_POST
def panel_restart(request: HttpRequest, pk: int) -> HttpResponse:
    found = get_panel_for_user(request.user, pk)
    try:
        panel.restart_panel(panel=found, user=request.user)
    except panel.PanelError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("The failed judgments are asked again; the panel votes again after."))
    return redirect("pem:panel", pk=found.pk)
