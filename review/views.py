"""The inspectors' screens: dashboard and queue, audits, rating, reports, rework.

Audits are the team's quality record, so every inspector and administrator may
read every audit; only the inspectors an item was given to may rate it, and a
rating is only ever reached through the inspector's own row (404 otherwise).
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.db.models import Count, Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from annotation.models import Question
from k12vista.models import Job
from k12vista.roles import Role, has_role, role_required, token_accepted
from k12vista.templatetags.text_extras import vocab
from k12vista.views import get_job_for_user
from pem import labelling
from review import decisions, reports, services
from review.forms import AuditForm, RatingForm, ReworkForm
from review.models import Audit, AuditItem, LotDecision, Rating

READERS = (Role.INSPECTOR, Role.ADMIN)
DASHBOARD_AUDITS = 12


# --- access helpers -------------------------------------------------------------


def get_audit_for_user(user, pk: int) -> Audit:
    return get_object_or_404(Audit, pk=pk)  # the decorator already limited it to inspectors and admins


def get_item_for_user(user, pk: int) -> AuditItem:
    return get_object_or_404(AuditItem.objects.select_related("audit", "question", "cot"), pk=pk)


def get_rating_for_user(user, item_pk: int) -> Rating:
    """The inspector's own rating slot for the item: 404 for an item not in their queue."""
    return get_object_or_404(
        Rating.objects.for_inspector(user).select_related("item__audit", "item__question", "item__cot"),
        item_id=item_pk,
    )


def next_pending(user, audit: Audit | None = None, lot: str = "") -> Rating | None:
    """The inspector's next unrated item, in the audit and the lot (stratum) they narrowed their queue to."""
    pending = Rating.objects.for_inspector(user).open().filter(item__audit__closed__isnull=True)
    if audit is not None:
        pending = pending.filter(item__audit=audit)
    if lot:
        pending = pending.filter(item__stratum=lot)
    return pending.order_by("item__audit_id", "item__round", "item__position", "item_id").first()


# --- dashboard ----------------------------------------------------------------------


@role_required(*READERS)
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The inspector's queue and the team's audit dashboard."""
    mine = (
        Rating.objects.for_inspector(request.user)
        .values("item__audit_id", "item__audit__name")
        .annotate(pending=Count("id", filter=Q(submitted__isnull=True)),
                  done=Count("id", filter=Q(submitted__isnull=False)))
        .order_by("item__audit_id")
    )  # fmt: skip
    in_progress = Audit.objects.in_progress().annotate(
        n_items=Count("items", distinct=True),
        ratings_pending=Count("items__ratings", filter=Q(items__ratings__submitted__isnull=True)),
        ratings_done=Count("items__ratings", filter=Q(items__ratings__submitted__isnull=False)),
    )[:50]
    ctx = {
        "mine": mine,
        "next": next_pending(request.user),
        "in_progress": in_progress,
        **reports.dashboard(list(Audit.objects.all()[:DASHBOARD_AUDITS])),
    }
    return render(request, "review/home.html", ctx)


# --- audits ------------------------------------------------------------------------------


@role_required(*READERS)
def audit_create(request: HttpRequest) -> HttpResponse:
    # The candidate-set page links here with the population filled in (GET only sets initial values).
    initial = {k: request.GET[k] for k in ("population", "candidate_set") if request.GET.get(k)}
    form = AuditForm(request.POST or None, initial=initial or None)
    if request.method == "POST" and form.is_valid():
        try:
            made = services.start_audit(**form.audit_arguments(), by=request.user)
        except services.AuditError as exc:
            form.add_error(None, str(exc))
        else:
            if isinstance(made, Job):  # a large population: the job draws it
                return redirect("review:audit_creating", job_pk=made.pk)
            messages.success(request, _("Drew %(n)s items for %(name)s.") % {"n": made.items.count(), "name": made})
            return redirect("review:audit", pk=made.pk)
    return render(request, "review/audit_form.html", {"form": form})


@role_required(*READERS)
@require_GET
def audit_creating(request: HttpRequest, job_pk: int) -> HttpResponse:
    """The job drawing an audit's sample: its progress, then the way to the audit."""
    job = get_job_for_user(request.user, job_pk)
    if job.kind != services.CREATE_JOB:
        raise Http404
    audit = Audit.objects.filter(job=job).first()
    return render(request, "review/audit_creating.html", {"job": job, "audit": audit})


def chosen_lot(request: HttpRequest, audit: Audit) -> str:
    """The lot the inspector narrowed their queue to (in the query); anything but one of the audit's lots is none."""
    lot = request.GET.get("lot", "")
    return lot if lot in audit.strata_counts else ""


def lot_query(lot: str) -> str:
    return f"?{urlencode({'lot': lot})}" if lot else ""


