from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from k12vista import files, guidelines, jobs, services
from k12vista.forms import GuidelineForm, UserCreateForm, UserRolesForm
from k12vista.htmx import HtmxHttpRequest
from k12vista.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from k12vista.metrics import calls_per_second, exposition
from k12vista.models import Guideline, Job
from k12vista.roles import (
    READERS_OF_ALL_LABELS,
    Role,
    has_role,
    home_url_name,
    require_role,
    role_required,
    roles_of,
    token_accepted,
)
from k12vista.vocabulary import QUESTION_TYPE_ZH, STAGE_ZH, STEP_LABELS, SUBJECT_ZH, QuestionType, Stage, Subject

# --- access helpers ---------------------------------------------------------


def get_job_for_user(user, pk: int) -> Job:
    """404 for a job the user may not see, so that ids of others' jobs leak nothing."""
    return get_object_or_404(Job.objects.visible_to(user), pk=pk)


# --- pages --------------------------------------------------------------


@login_required
def home(request: HttpRequest) -> HttpResponse:
    url_name = home_url_name(request.user)
    if url_name is None:
        return render(request, "k12vista/no_role.html", status=403)
    return redirect(url_name)


@login_required
def taxonomy(request: HttpRequest) -> HttpResponse:
    ctx = {
        "labels": STEP_LABELS,
        "subjects": [(s, SUBJECT_ZH[s]) for s in Subject],
        "stages": [(s, STAGE_ZH[s]) for s in Stage],
        "types": [(t, QUESTION_TYPE_ZH[t]) for t in QuestionType],
    }
    return render(request, "k12vista/taxonomy.html", ctx)


@login_required
def formula_preview(request: HttpRequest) -> HttpResponse:
    # Rendering happens in the browser (static/js/app.js): the text is put in
    # as text, never as HTML, and KaTeX typesets the formulas in it.
    return render(request, "k12vista/preview.html")


@login_required
@never_cache
def csrf_token(request: HttpRequest) -> JsonResponse:
    """The CSRF token of the session as it is now: a page open since before a sign-in in another tab (which
    rotates the token) fetches it and saves again, instead of losing the work it was saving."""
    return JsonResponse({"token": get_token(request)})


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """The studio's own page for a refused form (settings.CSRF_FAILURE_VIEW), in the reader's language, with a
    way back; Django's reason stays in the log, not on the page."""
    back = request.META.get("HTTP_REFERER") or ""
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = ""
    return render(request, "403_csrf.html", {"back": back}, status=403)


@login_required
def account(request: HttpRequest) -> HttpResponse:
    return render(request, "k12vista/account.html", {"roles": roles_of(request.user)})


@login_required
@require_POST
def rotate_token(request: HttpRequest) -> HttpResponse:
    """Replaces the user's API token and shows the new one once."""
    token = services.new_api_token(request.user)
    return render(request, "k12vista/account.html", {"roles": roles_of(request.user), "new_token": token.key})


# --- jobs -----------------------------------------------------------------


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    job_rows = Job.objects.visible_to(request.user).select_related("started_by")[:100]
    # Endpoint names and load are the researchers' and admins' business, as on the endpoints page.
    sees_models = has_role(request.user, Role.RESEARCHER) or has_role(request.user, Role.ADMIN)
    rates = calls_per_second(seconds=CALL_RATE_SECONDS) if sees_models else None
    context = {"jobs": job_rows, "call_rates": rates, "call_rate_seconds": CALL_RATE_SECONDS}
    return render(request, "k12vista/job_list.html", context)


