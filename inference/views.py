"""The researcher's screens: endpoints, prompts, runs, scoring and leaderboards.

Researchers and administrators manage everything here; inspectors may read the
leaderboard; annotators see nothing. Runs (and their scoring) belong to whoever
started them, as jobs do; administrators see all. Endpoints, prompts and
published numbers are shared by the whole research team.
"""

from __future__ import annotations

import difflib
from decimal import ROUND_HALF_UP, Decimal
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop as _noop
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.models import Release
from inference import (
    assist,
    board_notes,
    client,
    default_prompts,
    difficulty,
    leaderboard,
    prompts,
    scoring,
    services,
)  # fmt: skip
from inference import standings as standings_service
from inference.forms import (
    DifficultyFilterForm,
    EndpointForm,
    PromptForm,
    PublishedUploadForm,
    ReferenceCheckoutForm,
    RunForm,
    ScoringForm,
)
from inference.models import (
    AssistRun,
    InferenceRun,
    JudgedStep,
    Judgment,
    ModelEndpoint,
    PromptTemplate,
    Protocol,
    PublishedResult,
    ScoringRun,
)
from inference.reference import register as reference_register
from inference.standings import board_state
from k12vista.models import Job
from k12vista.pagination import keyset_page
from k12vista.roles import Role, has_role, require_role, role_required, token_accepted
from k12vista.vocabulary import LABELS_BY_CODE, RELEASE_TAGS, QuestionType, Stage, Subject

MANAGERS = (Role.RESEARCHER, Role.ADMIN)
LEADERBOARD_READERS = (Role.RESEARCHER, Role.ADMIN, Role.INSPECTOR)
ANY_TYPE = "any"  # the URL's name for prompts that serve every question type


# --- access helpers ---------------------------------------------------------


