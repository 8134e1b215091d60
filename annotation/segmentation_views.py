"""The segmentation screen: an imported PDF's pages with every question's regions, where a person
repairs the cuts. Every change is a POST to ``repair``, which calls one function of annotation.segmentation."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django_htmx.middleware import HtmxDetails

from annotation import segmentation
from annotation.models import Figure, Question, Segment, SourceDocument
from annotation.views import UPLOADERS, documents_for
from k12vista.roles import require_role


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails  # set by django_htmx's middleware


def _document(request: HttpRequest, pk: int) -> SourceDocument:
    require_role(request.user, *UPLOADERS)
    return get_object_or_404(documents_for(request.user).filter(kind=SourceDocument.Kind.PDF), pk=pk)


def _context(document: SourceDocument, error: str = "") -> dict[str, Any]:
    questions = segmentation.document_questions(document)
    last = document.repairs.filter(undone_at__isnull=True).order_by("-created", "-id").first()
    return {"document": document, "questions": questions, "views": segmentation.page_views(document, questions),
            "last_repair": last, "error": error}  # fmt: skip


@login_required
def screen(request: HttpRequest, pk: int) -> HttpResponse:
    document = _document(request, pk)
    return render(request, "annotation/segmentation.html", _context(document))


def _question(document: SourceDocument, value: str | None) -> Question:
    return get_object_or_404(Question, pk=_int(value), source_document=document)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise segmentation.RepairError(_("A number was expected.")) from None


def _box(post: Any) -> list[Any]:
    return [post.get(name) for name in ("x0", "y0", "x1", "y1")]


def _apply(document: SourceDocument, post: Any, user: Any) -> None:
    action = post.get("action", "")
    if action == "undo":
        segmentation.undo(document=document, user=user)
    elif action == "add":
        page = get_object_or_404(document.pages, number=_int(post.get("page")))
        segmentation.add_question(document=document, page=page, box=_box(post), user=user,
                                  label=post.get("label", ""))  # fmt: skip
    elif action == "move":
        segmentation.move_box(question=_question(document, post.get("question")), index=_int(post.get("index")),
                              box=_box(post), user=user)  # fmt: skip
    elif action == "split":
        segmentation.split(question=_question(document, post.get("question")), index=_int(post.get("index")),
                           y=post.get("y"), user=user, label=post.get("label", ""))  # fmt: skip
    elif action == "merge":
        segmentation.merge(first=_question(document, post.get("question")),
                           second=_question(document, post.get("other")), user=user)  # fmt: skip
    elif action == "renumber":
        segmentation.renumber(question=_question(document, post.get("question")), label=post.get("label", ""),
                              user=user)  # fmt: skip
    elif action == "figure":
        figure = get_object_or_404(Figure, pk=_int(post.get("figure")), question__source_document=document)
        segmentation.move_figure(figure=figure, to=_question(document, post.get("other")), user=user)
    elif action == "answer":
        segmentation.move_answer(source=_question(document, post.get("question")),
                                 to=_question(document, post.get("other")), user=user)  # fmt: skip
    elif action in (Segment.Kind.STEM, Segment.Kind.NOT_QUESTION):
        segmentation.mark(question=_question(document, post.get("question")), kind=action, user=user,
                          count=_int(post.get("count", "0") or "0"))  # fmt: skip
    elif action == "page_done":
        page = get_object_or_404(document.pages, number=_int(post.get("page")))
        segmentation.page_done(page=page, user=user, done=post.get("done", "1") == "1")
    else:
        raise segmentation.RepairError(_("Unknown change."))


@login_required
@require_POST
def repair(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One repair (or an undo); htmx gets the screen's workspace back, a plain form the page."""
    document = _document(request, pk)
    error = ""
    try:
        _apply(document, request.POST, request.user)
    except segmentation.RepairError as exc:
        error = str(exc)
    if request.htmx:
        return render(request, "annotation/segmentation.html#workspace", _context(document, error))
    if error:
        messages.error(request, error)
    return redirect("annotation:segmentation", pk=document.pk)
