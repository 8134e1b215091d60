"""The agreement page: people with people, judge models with gold (the paper's Table 9),
how judge splits were aligned, and the checkers (expert scores, the paper's Table 6).

Researchers, inspectors and administrators read it. It only reads: the numbers
come from the stored report (``pem.agreement_store``, computed by a job from
pem.reports, which the API and other parts read too); a POST to the compute
view starts that job. Confusion
matrices are drawn as SVG with presentation attributes (fill-opacity), so the
heatmap needs no inline style.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from k12vista.models import Job
from k12vista.roles import Role, role_required
from k12vista.views import job_fragment
from k12vista.vocabulary import LABEL_CODES, LABELS_BY_CODE, STEP_LABELS
from pem import agreement_store, given_steps
from pem.reports import checker_report

READERS = (Role.RESEARCHER, Role.INSPECTOR, Role.ADMIN)
SCOPES = ("all", "pebench")
CELL = 34  # px, one heatmap cell
MARGIN = 48  # px, room for the row and column labels


def heatmap(matrix: list[list[int]], rows: list[str], columns: list[str]) -> dict:
    """SVG geometry of a confusion matrix: cell shade proportional to its count (of the largest)."""
    largest = max((count for row in matrix for count in row), default=0) or 1
    cells = [
        {
            "x": MARGIN + j * CELL, "y": MARGIN + i * CELL, "count": count, "row": rows[i], "column": columns[j],
            # A string, so the template writes it as is (no localised decimal comma).
            "opacity": f"{0.08 + 0.92 * count / largest:.3f}" if count else "0",
            "dark": count / largest > 0.55,
        }
        for i, row in enumerate(matrix) for j, count in enumerate(row)
    ]  # fmt: skip
    return {
        "cells": cells,
        "cell": CELL,
        "half": CELL // 2,
        "width": MARGIN + CELL * len(columns),
        "height": MARGIN + CELL * len(rows),
        "row_labels": [{"y": MARGIN + i * CELL + CELL // 2, "text": text} for i, text in enumerate(rows)],
        "column_labels": [{"x": MARGIN + j * CELL + CELL // 2, "text": text} for j, text in enumerate(columns)],
        "margin": MARGIN,
    }


def people_rows(people: dict) -> list[dict]:
    names = [
        ("cohen_kappa", _("Cohen's kappa (pooled pairs)")),
        ("scott_pi", _("Scott's pi")),
        ("fleiss_kappa", _("Fleiss' kappa")),
        ("krippendorff_alpha", _("Krippendorff's alpha (nominal)")),
        ("gwet_ac1", _("Gwet's AC1")),
    ]
    return [{"key": key, "name": name, "estimate": people[key]} for key, name in names if key in people]


@role_required(*READERS)
@require_GET
def agreement_page(request: HttpRequest) -> HttpResponse:
    scope = request.GET.get("scope", "all")
    if scope not in SCOPES:
        scope = "all"
    page = agreement_store.report_for_page(scope)
    report = page["report"]
    ctx = {"scope": scope, "page": page, "report": report, "checkers": checker_report(),
           "given_steps": given_steps.stored_reports(), "labels_given": STEP_LABELS}  # fmt: skip
    ctx |= progress_context(request, page["job"])
    if report is not None:
        ctx |= report_context(report)
    return render(request, "pem/agreement.html", ctx)


@role_required(*READERS)
@require_POST
def agreement_compute(request: HttpRequest) -> HttpResponse:
    """Starts computing the stored report (or finds the computation under way)."""
    scope = request.POST.get("scope", "all")
    if scope not in SCOPES:
        scope = "all"
    agreement_store.start_agreement(scope=scope, user=request.user)
    messages.info(request, _("Computing the agreement report; this page shows its progress."))
    return redirect(f"{reverse('pem:agreement')}?scope={scope}")


def progress_context(request: HttpRequest, job: Job | None) -> dict:
    """The job computing the report, polled through this page's own view: it may have been
    started by the system or by another reader, whose jobs the generic job view hides."""
    if job is None:
        return {"job": None}
    mine = Job.objects.visible_to(request.user).filter(pk=job.pk).exists()
    return {"job": job, "poll_url": reverse("pem:agreement_progress", args=[job.pk]), "cancel_hidden": not mine}


@role_required(*READERS)
@require_GET
def agreement_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress fragment of an agreement computation, for every reader of the page."""
    job = get_object_or_404(Job, pk=pk, kind=agreement_store.KIND)
    return job_fragment(request, job, progress_context(request, job))


def report_context(report: dict) -> dict:
    people = report["people"]
    codes = list(LABEL_CODES)
    return {
        "labels": [LABELS_BY_CODE[code] for code in codes],
        "people_rows": people_rows(people),
        "binary_rows": people_rows(people["binary"]),
        "people_heatmap": heatmap(people["confusion"], codes, codes),
        "judge_heatmaps": [
            {"rater": judge["rater"], "map": heatmap(judge["confusion"], codes, [*codes, "—"])}
            for judge in report["judges"]
        ],
        "judge_rows": [
            {"judge": judge, "by_label": [judge["accuracy_by_label"][code] for code in codes]}
            for judge in report["judges"]
        ],
    }
