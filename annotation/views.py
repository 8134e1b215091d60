from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from annotation import corrections, jsonl_import, pdf, queues, segmentation, services
from annotation.forms import (
    PdfUploadForm,
    QuestionFileForm,
    QuestionFilterForm,
    QuestionForm,
    QueueChoiceForm,
    RejectForm,
    StepsForm,
    described_changes,
    filter_controls,
)
from annotation.models import Assignment, Question, SourceDocument, StepProposal
from k12vista import import_files, job_text, work
from k12vista.htmx import HtmxHttpRequest
from k12vista.jobs import start_job
from k12vista.pagination import keyset_page
from k12vista.roles import Role, has_role, require_role, role_required

BROWSERS = (Role.RESEARCHER, Role.INSPECTOR, Role.ADMIN)


def get_question_for_browser(user, hash_id: str) -> Question:
    require_role(user, *BROWSERS)
    return get_object_or_404(Question, hash_id=hash_id)


# --- the annotator's queue ----------------------------------------------------


WAITING_CAP = 1000
QUEUE_CHOICES = "queue_choices"  # the session key: what the annotator narrowed their queue to


@role_required(Role.ANNOTATOR)
def queue(request: HttpRequest) -> HttpResponse:
    """The annotator's home: their own open assignments, nobody else's."""
    held = Assignment.objects.for_annotator(request.user).open().select_related("question")
    form = QueueChoiceForm(request.GET if request.GET else request.session.get(QUEUE_CHOICES) or None)
    within = queues.queue_filter(form.choices())
    waiting = {task: f"{WAITING_CAP:,}+" if n > WAITING_CAP else str(n)
               for task, n in queues.waiting_counts(within, cap=WAITING_CAP).items()}  # fmt: skip
    ctx = {"held": held, "waiting": waiting, "tasks": Assignment.Task, "choice_form": form,
           "corrections_waiting": corrections.waiting_for_fix().count()}  # fmt: skip
    return render(request, "annotation/queue.html", ctx)


@role_required(Role.ANNOTATOR)
@require_POST
def claim(request: HttpRequest) -> HttpResponse:
    task = request.POST.get("task", "")
    if task not in Assignment.Task.values:
        raise Http404
    request.session[QUEUE_CHOICES] = QueueChoiceForm(request.POST).choices()
    return open_next(request, task)


def open_next(request: HttpRequest, task: str) -> HttpResponse:
    """Opens the annotator's next question for the task within their queue choices
    (called from POSTs only: claiming is a change), or the queue when none is left."""
    choices = request.session.get(QUEUE_CHOICES)
    assignment = queues.next_assignment(annotator=request.user, task=task, choices=choices)
    if assignment is None:
        messages.info(request, _("Nothing is waiting for this task."))
        return redirect("annotation:queue")
    if not queues.within_choices(assignment, choices):
        messages.info(
            request,
            _(
                "You still hold %(id)s, which is outside your choices: it opens first, "
                "and the questions after it follow your choices."
            )
            % {"id": assignment.question.hash_id},
        )
    return redirect(work_url(assignment))


@role_required(Role.ANNOTATOR)
@require_POST
def heartbeat(request: HttpRequest, pk: int) -> HttpResponse:
    """An open work page keeps its lock while the annotator is on it (opening a page never does)."""
    queues.get_assignment_for_user(request.user, pk).renew()
    return HttpResponse(status=204)


def work_url(assignment: Assignment) -> str:
    from django.urls import reverse

    name = "annotation:review" if assignment.task == Assignment.Task.OCR_REVIEW else "annotation:steps"
    return reverse(name, args=[assignment.pk])


# --- OCR review -----------------------------------------------------------------