def runs_for(user) -> QuerySet[InferenceRun]:
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
def endpoint_deactivate(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_endpoint_for_user(request.user, pk)
    endpoint.active = False
    endpoint.save(update_fields=["active"])
    if request.htmx:
        endpoint.key_state = key_state(endpoint)
        return render(request, "inference/endpoint_list.html#row", {"endpoint": endpoint})
    messages.success(request, _("Switched off %(name)s.") % {"name": endpoint.name})
    return redirect("inference:endpoints")


@login_required
@require_POST
def endpoint_test(request: HttpRequest, pk: int) -> HttpResponse:
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
def prompt_diff(request: HttpRequest, kind: str, qtype: str) -> HttpResponse:
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
        except services.EndpointError as exc:
            form.add_error("endpoint", str(exc))
        else:
            return redirect("inference:run", pk=run.pk)
    return render(request, "inference/run_form.html", {"form": form})


@login_required
@require_GET
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
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
    services.retry_failed(run=run, user=request.user)
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
        judgment.labelled_steps = [(step, LABELS_BY_CODE.get(step.label)) for step in judgment.steps.all()]
    return judgments


@login_required
@require_GET
@vary_on_headers("HX-Request")
def scoring_detail(request: HttpRequest, pk: int) -> HttpResponse:
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


# --- leaderboard ------------------------------------------------------------


def percent(value: float | None) -> float | None:
    return None if value is None else value * 100


_QUANTUM = {places: Decimal(1).scaleb(-places) for places in range(3)}


def fixed(value: float | None, places: int) -> str:
    """What ``{{ value|floatformat:places }}`` prints (half up, from the shortest
    repr), at a fraction of the filter's cost: a leaderboard of 40 models has
    thousands of numbers, and the filter was most of the page's time."""
    if value is None:
        return ""
    return str(Decimal(repr(value)).quantize(_QUANTUM[places], ROUND_HALF_UP))


def score_cell(cell: leaderboard.Cell | None, published: leaderboard.PublishedScore | None) -> dict:
    cell = cell or leaderboard.Cell("")
    mean, low, high, coverage = (percent(v) for v in (cell.mean, cell.ci_low, cell.ci_high, cell.coverage))
    shown = percent(published.score) if published else None
    return {
        "mean": mean, "low": low, "high": high, "coverage": coverage, "n": cell.n, "items": cell.items,
        "absent": cell.absent, "published": shown, "source": published.source if published else "",
        "text": {"mean": fixed(mean, 1), "low": fixed(low, 1), "high": fixed(high, 1),
                 "coverage": fixed(coverage, 0), "published": fixed(shown, 1)},
    }  # fmt: skip


def score_cells_html(cells: list[dict]) -> str:
    """The ``<td>`` of each score: ours with its interval and coverage, and a
    published number beside it. Built here, not by a template include per cell:
    a board of 40 models has thousands of cells, and the includes were most of
    the page's time. Everything from outside (the published source) is escaped."""
    interval, scored, published = _("95% interval"), _("scored / items"), _("published")
    out = []
    for c in cells:
        text = c["text"]
        if c["mean"] is not None:
            html = f"<strong>{text['mean']}</strong>"
            if c["low"] is not None:
                html += f' <span class="muted" title="{interval}">[{text["low"]}–{text["high"]}]</span>'
        else:
            html = "—" if c["items"] else '<span class="muted">·</span>'
        if c["items"]:
            html += f'<br><small class="muted" title="{scored}">{c["n"]}/{c["items"]} ({text["coverage"]}%)</small>'
        if c["published"] is not None:
            html += (f'<br><small class="published" data-published title="{escape(c["source"])}">{published} '
                     f"{text['published']}</small>")  # fmt: skip
        out.append(f"<td>{html}</td>")
    return mark_safe("".join(out))  # noqa: S308 (numbers, our translated words and escaped text)


def group_title(group: str) -> str:
    """A group key (``stage:primary``, ``subject:math``, ``cell:math-g9``,
    ``grid:multiple_choice:math-g9``) in the reader's language."""
    kind, _sep, value = group.partition(":")
    names = {"stage": Stage, "subject": Subject, "type": QuestionType}
    if kind in names and value in names[kind].values:
        return str(names[kind](value).label)
    if kind == "grid":
        qtype, _sep, tag = value.partition(":")
        return f"{QuestionType(qtype).label} · {tag}"
    return str(_("Overall")) if group == leaderboard.OVERALL else value or group


def score_tables(entries: list[leaderboard.Entry]) -> list[dict]:
    """One table per grouping (overall, stage, subject, type, cell): a row per
    model; tags outside the release get their own, marked columns."""
    titles = {"stage": _("By stage"), "subject": _("By subject"), "type": _("By question type"),
              "cell": _("By subject and stage")}  # fmt: skip
    extra = tuple((f"cell:{tag}", tag) for tag in leaderboard.outside_tags(entries))
    groupings = [("overall", _("Overall"), ((leaderboard.OVERALL, _("Overall")),))]
    for name, columns in leaderboard.GROUPINGS.items():
        groupings.append((name, titles.get(name, name), columns + extra if name == "cell" else columns))
    tables = []
    for name, title, columns in groupings:
        rows = [
            {"model": e.model, "other": bool(e.run and e.run.other_question_set),
             "cells": score_cells_html([score_cell(e.cells.get(g), e.published.get(g)) for g, _t in columns])}
            for e in entries
        ]  # fmt: skip
        heads = [{"title": group_title(g), "outside": not leaderboard.in_release(g)} for g, _t in columns]
        tables.append({"name": name, "title": title, "columns": heads, "rows": rows})
    return tables


def grid_table(entries: list[leaderboard.Entry]) -> dict:
    """The paper's grid: a row per model and question type, a column per subject-grade tag."""
    tags = [*RELEASE_TAGS, *leaderboard.outside_tags(entries)]
    columns = [{"title": tag, "outside": tag not in RELEASE_TAGS} for tag in tags]
    rows = []
    for entry in entries:
        for index, qtype in enumerate(leaderboard.TYPES):
            groups = [f"grid:{qtype}:{tag}" for tag in tags] + [f"type:{qtype}"]
            cells = score_cells_html([score_cell(entry.cells.get(g), entry.published.get(g)) for g in groups])
            rows.append({"model": entry.model, "first": index == 0, "type": QuestionType(qtype).label, "cells": cells})
    return {"columns": columns, "rows": rows, "types": len(leaderboard.TYPES)}


CODES = [LABELS_BY_CODE[code] for code in leaderboard.ERROR_CODES]


def error_bars(dist: leaderboard.ErrorDistribution) -> list[dict]:
    bars = []
    for code, count in dist.counts.items():
        share = percent(dist.shares[code])
        bars.append({"label": LABELS_BY_CODE[code], "count": count, "share": share,
                     "width": fixed(share or 0, 2), "share_text": fixed(share or 0, 1)})  # fmt: skip
    return bars


def bars_html(bars: list[dict]) -> str:
    """One bar per error label. Built here, not by template loops, for the
    same reason as score_cells_html."""
    out = []
    for bar in bars:
        label = bar["label"]
        out.append(
            '<div role="listitem" style="display: grid; grid-template-columns: 16rem 1fr 4rem; gap: .5rem; '
            'align-items: center; margin: .15rem 0">'
            f'<span><span class="label-code">{label.code}</span> {escape(label.chinese)} / '
            f"{escape(label.english)}</span>"
            '<span style="background: #e4e7ec; height: .9rem; border-radius: 3px; overflow: hidden">'
            f'<span class="bar" data-code="{label.code}" style="display: block; height: 100%; '
            f'background: var(--accent); width: {bar["width"]}%"></span></span>'
            f'<span>{bar["share_text"]}% <small class="muted">({bar["count"]})</small></span></div>'
        )
    return mark_safe("".join(out))  # noqa: S308 (codes, numbers and escaped names)


def cell_shares_html(entry: leaderboard.Entry) -> str:
    """The table rows of error-type shares in every cell and grid cell that has error steps."""
    out = []
    for group, dist in entry.errors.items():
        if group in leaderboard.ROLLUP_GROUPS or not dist.error_steps:
            continue
        outside = "" if leaderboard.in_release(group) else " §"
        shares = "".join(
            f'<td data-code="{code}">{fixed(percent(share) or 0, 1)}</td>' for code, share in dist.shares.items()
        )
        out.append(f'<tr data-group="{escape(group)}"><th scope="row">{escape(group_title(group))}{outside}</th>'
                   f"<td>{dist.error_steps}/{dist.steps}</td>{shares}</tr>")  # fmt: skip
    return mark_safe("".join(out))  # noqa: S308 (escaped group keys and titles, numbers)


def error_charts(entries: list[leaderboard.Entry]) -> list[dict]:
    """Per model: bars of each error label's share overall and by stage,
    subject and type; and a table of the shares in every cell and grid cell
    that has error steps."""
    charts = []
    for entry in entries:
        groups = []
        for group in leaderboard.ROLLUP_GROUPS:
            dist = entry.errors.get(group)
            if dist is None or not dist.error_steps:
                continue
            groups.append({"key": group, "group": group_title(group), "steps": dist.steps,
                           "error_steps": dist.error_steps, "bars": bars_html(error_bars(dist))})  # fmt: skip
        if groups:
            charts.append({"model": entry.model, "groups": groups, "cells": cell_shares_html(entry), "codes": CODES})
    return charts


def board_charts(entries: list[leaderboard.Entry]) -> list[dict]:
    """Chart specs (static/js/charts.js), each beside the table that holds its numbers: scores by
    stage, subject and type per model; and the error-type distribution by subject, type and stage
    over every entry's error steps (the paper's figures 5 and 6)."""
    charts = []
    for name, title in (("stage", _("Scores by stage")), ("subject", _("Scores by subject")),
                        ("type", _("Scores by question type"))):  # fmt: skip
        groups = [g for g, _t in leaderboard.GROUPINGS[name]]
        series = [{"name": e.model, "data": [getattr(e.cells.get(g), "mean", None) for g in groups]} for e in entries]
        if any(v is not None for s in series for v in s["data"]):
            spec = {"kind": "bar", "percent": True, "y_max": 1,
                    "categories": [group_title(g) for g in groups], "series": series}  # fmt: skip
            charts.append({"id": f"chart-scores-{name}", "title": title, "table": f"scores-{name}", "spec": spec})
    for name, title in (("subject", _("Error types by subject")), ("type", _("Error types by question type")),
                        ("stage", _("Error types by stage"))):  # fmt: skip
        groups = [g for g, _t in leaderboard.GROUPINGS[name]]
        counts = {g: dict.fromkeys(leaderboard.ERROR_CODES, 0) for g in groups}
        for entry in entries:
            for g in groups:
                for code, count in getattr(entry.errors.get(g), "counts", {}).items():
                    counts[g][code] += count
        totals = {g: sum(counts[g].values()) for g in groups}
        shown = [g for g in groups if totals[g]]
        if not shown:
            continue
        series = [
            {"name": f"{code} {LABELS_BY_CODE[code].chinese}", "data": [counts[g][code] / totals[g] for g in shown]}
            for code in leaderboard.ERROR_CODES
        ]
        spec = {"kind": "bar", "percent": True, "stack": True, "y_max": 1,
                "categories": [group_title(g) for g in shown], "series": series}  # fmt: skip
        charts.append({"id": f"chart-errors-{name}", "title": title, "table": "error-charts", "spec": spec})
    return charts


def entry_runs(state, mode: str) -> list[dict]:
    """What each entry covers: its runs (linked), snapshot time, question set, and what is not counted."""
    rows = []
    for entry in state.board.for_mode(mode):
        if entry.run is None:  # published numbers only
            continue
        finished = state.finished.get(entry.run.inference_run, ())
        replaced = entry.run.replaced
        rows.append({"model": entry.model, "run": entry.run, "choices": [(r.pk, r.name) for r in finished],
                     "protocol": board_notes.protocol_label(entry.run.protocol),
                     "replaced_text": board_notes.replaced_text(replaced.differs) if replaced else ""})  # fmt: skip
    return rows


# The definitions, as the page shows them: the same texts as the downloads (formats.DEFINITIONS), translated.
DEFINITION_TITLES = {
    "time_rule": _noop("Time rule"), "entry": _noop("Entry"), "mean": _noop("Mean"), "interval": _noop("Interval"),
    "coverage": _noop("Coverage"), "absent": _noop("Absent"), "error_share": _noop("Error-type shares"),
    "grid": _noop("Grid"), "outside_release": _noop("Outside the release"), "question_set": _noop("Question set"),
    "scale": _noop("Scale"),
}  # fmt: skip


def definitions() -> list[tuple[str, str, str]]:
    return [(key, _(DEFINITION_TITLES[key]), _(text)) for key, text in leaderboard.DEFINITIONS.items()]


def chosen_mode(request: HttpRequest) -> str:
    mode = request.GET.get("mode", leaderboard.MODES[0])
    return mode if mode in leaderboard.MODES else leaderboard.MODES[0]


def can_manage(user) -> bool:
    return has_role(user, Role.RESEARCHER) or has_role(user, Role.ADMIN)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def leaderboard_page(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *LEADERBOARD_READERS)
    mode = chosen_mode(request)
    release = chosen_release(request)
    protocol = board_notes.chosen_protocol(request.GET.get("protocol"))
    state = board_state(mode, release=release.version if release else None, protocol=protocol)
    entries = state.board.for_mode(mode)
    ctx = {
        "mode": mode,
        "modes": InferenceRun.Mode.choices,
        "tables": score_tables(entries),
        "grid": grid_table(entries),
        "charts": error_charts(entries),
        "board_charts": board_charts(entries),
        "runs": entry_runs(state, mode),
        "not_on_board": board_notes.not_on_board(state, mode),
        "protocol": protocol,
        "protocols": [(value, board_notes.protocol_label(value)) for value in state.protocols],
        "protocol_choices": Protocol.choices,
        "question_set": state.board.question_set,
        "release": release,
        "releases": published_releases(),
        "left_out": state.left_out,
        "definitions": definitions(),
        "groupings": list(leaderboard.LATEX_GROUPINGS),
        "can_import": can_manage(request.user),
    }
    if request.htmx:  # the mode tabs swap the board only
        return render(request, "inference/leaderboard.html#board", ctx)
    return render(request, "inference/leaderboard.html", ctx)


def published_releases():
    return Release.objects.filter(status=Release.Status.PUBLISHED).order_by("-version")


def chosen_release(request: HttpRequest):
    """The published release the board is limited to (``?release=<version>``), or None for every run."""
    version = request.GET.get("release", "")
    return published_releases().filter(version=int(version)).first() if version.isdigit() else None


DOWNLOADS = {
    "csv": ("text/csv; charset=utf-8", "csv"),
    "json": ("application/json", "json"),
    "latex": ("application/x-tex; charset=utf-8", "tex"),
}


@token_accepted
@login_required
@require_GET
def leaderboard_download(request: HttpRequest, fmt: str) -> HttpResponse:
    require_role(request.user, *LEADERBOARD_READERS)
    if fmt not in DOWNLOADS:
        raise Http404
    release = chosen_release(request)
    board = board_state(release=release.version if release else None).board
    if fmt == "csv":
        body = leaderboard.to_csv(board)
    elif fmt == "json":
        body = leaderboard.to_json(board)
    else:
        grouping = request.GET.get("grouping", "stage")
        if grouping not in leaderboard.LATEX_GROUPINGS:
            raise Http404
        body = leaderboard.to_latex(board, mode=chosen_mode(request), grouping=grouping)
    content_type, extension = DOWNLOADS[fmt]
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="k12vista-leaderboard.{extension}"'
    return response


@login_required
@require_POST
def leaderboard_pin(request: HttpRequest) -> HttpResponse:
    """Pins a finished scoring run (of a run the person may manage) as its model's entry."""
    require_role(request.user, *MANAGERS)
    try:
        pk = int(request.POST.get("scoring_run", ""))
    except ValueError:
        raise Http404 from None
    scoring_run = get_scoring_run_for_user(request.user, pk)
    try:
        standings_service.pin_scoring_run(scoring_run=scoring_run, user=request.user)
    except standings_service.BoardError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("%(run)s now represents its model on the leaderboard.") % {"run": scoring_run})
    return redirect(f"{reverse('inference:leaderboard')}?mode={standings_service.MODE_OF_METHOD[scoring_run.method]}")


