"""The researcher's screens: endpoints, prompts, runs, scoring and difficulty filters.

Researchers and administrators manage everything here; annotators see nothing
(the leaderboard's pages, which inspectors may read too, are in
``inference.leaderboard_views``). Runs (and their scoring) belong to whoever
started them, as jobs do; administrators see all. Endpoints and prompts are
shared by the whole research team.
"""

from __future__ import annotations

import difflib
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from inference import (
    assist,
    client,
    default_prompts,
    difficulty,
    prompts,
    scoring,
    services,
)  # fmt: skip
from inference.forms import (
    DifficultyFilterForm,
    EndpointForm,
    PromptForm,
    ReferenceCheckoutForm,
    RunForm,
    ScoringForm,
)
from inference.models import (
    AssistRun,
    InferenceRun,
    InferenceRunQuerySet,
    JudgedStep,
    Judgment,
    ModelEndpoint,
    PromptTemplate,
    Protocol,
    ScoringRun,
)
from inference.reference import register as reference_register
from k12vista.htmx import HtmxHttpRequest
from k12vista.models import Job
from k12vista.pagination import keyset_page
from k12vista.roles import Role, require_role, role_required
from k12vista.vocabulary import LABELS_BY_CODE, QuestionType

MANAGERS = (Role.RESEARCHER, Role.ADMIN)
ANY_TYPE = "any"  # the URL's name for prompts that serve every question type


# --- access helpers ---------------------------------------------------------


def runs_for(user) -> InferenceRunQuerySet:
    """The runs a person may see (InferenceRun.objects.visible_to, the one rule)."""
    require_role(user, *MANAGERS)
    return InferenceRun.objects.visible_to(user).select_related("endpoint", "job", "created_by")


def get_run_for_user(user, pk: int) -> InferenceRun:
    return get_object_or_404(runs_for(user), pk=pk)


def get_scoring_run_for_user(user, pk: int) -> ScoringRun:
    """A scoring run is visible with the inference run it scores."""
    require_role(user, *MANAGERS)
    found = ScoringRun.objects.filter(inference_run__in=InferenceRun.objects.visible_to(user))
    return get_object_or_404(found.select_related("inference_run__endpoint", "judge", "job"), pk=pk)


def get_endpoint_for_user(user, pk: int) -> ModelEndpoint:
    require_role(user, *MANAGERS)
    return get_object_or_404(ModelEndpoint, pk=pk)


def get_prompt_slot(user, kind: str, qtype: str) -> tuple[str, str]:
    """(kind, qtype) of a prompt page; 404 for names that are no prompt kind or question type."""
    require_role(user, *MANAGERS)
    if kind not in PromptTemplate.Kind.values or (qtype != ANY_TYPE and qtype not in QuestionType.values):
        raise Http404
    return kind, "" if qtype == ANY_TYPE else qtype


# --- home -------------------------------------------------------------------


@role_required(Role.RESEARCHER)
def home(request: HttpRequest) -> HttpResponse:
    """The researcher's home: runs, datasets and exports they started."""
    recent = Job.objects.started_by(request.user)[:20]
    runs = runs_for(request.user)[:10]
    return render(request, "inference/home.html", {"jobs": recent, "runs": runs})


# --- endpoints --------------------------------------------------------------


# Whether the key's variable is declared and set on this server; the value is never read into a page.
key_state = client.key_state


def with_key_state(endpoints):
    for endpoint in endpoints:
        endpoint.key_state = key_state(endpoint)
        yield endpoint


@role_required(*MANAGERS)
@require_GET
def endpoint_list(request: HttpRequest) -> HttpResponse:
    endpoints = list(with_key_state(ModelEndpoint.objects.order_by("-active", "name")))
    return render(request, "inference/endpoint_list.html", {"endpoints": endpoints})


@role_required(*MANAGERS)
def endpoint_create(request: HttpRequest) -> HttpResponse:
    return endpoint_form_page(request, ModelEndpoint())


@login_required
def endpoint_edit(request: HttpRequest, pk: int) -> HttpResponse:
    return endpoint_form_page(request, get_endpoint_for_user(request.user, pk))


def endpoint_form_page(request: HttpRequest, endpoint: ModelEndpoint) -> HttpResponse:
    """The URL goes through the allowlist in save_endpoint; its refusal shows on the URL field."""
    form = EndpointForm(request.POST or None, instance=endpoint)
    if request.method == "POST" and form.is_valid():
        try:
            saved = services.save_endpoint(endpoint=form.save(commit=False), user=request.user)
        except services.EndpointError as exc:
            form.add_error("replica_urls" if isinstance(exc, services.ReplicaError) else "base_url", str(exc))
        else:
            messages.success(request, _("Saved the endpoint %(name)s.") % {"name": saved.name})
            return redirect("inference:endpoints")
    ctx = {"form": form, "endpoint": endpoint, "key_state": key_state(endpoint)}
    return render(request, "inference/endpoint_form.html", ctx)