@role_required(Role.ANNOTATOR)
def review(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    assignment = queues.get_assignment_for_user(request.user, pk)
    if assignment.task != Assignment.Task.OCR_REVIEW:
        raise Http404
    question = assignment.question
    if request.method == "POST":
        assignment.renew()
    form = QuestionForm.for_question(question, request.POST or None)
    conflict = None
    if request.method == "POST" and form.is_valid():
        action = request.POST.get("action", "save")
        try:
            question = services.edit_question(
                question=question,
                changes=form.changes(),
                user=request.user,
                expected_version=form.cleaned_data["version"],
                note="ocr review",
            )
            assignment.count_active_time(request.POST.get("active_seconds"))
            if action == "accept":
                question.accept_ocr(by=request.user, expected_version=question.version)
                assignment.complete()
                messages.success(request, _("Accepted %(id)s.") % {"id": question.hash_id})
                return open_next(request, assignment.task)
        except services.EditConflict as exc:
            conflict = described_changes(exc.changed)
            question = exc.question
            form = refused_form(request, question)
        except services.QuestionDataError as exc:
            form.add_error(None, str(exc))
        else:
            if request.htmx:  # autosave: tell the page its new version
                return render(request, "annotation/review.html#saved", {"question": question})
            messages.success(request, _("Saved."))
            return redirect("annotation:review", pk=assignment.pk)
    ctx: dict[str, Any] = {
        "assignment": assignment,
        "question": question,
        "form": form,
        "conflict": conflict,
        "reject_form": RejectForm(),
        "status": refused_status(request, conflict),
    }
    # The segmentation screen's page viewer, with the questions detected after this one that may merge into it.
    ctx["viewer_pages"] = segmentation.pages_of(question)
    mergeable = queues.mergeable_in_document(question)
    around = {r.question.pk: r.question for v in ctx["viewer_pages"] for r in v.regions}
    ctx["merge_candidates"] = [q for pk, q in around.items() if pk in mergeable and pk != question.pk]
    if request.htmx and conflict:
        return render(request, "annotation/review.html#conflict", ctx, status=409)
    return render(request, "annotation/review.html", ctx, status=ctx["status"])


def refused_form(request: HttpRequest, question: Question) -> QuestionForm:
    """The editor's own values kept, on top of the version now saved, so that
    saving again is a deliberate choice after seeing what changed."""
    data = request.POST.copy()
    data["version"] = str(question.version)  # a QueryDict holds text, as a real POST would
    form = QuestionForm.for_question(question, data)
    form.is_valid()
    return form


@role_required(Role.ANNOTATOR)
@require_POST
def reject(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = queues.get_assignment_for_user(request.user, pk)
    # The time counts even when the reason is missing: the page is reloaded, and its count starts again.
    assignment.count_active_time(request.POST.get("active_seconds"))
    form = RejectForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("A rejection needs a reason."))
        return redirect(work_url(assignment))
    services.reject(question=assignment.question, reason=form.cleaned_data["reason"], user=request.user)
    assignment.complete()
    messages.success(request, _("Rejected %(id)s.") % {"id": assignment.question.hash_id})
    return open_next(request, assignment.task)  # reject and next, as accepting and submitting are


# --- solution steps ---------------------------------------------------------------


@role_required(Role.ANNOTATOR)
def steps(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    assignment = queues.get_assignment_for_user(request.user, pk)
    if assignment.task != Assignment.Task.STEP_CORRECTION:
        raise Http404
    question = assignment.question
    if request.method == "POST":
        assignment.renew()
    proposal = question.step_proposals.filter(status=StepProposal.Status.PENDING).first()
    initial_steps = question.solution_steps or (proposal.steps if proposal else [])
    form = StepsForm(request.POST or None, steps=initial_steps, initial={"version": question.version})
    conflict = None
    if request.method == "POST" and form.is_valid():
        try:
            question = services.edit_question(
                question=question,
                changes={"solution_steps": form.cleaned_data["steps"]},
                user=request.user,
                expected_version=form.cleaned_data["version"],
                note="step correction",
            )
            assignment.count_active_time(request.POST.get("active_seconds"))
            if request.POST.get("action") == "submit":
                services.submit_steps(question=question, user=request.user, proposal=proposal)
                assignment.complete()
                messages.success(request, _("Submitted the steps of %(id)s.") % {"id": question.hash_id})
                return open_next(request, assignment.task)
            if request.htmx:  # autosave: tell the page its new version
                return render(request, "annotation/steps.html#saved", {"question": question})
            messages.success(request, _("Saved."))
            return redirect("annotation:steps", pk=assignment.pk)
        except services.EditConflict as exc:
            conflict, question = described_changes(exc.changed), exc.question
            data = request.POST.copy()
            data["version"] = str(question.version)  # a QueryDict holds text, as a real POST would
            form = StepsForm(data)
            form.is_valid()
    diff = services.step_diff(proposal.steps, form.submitted_steps) if proposal else []
    ctx = {
        "assignment": assignment,
        "question": question,
        "form": form,
        "proposal": proposal,
        "diff": diff,
        "conflict": conflict,
        "reject_form": RejectForm(),
    }
    if request.htmx and conflict:
        return render(request, "annotation/steps.html#conflict", ctx, status=409)
    return render(request, "annotation/steps.html", ctx, status=refused_status(request, conflict))


def refused_status(request: HtmxHttpRequest, conflict: object) -> int:
    """409 for a save that lost to another, 422 for an autosave the form refused (so the page says it
    failed and keeps its active seconds for the next save); 200 for a page shown."""
    if conflict:
        return 409
    return 422 if request.method == "POST" and request.htmx else 200


# --- browsing -----------------------------------------------------------------------


@login_required
def question_list(request: HtmxHttpRequest) -> HttpResponse:
    require_role(request.user, *BROWSERS)
    form = QuestionFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    rows, next_query = keyset_page(Question.objects.matching(filters).select_related("source_document"), request)
    ctx = {"form": form, "controls": filter_controls(form), "questions": rows, "next_query": next_query}
    if request.htmx:
        return render(request, "annotation/question_list.html#rows", ctx)
    return render(request, "annotation/question_list.html", ctx)


@login_required
def question_detail(request: HttpRequest, hash_id: str) -> HttpResponse:
    question = get_question_for_browser(request.user, hash_id)
    ctx = {
        "question": question,
        "figures": question.figures.all(),
        "flags": question.flags.order_by("resolved_at", "code"),
        "edits": question.edits.select_related("user").order_by("-version", "-id")[:200],
        "proposals": question.step_proposals.all()[:5],
        "can_reassign": has_role(request.user, Role.ADMIN),
        # A released question is corrected on a path of its own (annotation.corrections).
        "released_in": corrections.published_release_of(question),
        "corrections": question.corrections.select_related("opened_by", "fixed_by", "checked_by", "released_in"),
        "may_open_correction": corrections.may_open(request.user),
    }
    return render(request, "annotation/question_detail.html", ctx)


# --- the team -------------------------------------------------------------------


@login_required
def team(request: HttpRequest) -> HttpResponse:
    """Progress per person over every kind of work, for inspectors and admins; admins also reassign."""
    require_role(request.user, Role.INSPECTOR, Role.ADMIN)
    held = Assignment.objects.open().select_related("question", "annotator").order_by("locked_until")[:200]
    ctx = {
        "progress": work.progress_by_person(),
        "overall": work.overall_progress(),
        "held": held,
        "can_reassign": has_role(request.user, Role.ADMIN),
        "annotators": queues.annotators(),
    }
    return render(request, "annotation/team.html", ctx)


@role_required(Role.ADMIN)
@require_POST
def reassign(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = get_object_or_404(Assignment.objects.open(), pk=pk)
    to = get_object_or_404(queues.annotators(), pk=request.POST.get("annotator") or 0)
    queues.reassign(assignment=assignment, to=to)
    messages.success(request, _("%(id)s now goes to %(user)s.") % {"id": assignment.question.hash_id, "user": to})
    return redirect("annotation:team")


# --- imports ----------------------------------------------------------------------

UPLOADERS = (Role.ANNOTATOR, Role.RESEARCHER, Role.ADMIN)


def documents_for(user):
    """Researchers and admins see every import; annotators their own uploads."""
    documents = SourceDocument.objects.select_related("job", "uploaded_by")
    if has_role(user, Role.RESEARCHER) or has_role(user, Role.ADMIN):
        return documents
    return documents.filter(uploaded_by=user)


@login_required
def imports(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *UPLOADERS)
    may_import_files = has_role(request.user, Role.RESEARCHER) or has_role(request.user, Role.ADMIN)
    pdf_form = PdfUploadForm(prefix="pdf")
    file_form = QuestionFileForm(prefix="file")
    if request.method == "POST" and request.POST.get("kind") == "pdf":
        pdf_form = PdfUploadForm(request.POST, request.FILES, prefix="pdf")
        if pdf_form.is_valid():
            started = start_pdf_imports(request, pdf_form)
            if started:
                return (
                    redirect("annotation:import_detail", pk=started[-1].pk)
                    if len(started) == 1
                    else redirect("annotation:imports")
                )
    elif request.method == "POST" and request.POST.get("kind") == "file":
        require_role(request.user, Role.RESEARCHER, Role.ADMIN)
        file_form = QuestionFileForm(request.POST, request.FILES, prefix="file")
        if file_form.is_valid():
            try:
                document = jsonl_import.register_upload(uploaded_file=file_form.cleaned_data["file"], user=request.user)
            except import_files.ImportFileError as exc:
                file_form.add_error("file", str(exc))
            else:
                jsonl_import.start_import(document=document, user=request.user)
                return redirect("annotation:import_detail", pk=document.pk)
    ctx = {
        "pdf_form": pdf_form,
        "file_form": file_form if may_import_files else None,
        "documents": documents_for(request.user)[:50],
    }
    return render(request, "annotation/imports.html", ctx)


def start_pdf_imports(request: HttpRequest, form: PdfUploadForm) -> list[SourceDocument]:
    """Registers and starts each uploaded PDF; a refused file is reported and the others go on."""
    started = []
    for upload in form.cleaned_data["files"]:
        try:
            document = pdf.register_pdf_upload(uploaded_file_or_path=upload, user=request.user)
        except pdf.PdfImportError as exc:
            messages.error(request, str(exc))
            continue
        try:
            pdf.start_pdf_import(document=document, user=request.user, subject=form.cleaned_data["subject"],
                                 grade=form.cleaned_data["grade"],
                                 reader=form.cleaned_data.get("reader") or "unsure")  # fmt: skip
        except pdf.PdfImportError as exc:
            messages.error(request, str(exc))
            continue
        started.append(document)
    return started


@login_required
def import_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    require_role(request.user, *UPLOADERS)
    document = get_object_or_404(documents_for(request.user), pk=pk)
    questions = document.questions.order_by("id").prefetch_related("figures", "flags")[:200]
    ctx = {"document": document, "job": document.job, "questions": questions}
    if request.htmx:
        return render(request, "annotation/import_detail.html#status", ctx)
    return render(request, "annotation/import_detail.html", ctx)


@login_required
@require_POST
def import_retry(request: HttpRequest, pk: int) -> HttpResponse:
    """Runs a stopped PDF import again on the same document: it continues where the last run stopped."""
    require_role(request.user, *UPLOADERS)
    document = get_object_or_404(documents_for(request.user).filter(kind=SourceDocument.Kind.PDF), pk=pk)
    try:
        pdf.retry_pdf_import(document=document, user=request.user)
    except pdf.PdfImportError as exc:
        messages.error(request, str(exc))
    return redirect("annotation:import_detail", pk=document.pk)


@login_required
@require_POST
def export(request: HttpRequest) -> HttpResponse:
    """Starts an export of the filtered questions; the file appears on the job's page."""
    require_role(request.user, Role.RESEARCHER, Role.ADMIN)
    form = QuestionFilterForm(request.POST)
    fmt = request.POST.get("fmt", "reference")
    if not form.is_valid() or fmt not in ("reference", "studio"):
        messages.error(request, _("The export filters are not valid."))
        return redirect("annotation:questions")
    filters = {k: v for k, v in form.cleaned_data.items() if v not in (None, "") and k != "after"}
    job = start_job(kind="annotation.export_questions", user=request.user, params={"filters": filters, "fmt": fmt},
                    title=job_text.title("export_questions", fmt=fmt))  # fmt: skip
    return redirect("k12vista:job_detail", pk=job.pk)


# --- OCR review tools: crop, split, merge ---------------------------------------------


@role_required(Role.ANNOTATOR)
@require_POST
def recrop(request: HttpRequest, pk: int, figure_pk: int) -> HttpResponse:
    assignment = queues.get_assignment_for_user(request.user, pk)
    figure = get_object_or_404(assignment.question.figures, pk=figure_pk)
    try:
        bbox = [float(request.POST[name]) for name in ("x0", "y0", "x1", "y1")]
        services.recrop_figure(figure=figure, bbox=bbox, user=request.user)
    except (KeyError, ValueError) as exc:
        messages.error(request, _("The crop box was not changed: %(reason)s") % {"reason": exc})
    else:
        messages.success(request, _("Figure cropped again."))
    return redirect(work_url(assignment))


@role_required(Role.ANNOTATOR)
@require_POST
def split(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = queues.get_assignment_for_user(request.user, pk)
    try:
        created = services.split_question(question=assignment.question, at=int(request.POST.get("at", "")),
                                          user=request.user)  # fmt: skip
    except ValueError as exc:
        messages.error(request, _("The question was not split: %(reason)s") % {"reason": exc})
    else:
        messages.success(request, _("Split off %(id)s; it waits in the queue.") % {"id": created.hash_id})
    return redirect(work_url(assignment))


@role_required(Role.ANNOTATOR)
@require_POST
def merge_into(request: HttpRequest, pk: int, other_pk: int) -> HttpResponse:
    """Merges a question picked on the page (detected after this one, free) into this one."""
    assignment = queues.get_assignment_for_user(request.user, pk)
    question = assignment.question
    if other_pk not in queues.mergeable_in_document(question):
        messages.error(request, _("That question cannot be merged into this one: it comes before it, belongs to "
                                  "another document, or someone holds it."))  # fmt: skip
        return redirect(work_url(assignment))
    other = Question.objects.get(pk=other_pk)
    services.merge_questions(first=question, second=other, user=request.user)
    messages.success(request, _("Merged %(id)s into this question.") % {"id": other.hash_id})
    return redirect(work_url(assignment))


@role_required(Role.ANNOTATOR)
@require_POST
def merge_next(request: HttpRequest, pk: int) -> HttpResponse:
    """Merges the next question detected in the same document into this one."""
    assignment = queues.get_assignment_for_user(request.user, pk)
    question = assignment.question
    following = queues.next_in_document(question)
    if following is None:
        messages.error(request, _("No following question from the same document is free to merge."))
        return redirect(work_url(assignment))
    services.merge_questions(first=question, second=following, user=request.user)
    messages.success(request, _("Merged %(id)s into this question.") % {"id": following.hash_id})
    return redirect(work_url(assignment))
