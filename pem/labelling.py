"""People labelling the steps of chains of thought, adjudication, and expert scores.

The flow for one chain of thought:

1. ``open_labelling`` puts it in the labelling pool (status LABELLING).
2. Annotators pull work with ``next_task``: each item goes to exactly K
   distinct annotators (``settings.PEM_ANNOTATORS_PER_ITEM``). The item's row is
   locked while its tasks are counted, so ten people pressing "next" together
   never take an item past K; the unique (cot, annotator) constraint keeps one
   person from holding it twice.
3. Labels live in the task's draft (autosaved, version-checked) until
   ``submit`` writes them as StepLabel rows. Until then nobody else can see
   them, and the annotator sees nobody else's: ``visible_labels`` is the one
   place that rule lives, and every page and API endpoint that shows labels
   goes through it.
4. When the K-th annotator submits, equal labels on every step become the gold
   labels at once; any difference sends the item to an inspector, whose
   ``adjudicate`` sets the gold labels and records who decided.
5. An audit can ``return_for_rework`` one annotator's labels: the task reopens,
   the gold labels go, and the item is decided again after the resubmission.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, F, Func, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext as _

from inference.models import Response
from k12vista import guidelines

# People who see every label of every item (the annotators see only what visible_labels allows).
from k12vista.roles import READERS_OF_ALL_LABELS as READERS_OF_ALL_LABELS
from k12vista.roles import has_role
from k12vista.vocabulary import LABELS_BY_CODE
from pem import agreement_store
from pem.models import Adjudication, ChainOfThought, ExpertScore, LabellingTask, Step, StepLabel

# Long enough for a careful reason, short enough that a pasted essay is refused.
MAX_REASON_LENGTH = 2000
CONSENSUS = "consensus"


class LabellingError(Exception):
    """A request the labelling flow refuses; the message says why, for people."""


class DraftConflict(LabellingError):
    """The draft was saved elsewhere (another tab) since the version the caller had."""

    def __init__(self, task: LabellingTask):
        self.task = task
        super().__init__(
            _("These labels were saved elsewhere (version %(version)s) since you loaded them; reload to continue.")
            % {"version": task.version}
        )


class IncompleteLabels(LabellingError):
    """Submitted labels with gaps: ``problems`` maps step positions to what is missing."""

    def __init__(self, problems: dict[int, str]):
        self.problems = problems
        steps = ", ".join(str(p) for p in sorted(problems))
        super().__init__(_("Not submitted: these steps still need a label or a reason: %(steps)s.") % {"steps": steps})


def annotators_per_item() -> int:
    return settings.PEM_ANNOTATORS_PER_ITEM


# --- handing out work ---------------------------------------------------------------


def open_labelling(cot: ChainOfThought) -> bool:
    """Puts a new chain of thought in the labelling pool; True if it was new.

    Tasks are not created here: an item is handed out on demand by
    ``next_task``, so that whoever is working takes it, up to K people.
    """
    if not cot.steps.exists():
        raise LabellingError(_("%(key)s has no steps to label.") % {"key": cot.key})
    opened = ChainOfThought.objects.filter(pk=cot.pk, status=ChainOfThought.Status.NEW).update(
        status=ChainOfThought.Status.LABELLING
    )
    cot.refresh_from_db(fields=["status"])
    return bool(opened)


# What a person may narrow the labelling and adjudication queues to (ChainOfThought fields).
ITEM_FILTERS = ("subject", "stage", "qtype")


def item_filter(choices: dict | None) -> Q:
    """The items a person's queue choices allow; unknown keys, empty and non-text values are ignored."""
    choices = choices or {}
    return Q(**{name: choices[name] for name in ITEM_FILTERS if isinstance(choices.get(name), str) and choices[name]})


def waiting_for(annotator: Any, choices: dict | None = None) -> QuerySet[ChainOfThought]:
    """Items in the pool this annotator could take: not theirs yet, fewer than K people on them.

    Items someone already started come first, so items get finished (and
    reach the gold labels) instead of every item being half done. Ordering
    reads the whole pool anyway, and a join grouped by item does that fastest.
    """
    return _waiting(annotator, Count("labelling_tasks"), within=item_filter(choices)).order_by(
        F("n_tasks").desc(), "id"
    )


