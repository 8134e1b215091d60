"""The campaign screens: start one, and watch all its runs together."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from inference import campaigns, services
from inference.forms import CampaignForm
from inference.models import Campaign, Protocol
from k12vista.htmx import HtmxHttpRequest
from k12vista.roles import Role, require_role, role_required

MANAGERS = (Role.RESEARCHER, Role.ADMIN)


def get_campaign_for_user(user, pk: int) -> Campaign:
    """Their own campaigns for researchers, all for administrators; 404 otherwise."""
    require_role(user, *MANAGERS)
    return get_object_or_404(Campaign.objects.visible_to(user), pk=pk)


@role_required(*MANAGERS)
@require_GET
def campaign_list(request: HttpRequest) -> HttpResponse:
    rows = Campaign.objects.visible_to(request.user).select_related("created_by")[:100]
    return render(request, "inference/campaign_list.html", {"campaigns": rows})


@role_required(*MANAGERS)
def campaign_create(request: HttpRequest) -> HttpResponse:
    form = CampaignForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = campaigns.start_campaign(
                name=data["name"], endpoints=list(data["endpoints"]), mode=data["mode"], filters=form.filters(),
                user=request.user, input_form=data["input_form"], params=form.params(), seed=data["seed"],
                protocol=data["protocol"] or Protocol.STUDIO, prompt_set=data["prompt_set"] or "",
            )  # fmt: skip
        except (campaigns.CampaignError, services.EndpointError) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("inference:campaign", pk=campaign.pk)
    return render(request, "inference/campaign_form.html", {"form": form})


@login_required
@require_GET
@vary_on_headers("HX-Request")
def campaign_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = get_campaign_for_user(request.user, pk)
    ctx = {"campaign": campaign, "summary": campaigns.summary(campaign)}
    if request.htmx:  # the progress region polls itself while runs are going
        return render(request, "inference/campaign_detail.html#progress", ctx)
    return render(request, "inference/campaign_detail.html", ctx)


@login_required
@require_POST
def campaign_retry(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = get_campaign_for_user(request.user, pk)
    try:
        restarted = campaigns.retry_failures(campaign=campaign, user=request.user)
    except (campaigns.CampaignError, services.EndpointError) as exc:  # an engine that fits no GPU class
        messages.error(request, str(exc))
    else:
        messages.success(request, _("%(n)d runs ask their failed questions again.") % {"n": restarted})
    return redirect("inference:campaign", pk=campaign.pk)