@login_required
@require_POST
def leaderboard_unpin(request: HttpRequest, pk: int) -> HttpResponse:
    """Back to the newest finished scoring run of inference run ``pk``."""
    run = get_run_for_user(request.user, pk)
    if standings_service.unpin(inference_run_id=run.pk):
        messages.success(request, _("The newest finished scoring run represents %(run)s again.") % {"run": run})
    return redirect(f"{reverse('inference:leaderboard')}?mode={run.mode}")


@transaction.atomic
@login_required
@require_http_methods(["GET", "POST"])
def published_import(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *MANAGERS)
    form = PublishedUploadForm(request.POST or None, request.FILES or None)
    line_errors: list[tuple[int, str]] = []
    if request.method == "POST" and form.is_valid():
        try:
            rows = leaderboard.read_published_csv(form.cleaned_data["file"], scale=form.cleaned_data["scale"])
        except leaderboard.PublishedCSVError as exc:
            line_errors = exc.errors
        else:
            saved = services.save_published_results(rows=rows, user=request.user)
            messages.success(request, _("Imported %(n)s published numbers.") % {"n": saved})
            return redirect("inference:published")
    ctx = {"form": form, "line_errors": line_errors, "published": PublishedResult.objects.all()[:500]}
    return render(request, "inference/published.html", ctx, status=400 if line_errors else 200)


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
    if request.method != "GET" or not job_id.isdigit():
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
    ctx = {"form": form, "preview": preview, "rows": difficulty.filter_evidence(preview) if preview else [],
           "job": confirm_job_for(request)}  # fmt: skip
    if preview:
        ctx["unchecked"] = [(run, preview.unchecked[run.pk]) for run in (*preview.small_runs, preview.text_only_run)
                            if run and run.pk in preview.unchecked]  # fmt: skip
    return render(request, "inference/difficulty_filters.html", ctx, status=status)