def count_waiting(annotator: Any, cap: int, choices: dict | None = None) -> int:
    """How many items ``waiting_for`` the annotator holds, counted up to ``cap + 1`` (more than cap).

    People on an item are counted per item here, on the task table's cot index: the count then
    stops at its cap, where a grouped join would group the whole pool first (5,000 waiting
    items: 2 ms against 18 ms)."""
    on_item = Subquery(
        LabellingTask.objects.filter(cot=OuterRef("pk"))
        .order_by()
        .annotate(n=Func(template="COUNT(*)", output_field=IntegerField()))
        .values("n")
    )
    return _waiting(annotator, on_item, within=item_filter(choices)).order_by()[: cap + 1].count()


def _waiting(annotator: Any, n_tasks: Any, *, blind: bool = True, within: Q | None = None) -> QuerySet[ChainOfThought]:
    """The rule of ``waiting_for`` in one place, with people on each item counted by ``n_tasks``
    (``blind=False``: without the blind rule, to tell people what it keeps from them)."""
    theirs = LabellingTask.objects.filter(annotator=annotator).values("cot_id")
    items = ChainOfThought.objects.filter(within or Q(), status=ChainOfThought.Status.LABELLING).exclude(pk__in=theirs)
    if blind and reads_all_labels(annotator):
        # Someone who also reads every label (a researcher, say) may have read this item's
        # labels already; they are handed only items that have none yet (the blind rule).
        items = items.exclude(Exists(StepLabel.objects.filter(step__cot=OuterRef("pk"))))
    return items.alias(n_tasks=n_tasks).filter(n_tasks__lt=annotators_per_item())


def count_kept_from(annotator: Any, cap: int) -> int:
    """How many waiting items the blind rule keeps from this annotator (up to ``cap + 1``): those that already
    have labels, when the person also holds a role that reads every label. The queue says so, so that an
    empty queue after a role change is not a mystery."""
    if not reads_all_labels(annotator):
        return 0
    labelled = Exists(StepLabel.objects.filter(step__cot=OuterRef("pk")))
    on_item = Subquery(
        LabellingTask.objects.filter(cot=OuterRef("pk"))
        .order_by()
        .annotate(n=Func(template="COUNT(*)", output_field=IntegerField()))
        .values("n")
    )
    return _waiting(annotator, on_item, blind=False).filter(labelled).order_by()[: cap + 1].count()


def next_task(annotator: Any, choices: dict | None = None) -> LabellingTask | None:
    """The annotator's open task (work sent back for rework first, whatever the choices: taken work is
    finished first), else a newly claimed item within their queue choices."""
    held = (
        LabellingTask.objects.for_annotator(annotator)
        .open()
        .select_related("cot")
        .order_by(F("rework_note").desc(), "created", "id")
        .first()
    )
    if held is not None:
        return held
    # Each lost race means someone else filled that item, so the loop ends;
    # the bound only guards against a pool that keeps changing under us.
    for _attempt in range(50):
        candidate = waiting_for(annotator, choices).values_list("pk", flat=True).first()
        if candidate is None:
            return None
        task = _claim(cot_pk=candidate, annotator=annotator)
        if task is not None:
            return task
    return None


def _claim(*, cot_pk: int, annotator: Any) -> LabellingTask | None:
    """One slot on the item, or None when the item filled up or left the pool meanwhile."""
    try:
        with transaction.atomic():
            # The row lock makes counting and creating one step: concurrent
            # claims on the same item wait here and then see the new task.
            cot = ChainOfThought.objects.select_for_update().get(pk=cot_pk)
            if cot.status != ChainOfThought.Status.LABELLING:
                return None
            if cot.labelling_tasks.count() >= annotators_per_item():
                return None
            return LabellingTask.objects.create(cot=cot, annotator=annotator)
    except IntegrityError:  # the same person claiming from two tabs at once
        return None


def get_task_for_user(user: Any, pk: int) -> LabellingTask:
    """The user's own task; 404 for anyone else's (labels stay private until submitted)."""
    from django.shortcuts import get_object_or_404

    return get_object_or_404(LabellingTask.objects.for_annotator(user).select_related("cot", "cot__question"), pk=pk)


# --- drafts and submission -------------------------------------------------------------