CALL_RATE_SECONDS = 60  # the jobs page's window for model calls a second


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition (k12vista.metrics), for a scraper holding METRICS_TOKEN or
    a signed-in admin. Anyone else without a session gets 404, as if there were no such page."""
    if not scrape_token_matches(request):
        if not request.user.is_authenticated:
            raise Http404
        require_role(request.user, Role.ADMIN)
    return HttpResponse(exposition(), content_type=METRICS_CONTENT_TYPE)


def scrape_token_matches(request: HttpRequest) -> bool:
    """``Authorization: Bearer <METRICS_TOKEN>``, compared in constant time; never with no token set."""
    expected = settings.METRICS_TOKEN
    scheme, _space, given = request.headers.get("Authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


@login_required
@vary_on_headers("HX-Request")
def job_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = get_job_for_user(request.user, pk)
    if request.htmx:
        return job_fragment(request, job)
    return render(request, "k12vista/job_detail.html", {"job": job})


def job_fragment(request: HttpRequest, job: Job, context: dict | None = None) -> HttpResponse:
    """The progress fragment; once the job is over it also tells the page (the "job-finished"
    event), which then refreshes what the job produced: results, downloads, imported questions.
    ``context`` may name another ``poll_url`` (a page's own view of its job) or hide the cancel."""
    response = render(request, "k12vista/_job_progress.html", {"job": job} | (context or {}))
    if job.is_finished:
        trigger_client_event(response, "job-finished", {"job": job.pk})
    return response


@login_required
@require_POST
def job_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = get_job_for_user(request.user, pk)
    jobs.cancel_job(job=job)
    if request.htmx:
        return job_fragment(request, job)
    return redirect("k12vista:job_detail", pk=job.pk)


# --- administration ---------------------------------------------------------


@role_required(Role.ADMIN)
def users(request: HttpRequest) -> HttpResponse:
    form = UserCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = services.create_user(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            roles=[Role(r) for r in form.cleaned_data["roles"]],
            password=form.cleaned_data["password"] or None,
            invited_by=request.user,
        )
        if not form.cleaned_data["password"]:
            link = request.build_absolute_uri(services.invitation_path(user))
            messages.success(request, _("Invitation link for %(user)s: %(link)s") % {"user": user, "link": link})
        else:
            messages.success(request, _("Created %(user)s.") % {"user": user})
        return redirect("k12vista:users")
    people = get_user_model().objects.order_by("username").prefetch_related("groups")
    return render(request, "k12vista/users.html", {"form": form, "people": people})


@role_required(Role.ADMIN)
def user_edit(request: HttpRequest, pk: int) -> HttpResponse:
    person = get_object_or_404(services.manageable_by(request.user), pk=pk)
    initial = {"roles": [r.value for r in roles_of(person)], "is_active": person.is_active}
    form = UserRolesForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        if person == request.user and (
            Role.ADMIN not in form.cleaned_data["roles"] or not form.cleaned_data["is_active"]
        ):
            form.add_error(None, _("You cannot remove your own administrator role or deactivate yourself."))
        else:
            services.set_roles(user=person, roles=[Role(r) for r in form.cleaned_data["roles"]])
            if person.is_active != form.cleaned_data["is_active"]:
                person.is_active = form.cleaned_data["is_active"]
                person.save(update_fields=["is_active"])
            messages.success(request, _("Saved %(user)s.") % {"user": person})
            return redirect("k12vista:users")
    chosen = set(form["roles"].value() or [])
    readers = [role.value for role in READERS_OF_ALL_LABELS]
    blind = Role.ANNOTATOR.value in chosen and bool(chosen & set(readers))
    return render(request, "k12vista/user_edit.html", {"form": form, "person": person, "readers": readers,
                                                        "blind": blind})  # fmt: skip


@role_required(Role.ADMIN)
@require_POST
def user_invite(request: HttpRequest, pk: int) -> HttpResponse:
    """Shows a fresh invitation link (POST: making a link is an action)."""
    person = get_object_or_404(services.manageable_by(request.user), pk=pk)
    link = request.build_absolute_uri(services.invitation_path(person))
    messages.success(request, _("Invitation link for %(user)s: %(link)s") % {"user": person, "link": link})
    return redirect("k12vista:user_edit", pk=pk)


@role_required(Role.ADMIN)
def studio_settings(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST":
        queue = request.POST.get("queue", Job.Queue.CPU)
        try:
            job = jobs.start_worker_check(queue=queue, user=request.user)
        except ValueError:  # no worker consumes it: the job would wait for ever
            return HttpResponseBadRequest(_("No worker queue has that name."), content_type="text/plain")
        if request.htmx:
            return render(request, "k12vista/_job_progress.html", {"job": job})
        return redirect("k12vista:job_detail", pk=job.pk)
    db = settings.DATABASES["default"]
    ctx = {
        "database_engine": db["ENGINE"].rsplit(".", 1)[-1],
        "database_name": db.get("NAME"),
        "broker": settings.CELERY_BROKER_URL.split("://", 1)[0],
        "media_root": settings.MEDIA_ROOT,
        "debug": settings.DEBUG,
        "behind_tls": settings.BEHIND_TLS,
        "recent_jobs": Job.objects.all()[:10],
        "worker_queues": jobs.worker_queues(),
    }
    return render(request, "k12vista/settings.html", ctx)


@role_required(Role.ADMIN)
def guideline_list(request: HttpRequest) -> HttpResponse:
    """Every kind's guideline as it reads now, with its versions; an edit saves a new version."""
    form = GuidelineForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        saved = guidelines.publish(kind=form.cleaned_data["kind"], text=form.cleaned_data["text"], by=request.user)
        messages.success(request, _("Saved %(version)s.") % {"version": saved.version_name})
        return redirect("k12vista:guidelines")
    kinds = [
        {"kind": kind, "current": guidelines.current(kind),
         "history": Guideline.objects.of_kind(kind).select_related("updated_by")[:20]}
        for kind in Guideline.Kind
    ]  # fmt: skip
    return render(request, "k12vista/guidelines.html", {"kinds": kinds, "form": form},
                  status=400 if form.errors else 200)  # fmt: skip


@token_accepted
@login_required
def media(request: HttpRequest, path: str) -> HttpResponse:
    """A stored file, for those its object's access rule admits (``files.readable_file``); 404 for
    everyone else and for names no object owns. The proxy may do the sending (SENDFILE_BACKEND)."""
    stored = files.readable_file(request.user, path)
    if stored is None:
        raise Http404
    return files.send_file(request, stored)
