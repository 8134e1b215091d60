"""Screens for labelling steps (annotators), adjudication (inspectors) and expert scores.

Every label shown on these pages comes through ``labelling.visible_labels``,
the one statement of the blind rule; the labelling screen itself shows none
but the annotator's own draft.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from inference.models import InferenceRun, Response
from k12vista.htmx import HtmxHttpRequest
from k12vista.roles import Role, require_role, role_required
from k12vista.vocabulary import STEP_LABELS
from pem import labelling, services
from pem.forms import ItemChoiceForm
from pem.models import ChainOfThought, ExpertScore, LabellingTask, StepLabel

EXPERTS = (Role.INSPECTOR, Role.RESEARCHER)
DEFAULT_SAMPLE = 20
MAX_SAMPLE = 500


def figures_of(cot: ChainOfThought) -> list:
    return list(cot.question.figures.all()) if cot.question is not None else []


# --- the annotator's labelling ---------------------------------------------------------


QUEUE_PAGE = 50
WAITING_CAP = 1000
# What the queue's tables show of a task. Plain values, not model instances: the page reads
# none of the chains' texts, and the template renders dicts several times faster than models.
QUEUE_FIELDS = ("id", "created", "submitted", "rework_note", "cot__key")
SAMPLE_ID = 987654321  # any id: queue_rows cuts the rows' links around its link


def open_tasks_page(tasks, after: str) -> tuple[list[dict], str | None]:
    """One keyset page of open tasks (queue_rows) in (created, id) order after the
    cursor ``<created ISO>_<id>``; the cursor of the next page, or None on the last."""
    rows = tasks.open().order_by("created", "id")
    created, _sep, pk = after.rpartition("_")
    try:
        cursor = (datetime.fromisoformat(created), int(pk)) if created else None
    except ValueError:
        cursor = None
    if cursor is not None:
        rows = rows.filter(Q(created__gt=cursor[0]) | Q(created=cursor[0], id__gt=cursor[1]))
    page = list(rows.values(*QUEUE_FIELDS)[: QUEUE_PAGE + 1])
    if len(page) <= QUEUE_PAGE:
        return queue_rows(page), None
    page = page[:QUEUE_PAGE]
    return queue_rows(page), f"{page[-1]['created'].isoformat()}_{page[-1]['id']}"


def queue_rows(rows: list[dict]) -> list[dict]:
    """Each row with its link and its times as text (local time, to the minute). Made here, not
    by {% url %} and |date in the template: on the page's 100 rows those two took most of its
    rendering time (bench/bulk_pages.py)."""
    # One reverse() for all the rows (a reverse per row cost 1 ms on 50): the link of a sample id
    # cut around it.
    before, _sample, after = reverse("pem:label_task", args=[SAMPLE_ID]).rpartition(str(SAMPLE_ID))
    for row in rows:
        row["url"] = f"{before}{row['id']}{after}"
        for name in ("created", "submitted"):
            row[f"{name}_text"] = timezone.localtime(row[name]).strftime("%Y-%m-%d %H:%M") if row[name] else ""
    return rows


@role_required(Role.ANNOTATOR)
def label_queue(request: HttpRequest) -> HttpResponse:
    """The annotator's open tasks a page at a time (?after=), their last
    submissions and how many items wait (counted up to a cap)."""
    tasks = LabellingTask.objects.for_annotator(request.user)
    open_tasks, next_after = open_tasks_page(tasks, request.GET.get("after", ""))
    form = choice_form(request, request.session.get(LABEL_CHOICES))
    waiting = labelling.count_waiting(request.user, WAITING_CAP, form.choices())
    ctx = {
        "choice_form": form,
        "open_tasks": open_tasks,
        "next_query": urlencode({"after": next_after}) if next_after else None,
        "paged": bool(request.GET.get("after")),
        "submitted_tasks": queue_rows(list(tasks.submitted().order_by("-submitted").values(*QUEUE_FIELDS)[:50])),
        "waiting": min(waiting, WAITING_CAP),
        "waiting_capped": waiting > WAITING_CAP,
        "kept_from_me": labelling.count_kept_from(request.user, WAITING_CAP),
    }
    return render(request, "pem/label_queue.html", ctx)


LABEL_CHOICES = "pem_label_choices"  # the session key: what the annotator narrowed the labelling queue to


def choice_form(request: HttpRequest, kept: dict | None) -> ItemChoiceForm:
    """The queue choices in the query (chosen just now), else those kept from before."""
    chosen = any(name in request.GET for name in labelling.ITEM_FILTERS)
    return ItemChoiceForm(request.GET if chosen else kept or None)


@role_required(Role.ANNOTATOR)
@require_POST
def label_next(request: HttpRequest) -> HttpResponse:
    request.session[LABEL_CHOICES] = ItemChoiceForm(request.POST).choices()
    return open_next_task(request)


def open_next_task(request: HttpRequest) -> HttpResponse:
    """The annotator's next item within their queue choices (claimed: called from POSTs only), or the
    queue when none is waiting."""
    choices = request.session.get(LABEL_CHOICES)
    task = labelling.next_task(request.user, choices)
    if task is not None and not ChainOfThought.objects.filter(labelling.item_filter(choices), pk=task.cot_id).exists():
        messages.info(request, _("You still hold %(key)s, which is outside your choices: it opens first, "
                                 "and the items after it follow your choices.") % {"key": task.cot.key})  # fmt: skip
    if task is None:
        if labelling.count_kept_from(request.user, 0):
            messages.info(request, _("No chain of thought you may label is waiting; see below why."))
        else:
            messages.info(request, _("No chain of thought is waiting for labels."))
        return redirect("pem:label_queue")
    return redirect("pem:label_task", pk=task.pk)


def draft_from_post(post, positions: list[int]) -> dict[str, dict[str, str]]:
    return {str(p): {"label": post.get(f"label-{p}", ""), "reason": post.get(f"reason-{p}", "")} for p in positions}


@role_required(Role.ANNOTATOR)
def label_task(request: HttpRequest, pk: int) -> HttpResponse:
    """The labelling screen; a POST saves (action=save) or saves and submits (action=submit)."""
    task = labelling.get_task_for_user(request.user, pk)
    cot = task.cot
    steps = list(cot.steps.all())
    draft, problems, refusal, status = task.draft, {}, None, 200
    if request.method == "POST" and task.submitted is None:
        draft = draft_from_post(request.POST, [s.position for s in steps])
        try:
            task = labelling.save_draft(
                task=task,
                draft=draft,
                expected_version=int(request.POST.get("version", -1)),
                writer=request.POST.get("writer", ""),
                active_seconds=request.POST.get("active_seconds"),
            )
            if request.POST.get("action") == "submit":
                labelling.submit(task)
                messages.success(request, _("Submitted your labels for %(key)s.") % {"key": cot.key})
                return open_next_task(request)
            messages.success(request, _("Saved."))
            return redirect("pem:label_task", pk=task.pk)
        except labelling.DraftConflict as exc:  # the posted labels stay in the form, on the version now saved
            refusal, status, task = str(exc), 409, exc.task
        except labelling.IncompleteLabels as exc:
            refusal, status, problems, draft = str(exc), 400, exc.problems, task.draft
        except (labelling.LabellingError, ValueError) as exc:
            refusal, status = str(exc), 400
    # After submitting, the annotator may compare with the others; before, this is empty (the blind rule).
    others = labels_by_step(labelling.visible_labels(cot, request.user).exclude(user_id=task.annotator_id))
    rows = [
        {"step": s, **(draft.get(str(s.position)) or {}), "problem": problems.get(s.position),
         "others": others.get(s.position, [])}
        for s in steps
    ]  # fmt: skip
    ctx = {"task": task, "cot": cot, "figures": figures_of(cot), "rows": rows, "labels": STEP_LABELS,
           "refusal": refusal}  # fmt: skip
    return render(request, "pem/label_task.html", ctx, status=status)


def labels_by_step(labels) -> dict[int, list[StepLabel]]:
    grouped: dict[int, list[StepLabel]] = {}
    for label in labels.order_by("step__position", "source", "rater"):
        grouped.setdefault(label.step.position, []).append(label)
    return grouped


# --- adjudication ----------------------------------------------------------------------------


@role_required(Role.INSPECTOR)
def adjudication_queue(request: HttpRequest) -> HttpResponse:
    form = choice_form(request, None)
    choices = form.choices()
    items = labelling.adjudication_queue(choices).select_related("adjudication").annotate(n_steps=Count("steps"))
    ctx = {"items": items, "progress": services.status_counts(), "choice_form": form, "query": urlencode(choices)}
    return render(request, "pem/adjudication_queue.html", ctx)


def open_next_adjudication(request: HttpRequest) -> HttpResponse:
    """Submit and next: the next item within the choices the queue was narrowed to (kept in the
    page's query), or the queue when none is left."""
    choices = ItemChoiceForm(request.GET).choices()
    query = f"?{urlencode(choices)}" if choices else ""
    following = labelling.next_to_adjudicate(request.user, choices)
    if following is None:
        messages.info(request, _("No other item is waiting for a decision."))
        return redirect(reverse("pem:adjudication_queue") + query)
    return redirect(reverse("pem:adjudicate", args=[following.pk]) + query)


def adjudication_table(cot: ChainOfThought, labels) -> tuple[list[str], list[str], list[dict]]:
    """Rows per step with every annotator's and every model's label side by side."""
    annotators = [t.annotator.get_username() for t in cot.labelling_tasks.select_related("annotator")]
    cells: dict[tuple[int, str, str], StepLabel] = {}
    judges: list[str] = []
    golds: dict[int, StepLabel] = {}
    for label in labels:
        cells[(label.step.position, label.source, label.rater)] = label
        if label.source == StepLabel.Source.GOLD:
            golds[label.step.position] = label
        if label.source not in (StepLabel.Source.PERSON, StepLabel.Source.GOLD) and label.rater not in judges:
            judges.append(label.rater)
    judge_sources = {rater: source for (_p, source, rater) in cells if rater in judges}
    rows = []
    for step in cot.steps.all():
        people = [cells.get((step.position, StepLabel.Source.PERSON, name)) for name in annotators]
        given = [p for p in people if p is not None]
        agreed = given[0] if given and len({p.label for p in given}) == 1 else None
        gold = golds.get(step.position)
        rows.append({
            "step": step,
            "people": people,
            "judges": [cells.get((step.position, judge_sources[name], name)) for name in judges],
            "agreed": agreed is not None and len(given) == len(annotators),
            "initial": gold or agreed,
        })  # fmt: skip
    return annotators, judges, rows


@role_required(Role.INSPECTOR)
def adjudicate(request: HttpRequest, pk: int) -> HttpResponse:
    cot = get_object_or_404(ChainOfThought, pk=pk)
    problems, status = {}, 200
    if request.method == "POST":
        gold = {p: {"label": request.POST.get(f"gold-{p}", ""), "reason": request.POST.get(f"reason-{p}", "")}
                for p in cot.steps.values_list("position", flat=True)}  # fmt: skip
        try:
            labelling.adjudicate(cot=cot, gold_by_position=gold, by=request.user, note=request.POST.get("note", ""),
                                 active_seconds=request.POST.get("active_seconds"))  # fmt: skip
        except labelling.IncompleteLabels as exc:
            problems, status = exc.problems, 400
            messages.error(request, str(exc))
        except labelling.LabellingError as exc:
            status = 400
            messages.error(request, str(exc))
        else:
            messages.success(request, _("Gold labels set for %(key)s.") % {"key": cot.key})
            return open_next_adjudication(request)
    annotators, judges, rows = adjudication_table(cot, labelling.visible_labels(cot, request.user))
    for row in rows:
        row["problem"] = problems.get(row["step"].position)
        if request.method == "POST":  # keep what the inspector chose
            row["chosen"] = request.POST.get(f"gold-{row['step'].position}", "")
            row["chosen_reason"] = request.POST.get(f"reason-{row['step'].position}", "")
    ctx = {
        "cot": cot,
        "figures": figures_of(cot),
        "annotators": annotators,
        "judges": judges,
        "rows": rows,
        "labels": STEP_LABELS,
        "adjudication": getattr(cot, "adjudication", None),
        "open": cot.status == ChainOfThought.Status.ADJUDICATION,
    }
    return render(request, "pem/adjudicate.html", ctx, status=status)


# --- checking the checkers: expert scores ----------------------------------------------------


@login_required
def expert_runs(request: HttpRequest) -> HttpResponse:
    """Runs whose answers can be scored; the sample is fixed per run, so experts score the same answers."""
    require_role(request.user, *EXPERTS)
    runs = InferenceRun.objects.visible_to(request.user).with_counts()
    # n_ok is annotated by with_counts(), which the stubs' plugin does not follow into the method.
    runs = runs.filter(n_ok__gt=0).select_related("endpoint")  # type: ignore[misc]
    runs = runs[:200]
    return render(request, "pem/expert_runs.html", {"runs": runs, "default_sample": DEFAULT_SAMPLE})


def sample_size(request: HttpRequest, data=None) -> int:
    try:
        return max(1, min(MAX_SAMPLE, int((data or request.GET).get("n", DEFAULT_SAMPLE))))
    except ValueError:
        return DEFAULT_SAMPLE


@login_required
def expert_run(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request.user, *EXPERTS)
    run = get_object_or_404(InferenceRun.objects.visible_to(request.user).select_related("endpoint"), pk=pk)
    sample = labelling.sample_responses(run, sample_size(request))
    found = Response.objects.filter(pk__in=sample.response_ids).select_related("question")
    by_id = {r.pk: r for r in found.prefetch_related("question__figures")}
    scores = labelling.experts_scores(request.user, sample.response_ids)
    rows = [{"response": by_id[i], "score": scores.get(i)} for i in sample.response_ids if i in by_id]
    ctx = {"run": run, "rows": rows, "n": sample.size, "scored": len(scores)}
    return render(request, "pem/expert_run.html", ctx)


@login_required
@require_POST
def expert_score(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    require_role(request.user, *EXPERTS)
    answers = Response.objects.filter(run__in=InferenceRun.objects.visible_to(request.user))
    response = get_object_or_404(answers.select_related("question"), pk=pk, status=Response.Status.OK)
    error: str | None = None
    score: ExpertScore | None = None
    try:
        score = labelling.record_expert_score(
            response=response, expert=request.user, score=request.POST.get("score", ""),
            note=request.POST.get("note", ""),
        )  # fmt: skip
    except labelling.LabellingError as exc:
        error, score = str(exc), labelling.experts_scores(request.user, [response.pk]).get(response.pk)
    if request.htmx:
        row = {"response": response, "score": score, "error": error}
        return render(request, "pem/expert_run.html#row", {"row": row}, status=400 if error else 200)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, _("Score saved."))
    return redirect(f"{reverse('pem:expert_run', args=[response.run_id])}?n={sample_size(request, request.POST)}")