def clean_draft(cot: ChainOfThought, draft: Any) -> dict[str, dict[str, str]]:
    """The draft in its stored form, {"<position>": {"label", "reason"}}; refuses unknown steps and labels.

    Gaps are allowed in a draft (that is what a draft is); ``submit`` refuses them.
    """
    if not isinstance(draft, dict):
        raise LabellingError(_("The labels must be an object keyed by step number."))
    positions = set(cot.steps.values_list("position", flat=True))
    cleaned: dict[str, dict[str, str]] = {}
    for key, entry in draft.items():
        try:
            position = int(key)
        except (TypeError, ValueError):
            raise LabellingError(_("%(key)r is not a step number.") % {"key": key}) from None
        if position not in positions:
            raise LabellingError(_("This item has no step %(position)s.") % {"position": position})
        if not isinstance(entry, dict):
            raise LabellingError(_("Step %(position)s: expected a label and a reason.") % {"position": position})
        label = entry.get("label") or ""
        reason = entry.get("reason") or ""
        if not isinstance(label, str) or not isinstance(reason, str):
            raise LabellingError(_("Step %(position)s: the label and reason must be text.") % {"position": position})
        if label and label not in LABELS_BY_CODE:
            raise LabellingError(
                _("Step %(position)s: %(label)r is not one of the nine labels.")
                % {"position": position, "label": label}
            )
        if len(reason) > MAX_REASON_LENGTH:
            raise LabellingError(
                _("Step %(position)s: the reason is longer than %(n)s characters.")
                % {"position": position, "n": MAX_REASON_LENGTH}
            )
        if label or reason.strip():
            cleaned[str(position)] = {"label": label, "reason": reason.strip()}
    return cleaned


def save_draft(
    *, task: LabellingTask, draft: Any, expected_version: int, writer: str = "", active_seconds: Any = None
) -> LabellingTask:
    """Saves the labels so far if nobody saved since ``expected_version``; returns the task at its new version.

    The version check and the write are one conditional UPDATE, so of two
    saves from two tabs exactly one wins and the other gets DraftConflict.
    ``writer`` names the browser tab: when the last save came from the same
    tab the draft on screen is that tab's latest, so a stale version is no
    conflict (a save sent just before a reload lands after the page is drawn).
    ``active_seconds`` is the page's active time since its last accepted save; it counts once the save wins.
    """
    cleaned = clean_draft(task.cot, draft)
    writer = writer[:64]
    current = Q(version=expected_version) | Q(writer=writer) if writer else Q(version=expected_version)
    won = LabellingTask.objects.filter(current, pk=task.pk, submitted__isnull=True).update(
        draft=cleaned, version=F("version") + 1, writer=writer
    )
    task.refresh_from_db()
    if not won:
        if task.submitted is not None:
            raise LabellingError(_("These labels were already submitted."))
        raise DraftConflict(task)
    task.add_active_seconds(guidelines.active_seconds(active_seconds))
    return task


def problems_in(cot: ChainOfThought, draft: dict) -> dict[int, str]:
    """What stops a draft from being submitted, by step position."""
    problems = {}
    for position in cot.steps.values_list("position", flat=True):
        entry = draft.get(str(position)) or {}
        label = LABELS_BY_CODE.get(entry.get("label") or "")
        if label is None:
            problems[position] = _("Choose a label.")
        elif label.is_error and not (entry.get("reason") or "").strip():
            problems[position] = _("An error label needs a reason.")
    return problems


def submit(task: LabellingTask, *, active_seconds: Any = None) -> LabellingTask:
    """Turns the saved draft into the annotator's StepLabel rows; decides the item after the K-th submission.

    The item's row is locked first, so when the last two annotators submit at
    the same moment the second one sees the first's labels and decides.
    """
    with transaction.atomic():
        cot = ChainOfThought.objects.select_for_update().get(pk=task.cot_id)
        task = LabellingTask.objects.select_for_update().select_related("annotator").get(pk=task.pk)
        if task.submitted is not None:
            raise LabellingError(_("These labels were already submitted."))
        problems = problems_in(cot, task.draft)
        if problems:
            raise IncompleteLabels(problems)
        annotator = task.annotator
        task.add_active_seconds(guidelines.active_seconds(active_seconds))
        task.guideline_version = guidelines.current_version_name(guidelines.Kind.STEP_LABELS)
        for step in cot.steps.all():
            entry = task.draft[str(step.position)]
            StepLabel.objects.update_or_create(
                step=step,
                source=StepLabel.Source.PERSON,
                rater=annotator.get_username(),
                defaults={
                    "user": annotator,
                    "label": entry["label"],
                    "explanation": entry.get("reason", ""),
                    "guideline_version": task.guideline_version,
                    "active_seconds": task.active_seconds,
                    "created": timezone.now(),
                },
            )
        task.submitted = timezone.now()
        task.rework_note = ""
        task.version += 1
        task.save(update_fields=["submitted", "rework_note", "version", "guideline_version"])
        _decide_if_complete(cot)
    refresh_agreement()
    return task


def refresh_agreement() -> None:
    """Submissions come in storms: the stored agreement report is refreshed at most every
    AGREEMENT_REFRESH_SECONDS (and never twice at once), not once per submission."""
    agreement_store.refresh_quietly(min_age_seconds=settings.AGREEMENT_REFRESH_SECONDS)