@role_required(*READERS)
@require_GET
def audit_detail(request: HttpRequest, pk: int) -> HttpResponse:
    audit = get_audit_for_user(request.user, pk)
    lot = chosen_lot(request, audit)
    mine_pending = Rating.objects.for_inspector(request.user).open().filter(item__audit=audit)
    rows = reports.rated_items(audit)
    later = AuditItem.objects.filter(audit=audit, round__gt=1).select_related("question", "cot")
    ctx = {
        "audit": audit,
        "rows": rows,
        "later_rounds": later,
        "strata": sorted(audit.strata_counts.items()),
        "change": services.population_change(audit),
        "next": next_pending(request.user, audit, lot),
        "lot": lot,
        "lot_query": lot_query(lot),
        "inspectors": audit.inspectors.order_by("username"),
        "lot_decisions": audit.lot_decisions.select_related("reaudit"),
        "decided": set(audit.lot_decisions.values_list("stratum", flat=True)),
        "pending_ratings": Rating.objects.filter(item__audit=audit).open().count(),
        "mine_pending": (mine_pending.filter(item__stratum=lot) if lot else mine_pending).count(),
    }
    return render(request, "review/audit_detail.html", ctx)


@role_required(*READERS)
@require_POST
def audit_close(request: HttpRequest, pk: int) -> HttpResponse:
    """Closes the audit once the person confirmed it (the page says first what closing leaves undone)."""
    audit = get_audit_for_user(request.user, pk)
    if request.POST.get("confirm") != "1":
        messages.error(request, _("The audit was not closed: confirm closing it first."))
        return redirect("review:audit", pk=audit.pk)
    services.close_audit(audit=audit, by=request.user)
    messages.success(request, _("Closed %(name)s.") % {"name": audit})
    return redirect("review:audit", pk=audit.pk)


@role_required(*READERS)
@require_POST
def audit_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Applies the plan's decision, or (an audit without a plan) the inspector's decision on one lot:
    accepted lots move to audited, rejected lots go back for rework."""
    audit = get_audit_for_user(request.user, pk)
    try:
        lots = decisions.decide(audit=audit, stratum=request.POST.get("stratum", ""),
                                decision=request.POST.get("decision", ""), by=request.user)  # fmt: skip
    except services.AuditError as exc:
        messages.error(request, str(exc))
    else:
        if not lots:
            messages.info(request, _("No lot is decided yet: every sampled item needs all its ratings."))
        for lot in lots:
            messages.success(request, decision_message(lot))
    return redirect("review:audit", pk=audit.pk)


def decision_message(lot: LotDecision) -> str:
    """What a lot's decision did, the lot named in words, and what it could not move and why."""
    values = {"lot": vocab(lot.stratum), "decision": lot.get_decision_display(), "moved": lot.moved,
              "reworked": lot.reworked}  # fmt: skip
    text = _("Lot %(lot)s: %(decision)s; %(moved)s questions audited, %(reworked)s sent back for rework.") % values
    left = decisions.left_behind(lot)
    if left:
        names = dict(Question.Status.choices)
        statuses = "，".join(f"{names.get(status, status)} {n}" for status, n in sorted(left.items()))
        text += " " + _(
            "%(n)s questions were left where they are: they have not reached the audit stage (%(statuses)s), "
            "so an audit can neither pass them nor send them back."
        ) % {"n": sum(left.values()), "statuses": statuses}
    return text


@role_required(*READERS)
@require_POST
def lot_reaudit(request: HttpRequest, pk: int) -> HttpResponse:
    lot = get_object_or_404(LotDecision, pk=pk)
    try:
        again = decisions.reaudit_lot(lot=lot, by=request.user)
    except services.AuditError as exc:
        messages.error(request, str(exc))
        return redirect("review:audit", pk=lot.audit_id)
    return redirect("review:audit", pk=again.pk)


@role_required(*READERS)
@require_GET
def next_item(request: HttpRequest, pk: int) -> HttpResponse:
    """The inspector's next unrated item in this audit (or their queue is empty)."""
    audit = get_audit_for_user(request.user, pk)
    rating = next_pending(request.user, audit)
    if rating is None:
        messages.info(request, _("Nothing left for you to rate in this audit."))
        return redirect("review:audit", pk=audit.pk)
    return redirect("review:rate", item_pk=rating.item_id)


# --- rating ---------------------------------------------------------------------------------


