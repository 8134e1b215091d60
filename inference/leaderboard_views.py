"""The leaderboard page, its downloads, pins and the published numbers' import.

Researchers, administrators and inspectors read the board; researchers and
administrators pin runs and import published numbers, which the whole research
team shares. The page only reads the stored slices (``inference.standings``); the
tables, the error-type bars and the chart specs are built here as HTML and dicts,
not by template loops, because a board of 40 models has thousands of cells.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop as _noop
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.models import Release
from inference import board_notes, leaderboard, services
from inference import standings as standings_service
from inference.forms import PublishedUploadForm
from inference.models import InferenceRun, Protocol, PublishedResult
from inference.standings import board_state
from inference.views import MANAGERS, get_run_for_user, get_scoring_run_for_user
from k12vista.htmx import HtmxHttpRequest
from k12vista.roles import Role, has_role, require_role, token_accepted
from k12vista.vocabulary import LABELS_BY_CODE, RELEASE_TAGS, QuestionType, Stage, Subject

LEADERBOARD_READERS = (Role.RESEARCHER, Role.ADMIN, Role.INSPECTOR)


# --- tables and charts ------------------------------------------------------


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
    groupings: list[tuple[str, str, tuple[tuple[str, str], ...]]] = [
        ("overall", _("Overall"), ((leaderboard.OVERALL, _("Overall")),))
    ]
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


# --- the page, downloads, pins and published numbers ------------------------


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
def leaderboard_page(request: HtmxHttpRequest) -> HttpResponse:
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
    return published_releases().filter(version=int(version)).first() if version.isdecimal() else None


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
