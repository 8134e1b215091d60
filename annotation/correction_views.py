"""The pages of a correction of a released question (annotation.corrections): opening one from the
question's page, the list (an annotator's to fix, an inspector's to check), the correction's page with
the fix and the check, and a release's corrections file."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from annotation import corrections
from annotation.benchmark_views import RESEARCHERS, get_release_for_user
from annotation.forms import FixForm
from annotation.models import Correction, Question
from k12vista.roles import role_required


def form_values(question: Question | Any) -> dict[str, str]:
    return {
        "text": question.text,
        "options": "\n".join(f"{o['label']}. {o['text']}" for o in question.options),
        "answers": "\n".join(question.answers),
        "raw_solution": question.raw_solution,
        "solution_steps": "\n".join(question.solution_steps),
    }


def changes_from(post: Any, question: Question) -> dict[str, Any]:
    """The fields whose box differs from the question as shown, read by the question editor's form.
    Raises CorrectionError naming a box the form cannot read (a line that is no option is refused,
    never merged or dropped)."""
    shown = form_values(question)
    edited = [name for name in FixForm.FIELDS if name in post and post.get(name, "").strip() != shown[name].strip()]
    form = FixForm(post)
    form.is_valid()
    refused = [str(error) for name in edited for error in form.errors.get(name, [])]
    if refused:
        raise corrections.CorrectionError(" ".join(refused))
    return {name: form.cleaned_data[name] for name in edited}


@login_required
@require_POST
def open_correction(request: HttpRequest, hash_id: str) -> HttpResponse:
    if not corrections.may_open(request.user):
        raise PermissionDenied
    question = get_object_or_404(Question, hash_id=hash_id)
    try:
        correction = corrections.open_correction(
            question=question,
            problem=request.POST.get("problem", ""),
            proposal=request.POST.get("proposal", ""),
            by=request.user,
        )
    except corrections.CorrectionError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:question_detail", hash_id=question.hash_id)
    messages.success(request, _("Correction #%(id)s opened: an annotator fixes it next.") % {"id": correction.pk})
    return redirect("annotation:correction", pk=correction.pk)


@login_required
@require_GET
def correction_list(request: HttpRequest) -> HttpResponse:
    if not corrections.may_read(request.user):
        raise PermissionDenied
    found = corrections.visible_to(request.user)
    state = request.GET.get("state", "")
    if state in Correction.State.values:
        found = found.filter(state=state)
    ctx = {"corrections": found[:500], "states": Correction.State.choices, "state": state}
    return render(request, "annotation/corrections.html", ctx)


@login_required
@require_GET
def correction_detail(request: HttpRequest, pk: int) -> HttpResponse:
    if not corrections.may_read(request.user):
        raise PermissionDenied
    correction = get_object_or_404(Correction.objects.select_related("question", "found_in", "released_in"), pk=pk)
    question = correction.question
    ctx = {
        "correction": correction, "question": question, "values": form_values(question),
        "may_fix": corrections.may_fix(request.user, correction),
        "may_check": corrections.may_check(request.user, correction),
    }  # fmt: skip
    return render(request, "annotation/correction.html", ctx)


@login_required
@require_POST
def correction_fix(request: HttpRequest, pk: int) -> HttpResponse:
    if not corrections.is_fixer(request.user):
        raise PermissionDenied
    correction = get_object_or_404(Correction.objects.select_related("question"), pk=pk)
    try:
        changes = changes_from(request.POST, correction.question)
        corrections.fix_correction(correction=correction, changes=changes, by=request.user)
    except corrections.CorrectionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Fix saved: an inspector checks it next."))
    return redirect("annotation:correction", pk=correction.pk)


@login_required
@require_POST
def correction_check(request: HttpRequest, pk: int) -> HttpResponse:
    correction = get_object_or_404(Correction, pk=pk)
    decision = request.POST.get("decision", "")
    if decision not in ("accept", "return"):
        messages.error(request, _("Choose to accept the fix or to send it back."))
        return redirect("annotation:correction", pk=correction.pk)
    try:
        corrections.check_correction(correction=correction, accept=decision == "accept",
                                     note=request.POST.get("note", ""), by=request.user)  # fmt: skip
    except corrections.CorrectionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Accepted: the next release carries the fix.") if decision == "accept"
                         else _("Sent back to the annotators."))  # fmt: skip
    return redirect("annotation:correction", pk=correction.pk)


@role_required(*RESEARCHERS)
@require_GET
def release_corrections(request: HttpRequest, version: int) -> HttpResponse:
    """The release's corrections file: question, field, before, after, who and why, as JSON."""
    release = get_release_for_user(request.user, version)
    body = json.dumps({"release": release.version, "corrections": release.summary.get("corrections", [])},
                      ensure_ascii=False, indent=1)  # fmt: skip
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="corrections-v{release.version}.json"'
    return response