@role_required(Role.INSPECTOR)
def rate(request: HttpRequest, item_pk: int) -> HttpResponse:
    rating = get_rating_for_user(request.user, item_pk)
    item = rating.item
    form = RatingForm.for_rating(rating, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.submit_rating(rating=rating, verdicts=form.verdicts(), notes=form.notes(), by=request.user,
                                   active_seconds=request.POST.get("active_seconds"))  # fmt: skip
        except services.AuditError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, _("Saved your rating of %(item)s.") % {"item": item.label})
            lot = chosen_lot(request, item.audit)  # save and next stays in the lot the queue was narrowed to
            following = next_pending(request.user, item.audit, lot)
            if following is None:
                return redirect(reverse("review:audit", args=[item.audit_id]) + lot_query(lot))
            return redirect(reverse("review:rate", args=[following.item_id]) + lot_query(lot))
    ctx = {"rating": rating, "item": item, "form": form, "audit": item.audit, **item_context(item, request.user)}
    return render(request, "review/rate.html", ctx, status=400 if form.errors else 200)


def item_context(item: AuditItem, user) -> dict:
    """What the rating and history pages show of the item itself; its labels under the blind rule
    (an inspector who also labels this item sees only their own until they submit)."""
    if item.question_id:
        return {"question": item.question}
    cot = item.cot
    assert cot is not None  # AuditItem's check constraint: an item is a question or a chain of thought
    visible = labelling.visible_labels(cot, user)
    steps = list(cot.steps.prefetch_related(Prefetch("labels", queryset=visible, to_attr="visible")))
    for step in steps:
        labels = step.visible
        gold = [label for label in labels if label.source == "gold"]
        shown = gold or [label for label in labels if label.source in ("person", "imported")]
        step.shown_labels = shown  # type: ignore[attr-defined]  # for the template; no field of the model
    return {"cot": cot, "steps": steps, "question": cot.question}


# --- reports ------------------------------------------------------------------------------


@role_required(*READERS)
@require_GET
def report(request: HttpRequest, pk: int) -> HttpResponse:
    audit = get_audit_for_user(request.user, pk)
    data = reports.build_report(audit)
    dims = [(name, label) for name, label in audit.dimensions()]
    context = {"audit": audit, "report": data, "dims": dims, "rates_chart": reports.rates_chart(data, dims)}
    return render(request, "review/report.html", context)


REPORT_FORMATS = ("csv", "json")


@token_accepted
@role_required(*READERS)
@require_GET
def report_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    audit = get_audit_for_user(request.user, pk)
    if fmt not in REPORT_FORMATS:  # the type goes into a header: only ours, never the URL's text
        raise Http404
    data = reports.build_report(audit)
    if fmt == "csv":
        response = HttpResponse(reports.report_csv(data), content_type="text/csv; charset=utf-8")
    else:
        response = HttpResponse(json.dumps(data, ensure_ascii=False, indent=2), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="audit-{audit.pk}-report.{fmt}"'
    return response


# --- items, rework and re-audit ------------------------------------------------------------


@role_required(*READERS)
def item_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """An item's history across rounds, and the rework form while it is failed."""
    item = get_item_for_user(request.user, pk)
    rounds = services.history(item)
    latest = rounds[-1]["item"]
    stages = list(services.failed_stages(latest))
    may_choose = has_role(request.user, Role.ADMIN)
    form = None
    if stages and not latest.reworks.exists():
        initial = {"stage": stages[0], "note": services.suggested_note(latest, stages[0])}
        form = ReworkForm(request.POST or None, stages=stages, may_choose_annotator=may_choose, initial=initial)
        if request.method == "POST" and form.is_valid():
            try:
                services.send_for_rework(item=latest, stage=form.cleaned_data["stage"], note=form.cleaned_data["note"],
                                         annotator=form.cleaned_data.get("annotator"), by=request.user)  # fmt: skip
            except services.AuditError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, _("Sent %(item)s back for rework.") % {"item": latest.label})
                return redirect("review:item", pk=latest.pk)
    if request.method == "POST" and form is None:
        messages.error(request, _("This item has nothing left to send back."))
        return redirect("review:item", pk=latest.pk)
    last_reworks = rounds[-1]["reworks"]
    can_reaudit = bool(last_reworks) and all(w["done"] for w in last_reworks)
    ctx = {
        "item": latest,
        "rounds": rounds,
        "form": form,
        "can_reaudit": can_reaudit,
        **item_context(latest, request.user),
    }
    return render(request, "review/item_detail.html", ctx, status=400 if form is not None and form.errors else 200)


@role_required(*READERS)
@require_POST
def reaudit(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_item_for_user(request.user, pk)
    try:
        next_round = services.reaudit(item=item, by=request.user)
    except services.AuditError as exc:
        messages.error(request, str(exc))
        return redirect("review:item", pk=item.pk)
    messages.success(request, _("%(item)s is in the inspectors' queues again.") % {"item": item.label})
    return redirect("review:item", pk=next_round.pk)
