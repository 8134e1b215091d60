"""The segmentation screen: an imported PDF's pages with every question's regions, where a person
repairs the cuts. Every change is a POST to ``repair``, which calls one function of annotation.segmentation."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation import segmentation
from annotation.models import SourceDocument
from annotation.views import UPLOADERS, documents_for
from k12vista.htmx import HtmxHttpRequest
from k12vista.roles import require_role


def _document(request: HttpRequest, pk: int) -> SourceDocument:
    require_role(request.user, *UPLOADERS)
    return get_object_or_404(documents_for(request.user).filter(kind=SourceDocument.Kind.PDF), pk=pk)


def _context(document: SourceDocument, error: str = "") -> dict[str, Any]:
    questions = segmentation.document_questions(document)
    last = document.repairs.filter(undone_at__isnull=True).order_by("-created", "-id").first()
    return {"document": document, "questions": questions, "views": segmentation.page_views(document, questions),
            "last_repair": last, "next_redo": segmentation.redoable(document), "error": error}  # fmt: skip


@login_required
def screen(request: HttpRequest, pk: int) -> HttpResponse:
    document = _document(request, pk)
    return render(request, "annotation/segmentation.html", _context(document))


@login_required
@require_POST
def repair(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One repair (or an undo, or a redo); htmx gets the screen's workspace back, a plain form the page."""
    document = _document(request, pk)
    error = ""
    try:
        segmentation.apply_change(document=document, values=request.POST, user=request.user)
    except segmentation.RepairError as exc:
        error = str(exc)
    if request.htmx:
        return render(request, "annotation/segmentation.html#workspace", _context(document, error))
    if error:
        messages.error(request, error)
    return redirect("annotation:segmentation", pk=document.pk)