def _decide_if_complete(cot: ChainOfThought) -> None:
    """After a submission: consensus gold, or the adjudication queue, once all K have submitted."""
    tasks = list(cot.labelling_tasks.select_related("annotator").order_by("submitted", "id"))
    if len(tasks) < annotators_per_item() or any(t.submitted is None for t in tasks):
        return
    raters = [t.annotator.get_username() for t in tasks]
    by_step: dict[int, list[StepLabel]] = {}
    person_labels = StepLabel.objects.by_people().filter(step__cot=cot, rater__in=raters).select_related("step")
    for label in person_labels:
        by_step.setdefault(label.step_id, []).append(label)
    steps = list(cot.steps.all())
    agreed = all(
        len(by_step.get(step.pk, [])) == len(raters) and len({lab.label for lab in by_step[step.pk]}) == 1
        for step in steps
    )
    StepLabel.objects.gold().filter(step__cot=cot).delete()
    if not agreed:
        adjudication, created = Adjudication.objects.get_or_create(cot=cot)
        if not created and adjudication.decided is not None:  # decided before a rework: decide again
            adjudication.decided = adjudication.decided_by = None
            adjudication.save(update_fields=["decided", "decided_by"])
        cot.status = ChainOfThought.Status.ADJUDICATION
        cot.save(update_fields=["status"])
        return
    order = {name: k for k, name in enumerate(raters)}
    gold = []
    for step in steps:
        labels = sorted(by_step[step.pk], key=lambda lab: order[lab.rater])
        reason = next((lab.explanation for lab in labels if lab.explanation), "")
        gold.append(_gold_label(step, labels[0].label, reason, rater=CONSENSUS, user=None))
    StepLabel.objects.bulk_create(gold)
    # Nothing is left to decide; an adjudication from before a rework no longer says who set the gold.
    Adjudication.objects.filter(cot=cot).delete()
    cot.status = ChainOfThought.Status.GOLD
    cot.save(update_fields=["status"])


def _gold_label(step: Step, label: str, reason: str, *, rater: str, user: Any) -> StepLabel:
    return StepLabel(
        step=step,
        source=StepLabel.Source.GOLD,
        rater=rater,
        user=user,
        label=label,
        explanation=reason,
        guideline_version=guidelines.current_version_name(guidelines.Kind.STEP_LABELS),
    )


# --- adjudication and rework ------------------------------------------------------------


def adjudication_queue(choices: dict | None = None) -> QuerySet[ChainOfThought]:
    return ChainOfThought.objects.filter(item_filter(choices), status=ChainOfThought.Status.ADJUDICATION).order_by("id")


def next_to_adjudicate(inspector: Any, choices: dict | None = None) -> ChainOfThought | None:
    """The first item within the choices this inspector may decide (not one they labelled)."""
    return adjudication_queue(choices).exclude(labelling_tasks__annotator=inspector).first()


def adjudicate(
    *, cot: ChainOfThought, gold_by_position: dict, by: Any, note: str = "", active_seconds: Any = None
) -> Adjudication:
    """Sets the gold label of every step of an item the annotators disagreed on.

    ``gold_by_position`` maps each step position to {"label": code, "reason": text};
    an error label needs a reason, as for annotators. Someone who labelled the
    item cannot decide it.
    """
    with transaction.atomic():
        cot = ChainOfThought.objects.select_for_update().get(pk=cot.pk)
        if cot.status != ChainOfThought.Status.ADJUDICATION:
            raise LabellingError(_("%(key)s is not waiting for adjudication.") % {"key": cot.key})
        if cot.labelling_tasks.filter(annotator=by).exists():
            raise LabellingError(_("You labelled this item yourself; another inspector must decide it."))
        gold = clean_draft(cot, {str(k): v for k, v in gold_by_position.items()})
        problems = problems_in(cot, gold)
        if problems:
            raise IncompleteLabels(problems)
        StepLabel.objects.gold().filter(step__cot=cot).delete()
        StepLabel.objects.bulk_create(
            _gold_label(step, gold[str(step.position)]["label"], gold[str(step.position)]["reason"],
                        rater=by.get_username(), user=by)
            for step in cot.steps.all()
        )  # fmt: skip
        adjudication, _created = Adjudication.objects.get_or_create(cot=cot)
        adjudication.decided = timezone.now()
        adjudication.decided_by = by
        adjudication.note = note.strip()
        adjudication.guideline_version = guidelines.current_version_name(guidelines.Kind.STEP_LABELS)
        adjudication.save()
        adjudication.add_active_seconds(guidelines.active_seconds(active_seconds))
        cot.status = ChainOfThought.Status.GOLD
        cot.save(update_fields=["status"])
    refresh_agreement()
    return adjudication