@login_required
@require_POST
def endpoint_deactivate(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    endpoint = services.deactivate_endpoint(endpoint=get_endpoint_for_user(request.user, pk))
    if request.htmx:
        return render(request, "inference/endpoint_list.html#row", {"endpoint": next(with_key_state([endpoint]))})
    messages.success(request, _("Switched off %(name)s.") % {"name": endpoint.name})
    return redirect("inference:endpoints")


@login_required
@require_POST
def endpoint_test(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Test connection: one tiny request through the client every run uses (a POST: it calls out)."""
    endpoint = get_endpoint_for_user(request.user, pk)
    probe = client.probe_endpoint(endpoint)
    if request.htmx:
        return render(request, "inference/_endpoint_test.html", {"endpoint": endpoint, "probe": probe})
    shown = f"{endpoint.name}: {probe.message}"
    (messages.success if probe.ok else messages.warning if probe.ok is None else messages.error)(request, shown)
    if request.POST.get("next") == "edit":
        return redirect("inference:endpoint_edit", pk=endpoint.pk)
    return redirect("inference:endpoints")


# --- prompts ----------------------------------------------------------------


def slot_of(kind: str, qtype: str) -> str:
    return qtype or ANY_TYPE


@role_required(*MANAGERS)
def prompt_list(request: HttpRequest) -> HttpResponse:
    """The current version of every prompt; POST loads the defaults not stored yet."""
    if request.method == "POST":
        created = prompts.ensure_default_prompts()
        messages.success(request, _("Loaded %(n)s default prompts.") % {"n": created})
        return redirect("inference:prompts")
    latest: dict[tuple[str, str], PromptTemplate] = {}
    for prompt in PromptTemplate.objects.filter(prompt_set="").order_by("kind", "qtype", "-version"):
        latest.setdefault((prompt.kind, prompt.qtype), prompt)
    rows = [{"prompt": p, "slot": slot_of(*key)} for key, p in latest.items()]
    stored = set(latest)
    missing = sum((d.kind, d.question_type or "") not in stored for d in default_prompts.DEFAULT_PROMPTS)
    ctx = {"rows": rows, "missing_defaults": missing, "reference_sets": reference_register.registered_sets(),
           "reference_form": ReferenceCheckoutForm()}  # fmt: skip
    return render(request, "inference/prompt_list.html", ctx)


@role_required(*MANAGERS)
@require_POST
def reference_prompts_register(request: HttpRequest) -> HttpResponse:
    """Registers the prompts of a reference checkout on the server (the command's screen)."""
    form = ReferenceCheckoutForm(request.POST)
    if form.is_valid():
        # Only inside the reference folder: the same message for any other path, there or not.
        path = reference_register.checkout_in_reference_folder(form.cleaned_data["path"])
        try:
            if path is None:
                raise reference_register.CheckoutError(
                    _("Only checkouts inside the reference folder (REFERENCE_CHECKOUTS_DIR) are read from here.")
                )
            done = reference_register.register_checkout(path, user=request.user)
        except reference_register.CheckoutError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                _("Registered %(set)s: %(n)s new prompt versions.") % {"set": done.set_name, "n": done.created},
            )
    else:
        messages.error(request, _("Give the folder of the reference checkout."))
    return redirect("inference:prompts")


@login_required
def prompt_detail(request: HttpRequest, kind: str, qtype: str) -> HttpResponse:
    """A prompt's versions, and a form that saves the edited text as a new version."""
    kind, qtype = get_prompt_slot(request.user, kind, qtype)
    versions = list(PromptTemplate.objects.filter(prompt_set="", kind=kind, qtype=qtype).order_by("-version"))
    base = versions[0] if versions else _current_or_none(kind, qtype)
    initial = {"name": base.name, "system": base.system, "user_template": base.user_template} if base else {}
    # A trained judge's prompt is what it learnt on: a new version here would change no judge.
    editable = kind not in default_prompts.KINDS_WITHOUT_DEFAULT
    if request.method == "POST" and not editable:
        return HttpResponseNotAllowed(["GET"])
    form = PromptForm(request.POST or None, initial=initial) if editable else None
    if form is not None and request.method == "POST" and form.is_valid():
        try:
            saved = prompts.save_version(kind=kind, qtype=qtype, user=request.user, **form.cleaned_data)
        except prompts.PromptError as exc:
            form.add_error(None, str(exc))
        else:
            if versions and saved.pk == versions[0].pk:
                messages.info(request, _("Nothing changed; version %(v)s stays current.") % {"v": saved.version})
            else:
                messages.success(request, _("Saved version %(v)s.") % {"v": saved.version})
            return redirect("inference:prompt", kind=kind, qtype=slot_of(kind, qtype))
    ctx = {
        "kind": kind, "kind_label": PromptTemplate.Kind(kind).label, "qtype": qtype, "slot": slot_of(kind, qtype),
        "versions": versions, "inherited": None if versions else base, "form": form,
        "placeholders": sorted(default_prompts.PLACEHOLDERS),
    }  # fmt: skip
    return render(request, "inference/prompt_detail.html", ctx)


def _current_or_none(kind: str, qtype: str) -> PromptTemplate | None:
    try:
        return prompts.current(kind, qtype)
    except LookupError:
        return None


def prompt_text(prompt: PromptTemplate) -> list[str]:
    return ["[system]", *prompt.system.splitlines(), "[user]", *prompt.user_template.splitlines()]


@login_required
@require_GET
@vary_on_headers("HX-Request")
def prompt_diff(request: HtmxHttpRequest, kind: str, qtype: str) -> HttpResponse:
    """A unified diff of two versions, as text lines (the template escapes them)."""
    kind, qtype = get_prompt_slot(request.user, kind, qtype)
    versions = PromptTemplate.objects.filter(prompt_set="", kind=kind, qtype=qtype)
    try:
        old = get_object_or_404(versions, version=int(request.GET.get("a", "")))
        new = get_object_or_404(versions, version=int(request.GET.get("b", "")))
    except ValueError as exc:
        raise Http404 from exc
    lines = difflib.unified_diff(prompt_text(old), prompt_text(new), f"v{old.version}", f"v{new.version}", lineterm="")
    diff = [{"text": line, "kind": line[:1] if line[:1] in "+-@" else " "} for line in lines]
    ctx = {"kind": kind, "slot": slot_of(kind, qtype), "old": old, "new": new, "diff": diff}
    if request.htmx:
        return render(request, "inference/prompt_diff.html#diff", ctx)
    return render(request, "inference/prompt_diff.html", ctx)


# --- runs -------------------------------------------------------------------


@role_required(*MANAGERS)
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    runs = runs_for(request.user).with_counts()[:100]
    return render(request, "inference/run_list.html", {"runs": runs})


@role_required(*MANAGERS)
def run_create(request: HttpRequest) -> HttpResponse:
    form = RunForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = services.start_inference_run(
                endpoint=data["endpoint"], mode=data["mode"], filters=form.filters(), user=request.user,
                input_form=data["input_form"], params=form.params(), seed=data["seed"], name=data["name"],
                protocol=data["protocol"] or Protocol.STUDIO, prompt_set=data["prompt_set"] or "",
            )  # fmt: skip
        except services.EndpointError as exc:  # the filters matching no question: the form's error
            form.add_error(None if isinstance(exc, services.NoQuestions) else "endpoint", str(exc))
        else:
            return redirect("inference:run", pk=run.pk)
    return render(request, "inference/run_form.html", {"form": form})


@login_required
@require_GET
@vary_on_headers("HX-Request")
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = get_run_for_user(request.user, pk)
    responses, next_query = keyset_page(run.responses.select_related("question"), request)
    ctx = {"run": run, "responses": responses, "next_query": next_query}
    if request.htmx:  # the "More" link asks for the next rows only
        return render(request, "inference/run_detail.html#responses", ctx)
    ctx |= {
        "counts": run.counts(),
        "prompt_rows": sorted(run.provenance.get("prompts", {}).items()),
        "scoring_runs": run.scoring_runs.select_related("judge", "job"),
        # Scored as it was asked, unless the researcher chooses otherwise.
        "scoring_form": ScoringForm(initial={"method": scoring_method_for(run), "protocol": run.protocol}),
    }
    return render(request, "inference/run_detail.html", ctx)


def scoring_method_for(run: InferenceRun) -> str:
    if run.mode == InferenceRun.Mode.DIRECT:
        return ScoringRun.Method.JUDGE_DIRECT
    return ScoringRun.Method.JUDGE_STEPS


@login_required
@require_POST
def run_retry(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_run_for_user(request.user, pk)
    try:
        services.retry_failed(run=run, user=request.user)
    # Still being answered, or an offline engine that fits no GPU class any more.
    except (services.RetryRefused, services.EndpointError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("The failed answers are asked again."))
    return redirect("inference:run", pk=run.pk)


@login_required
@require_POST
def run_score(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_run_for_user(request.user, pk)
    form = ScoringForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose an active judge endpoint and a method."))
        return redirect("inference:run", pk=run.pk)
    try:
        scoring_run = scoring.start_scoring_run(
            inference_run=run, judge=form.cleaned_data["judge"], method=form.cleaned_data["method"], user=request.user,
            protocol=form.cleaned_data["protocol"] or Protocol.STUDIO,
        )  # fmt: skip
    except (scoring.ScoringError, services.EndpointError) as exc:
        messages.error(request, _("Scoring was not started: %(reason)s") % {"reason": exc})
        return redirect("inference:run", pk=run.pk)
    return redirect("inference:scoring", pk=scoring_run.pk)


# --- scoring ----------------------------------------------------------------


def with_labels(judgments: list[Judgment]) -> list[Judgment]:
    """Each judged step with its label's code, Chinese and English names."""
    for judgment in judgments:
        steps = [(step, LABELS_BY_CODE.get(step.label)) for step in judgment.steps.all()]
        judgment.labelled_steps = steps  # type: ignore[attr-defined]  # for the template; no field of the model
    return judgments


@login_required
@require_GET
@vary_on_headers("HX-Request")
def scoring_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    scoring_run = get_scoring_run_for_user(request.user, pk)
    rows = scoring_run.judgments.select_related("response__question").prefetch_related(
        Prefetch("steps", queryset=JudgedStep.objects.order_by("position"))
    )
    judgments, next_query = keyset_page(rows, request)
    ctx = {"scoring_run": scoring_run, "judgments": with_labels(judgments), "next_query": next_query}
    if request.htmx:
        return render(request, "inference/scoring_detail.html#judgments", ctx)
    ctx["coverage"] = scoring.coverage(scoring_run)
    return render(request, "inference/scoring_detail.html", ctx)


@login_required
@require_POST
def scoring_rescore(request: HttpRequest, pk: int) -> HttpResponse:
    scoring_run = get_scoring_run_for_user(request.user, pk)
    try:
        scoring.rescore_failed(scoring_run=scoring_run, user=request.user)
    except scoring.ScoringError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("The failed judgments are scored again."))
    return redirect("inference:scoring", pk=scoring_run.pk)


# --- difficulty and image-dependence filters ---------------------------------


def filter_runs_for(user) -> QuerySet[AssistRun]:
    """Filter runs a person may combine: their own; administrators see all (as with runs)."""
    require_role(user, *MANAGERS)
    runs = AssistRun.objects.filter(kind__in=assist.FILTER_KINDS)
    return runs if user.has_perm("k12vista.administer") else runs.filter(created_by=user)


def filter_query(small: list[AssistRun], text_only: AssistRun | None) -> str:
    return urlencode({"small": [run.pk for run in small], "text_only": text_only.pk if text_only else ""}, doseq=True)


def confirm_job_for(request: HttpRequest) -> Job | None:
    """The confirmation job named by ``?job=``, if it is one the person may watch."""
    job_id = request.GET.get("job", "")
    if request.method != "GET" or not job_id.isdecimal() or isinstance(request.user, AnonymousUser):
        return None
    jobs = Job.objects.filter(pk=int(job_id), kind=difficulty.CONFIRM_JOB_KIND)
    if not request.user.has_perm("k12vista.administer"):
        jobs = jobs.filter(started_by=request.user)
    return jobs.first()


@login_required
@require_http_methods(["GET", "POST"])
def difficulty_filters(request: HttpRequest) -> HttpResponse:
    """GET with runs chosen: the questions the filters would remove, with the
    evidence and their count; POST: confirm, rejecting them in the question bank."""
    data = request.POST if request.method == "POST" else (request.GET or None)
    form = DifficultyFilterForm(data, runs=filter_runs_for(request.user))
    preview, status = None, 200
    if data is not None and form.is_valid():
        small, text_only = list(form.cleaned_data["small"]), form.cleaned_data["text_only"]
        try:
            if request.method == "POST":
                fingerprint = form.cleaned_data["fingerprint"]
                job = difficulty.start_confirm_filters(
                    small_runs=small, text_only_run=text_only, fingerprint=fingerprint, user=request.user
                )
                query = filter_query(small, text_only)
                return redirect(f"{reverse('inference:difficulty')}?{query}&{urlencode({'job': job.pk})}")
            preview = difficulty.preview_filters(small, text_only)
        except difficulty.StaleConfirmation as exc:
            form.add_error(None, str(exc))
            preview, status = difficulty.preview_filters(small, text_only), 409
        except difficulty.FilterError as exc:
            form.add_error(None, str(exc))
            status = 400
    elif data is not None:
        status = 400
    ctx: dict[str, Any] = {"form": form, "preview": preview,
                           "rows": difficulty.filter_evidence(preview) if preview else [],
                           "job": confirm_job_for(request)}  # fmt: skip
    if preview:
        ctx["unchecked"] = [(run, preview.unchecked[run.pk]) for run in (*preview.small_runs, preview.text_only_run)
                            if run and run.pk in preview.unchecked]  # fmt: skip
    return render(request, "inference/difficulty_filters.html", ctx, status=status)