def return_for_rework(*, cot: ChainOfThought, annotator: Any, note: str, by: Any) -> LabellingTask:
    """Reopens one annotator's submitted labels with the auditor's note; the item's gold goes.

    The annotator's earlier labels stay in the draft to be corrected; when they
    submit again the item is decided as before (consensus or adjudication).
    ``by`` (the auditor) is recorded by the caller's audit, which holds the decision.
    """
    if not note.strip():
        raise LabellingError(_("Say what needs reworking."))
    with transaction.atomic():
        cot = ChainOfThought.objects.select_for_update().get(pk=cot.pk)
        task = LabellingTask.objects.select_for_update().filter(cot=cot, annotator=annotator).first()
        if task is None:
            raise LabellingError(
                _("%(user)s did not label %(key)s.") % {"user": annotator.get_username(), "key": cot.key}
            )
        if task.submitted is None:
            raise LabellingError(_("These labels are not submitted yet."))
        task.submitted = None
        task.rework_note = note.strip()
        task.version += 1
        task.save(update_fields=["submitted", "rework_note", "version"])
        StepLabel.objects.gold().filter(step__cot=cot).delete()
        cot.status = ChainOfThought.Status.LABELLING
        cot.save(update_fields=["status"])
    refresh_agreement()
    return task


# --- who sees which labels ---------------------------------------------------------------


def reads_all_labels(user: Any) -> bool:
    """Holds a role that reads every item's labels (subject to the blind rule on the items they label)."""
    return any(has_role(user, role) for role in READERS_OF_ALL_LABELS)


def may_read_label_files(user: Any) -> bool:
    """Files holding the labels of many items (PEBench exports and imports) cannot be filtered per
    item, so they go only to readers of all labels who hold no unsubmitted labelling task."""
    return reads_all_labels(user) and not LabellingTask.objects.for_annotator(user).open().exists()


def sees_all_labels(cot: ChainOfThought, user: Any) -> bool:
    """The blind rule. Anyone labelling this item who has not submitted sees no label but their own.

    Annotators see everyone's labels on an item only after submitting their
    own; inspectors, researchers and admins see all, unless they hold an open
    task on the item themselves (then they are its annotator first).
    """
    if not (user.is_authenticated and user.is_active):
        return False
    tasks = list(LabellingTask.objects.filter(cot=cot, annotator=user).values_list("submitted", flat=True))
    if any(submitted is None for submitted in tasks):
        return False
    if reads_all_labels(user):
        return True
    return bool(tasks)  # an annotator who submitted on this item


def visible_labels(cot: ChainOfThought, user: Any) -> QuerySet[StepLabel]:
    """The item's StepLabel rows this user may see; every page and endpoint showing labels calls this."""
    labels = StepLabel.objects.filter(step__cot=cot).select_related("step")
    if sees_all_labels(cot, user):
        return labels
    if not (user.is_authenticated and user.is_active):
        return labels.none()
    return labels.filter(source=StepLabel.Source.PERSON, user=user)


# --- checking the checkers: expert scores ----------------------------------------------------


@dataclass(frozen=True)
class Sample:
    run_id: int
    size: int
    response_ids: list[int]


def sample_responses(run: Any, size: int) -> Sample:
    """A fixed random sample of a run's answered responses: seeded by the run, so every
    expert scores the same responses and a larger sample contains the smaller one."""
    ids = list(run.responses.filter(status=Response.Status.OK).order_by("id").values_list("id", flat=True))
    random.Random(f"expert-sample:{run.pk}").shuffle(ids)  # noqa: S311 - a reproducible sample, not a secret
    return Sample(run_id=run.pk, size=size, response_ids=ids[:size])


def record_expert_score(*, response: Any, expert: Any, score: Any, note: str = "") -> ExpertScore:
    """Saves (or replaces) this expert's 0-1 score for a response."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        raise LabellingError(_("The score must be a number from 0 to 1.")) from None
    if not 0 <= value <= 1:  # also refuses NaN
        raise LabellingError(_("The score must be a number from 0 to 1."))
    expert_score, _created = ExpertScore.objects.update_or_create(
        response=response, expert=expert, defaults={"score": value, "note": note.strip(), "created": timezone.now()}
    )
    return expert_score


def experts_scores(expert: Any, response_ids: list[int]) -> dict[int, ExpertScore]:
    return {s.response_id: s for s in ExpertScore.objects.filter(expert=expert, response_id__in=response_ids)}
