"""Correcting a released question, on a path of its own.

Fixing one released question through the audits took a fixed-size audit, rework, a second audit, a
new draw and a new release: about twelve actions across three roles. A correction is four:

1. a researcher or inspector **opens** it on a question of a published release: what is wrong and,
   if they know, the fix (``open_correction``);
2. an annotator **fixes** it: the changed fields, kept on the correction, not yet in the bank
   (``fix_correction``);
3. one inspector, not the one who opened it, **checks** it: accepted, the fix is written to the bank
   as an edit against the version it was made on; or sent back with a note, and the annotator fixes
   it again (``check_correction``);
4. the next release built from a candidate set holding the question **carries** it: the release's
   ``summary["corrections"]`` lists question, field, before, after, who and why (``carry``).

The published release never changes: its items are its snapshot (annotation.releases). Audits stay
for sampling whole lots. Every page, API operation and command calls these functions.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext

from annotation import services
from annotation.models import Correction, Question, Release
from k12vista.roles import Role, has_role
from k12vista.text import unstorable_reason

OPENERS = (Role.RESEARCHER, Role.INSPECTOR)
FIXERS = (Role.ANNOTATOR,)
CHECKERS = (Role.INSPECTOR,)


class CorrectionError(ValueError):
    """The correction cannot be opened, fixed or checked as asked; the message says why."""


# --- who may do what -------------------------------------------------------------------------


def may_open(user: Any) -> bool:
    return any(has_role(user, role) for role in OPENERS)


def is_fixer(user: Any) -> bool:
    return any(has_role(user, role) for role in FIXERS)


def may_fix(user: Any, correction: Correction) -> bool:
    return any(has_role(user, role) for role in FIXERS) and correction.state in (
        Correction.State.OPEN,
        Correction.State.RETURNED,
    )


def may_check(user: Any, correction: Correction) -> bool:
    """One inspector checks: neither the person who opened it nor the one who fixed it."""
    return (
        any(has_role(user, role) for role in CHECKERS)
        and correction.state == Correction.State.FIXED
        and user.pk not in (correction.opened_by_id, correction.fixed_by_id)
    )


def may_read(user: Any) -> bool:
    return any(has_role(user, role) for role in (*OPENERS, *FIXERS, Role.ADMIN))


def waiting_for_fix() -> QuerySet[Correction]:
    return Correction.objects.filter(state__in=[Correction.State.OPEN, Correction.State.RETURNED])


def visible_to(user: Any) -> QuerySet[Correction]:
    """The corrections a person's list shows first: an annotator's to fix, an inspector's to check."""
    found = Correction.objects.select_related("question", "opened_by", "fixed_by", "checked_by", "released_in")
    if has_role(user, Role.ANNOTATOR) and not any(has_role(user, r) for r in (*OPENERS, Role.ADMIN)):
        return found.filter(pk__in=waiting_for_fix().values("pk"))
    return found


# --- the path --------------------------------------------------------------------------------


def published_release_of(question: Question) -> Release | None:
    """The newest published release holding the question."""
    return (
        Release.objects.filter(status=Release.Status.PUBLISHED, items__question=question).order_by("-version").first()
    )


def open_correction(*, question: Question, problem: str, proposal: str = "", by: Any) -> Correction:
    if not may_open(by):
        raise PermissionDenied
    problem, proposal = problem.strip(), proposal.strip()
    unstorable = unstorable_reason([problem, proposal])
    if unstorable:
        raise CorrectionError(unstorable)
    if not problem:
        raise CorrectionError(gettext("say what is wrong with the question"))
    release = published_release_of(question)
    if release is None:
        raise CorrectionError(
            gettext("question %(hash_id)s is in no published release: correct it in the normal work")
            % {"hash_id": question.hash_id}
        )
    try:
        with transaction.atomic():
            return Correction.objects.create(
                question=question, found_in=release, problem=problem, proposal=proposal, opened_by=by
            )
    except IntegrityError:  # the one-open constraint: someone opened one first
        raise CorrectionError(
            gettext("question %(hash_id)s has a correction under way already") % {"hash_id": question.hash_id}
        ) from None


def _locked(correction: Correction) -> Correction:
    return Correction.objects.select_for_update().select_related("question").get(pk=correction.pk)


@transaction.atomic
def fix_correction(*, correction: Correction, changes: dict[str, Any], by: Any) -> Correction:
    """Keeps the annotator's changed fields on the correction (the bank changes only when accepted)."""
    current = _locked(correction)
    if not any(has_role(by, role) for role in FIXERS):
        raise PermissionDenied
    if not may_fix(by, current):
        raise CorrectionError(
            gettext("correction #%(id)s is %(state)s: there is nothing to fix")
            % {"id": current.pk, "state": current.get_state_display()}
        )
    unknown = sorted(set(changes) - set(services.EDITABLE_FIELDS))
    if unknown:
        raise CorrectionError(gettext("these fields cannot be corrected: %(fields)s") % {"fields": ", ".join(unknown)})
    unstorable = unstorable_reason(changes)
    if unstorable:  # PostgreSQL cannot hold it: refused, never cleaned
        raise CorrectionError(unstorable)
    question = current.question
    before = services.content_of(question)
    after = {**before, **changes}
    try:  # the one check of kinds and sizes every path into the bank shares
        services.validate(services.QuestionData(
            hash_id=question.hash_id, knowledge_points=after["knowledge_points"],
            **{k: after[k] for k in Question.CONTENT_FIELDS},
        ))  # fmt: skip
    except services.QuestionDataError as exc:
        raise CorrectionError(str(exc)) from None
    diff = {name: {"before": before[name], "after": after[name]} for name in changes if before[name] != after[name]}
    if not diff:
        raise CorrectionError(gettext("the fix changes nothing"))
    current.changes, current.base_version = diff, question.version
    current.state, current.fixed_by, current.fixed = Correction.State.FIXED, by, timezone.now()
    current.save(update_fields=["changes", "base_version", "state", "fixed_by", "fixed"])
    return current


@transaction.atomic
def check_correction(*, correction: Correction, accept: bool, note: str = "", by: Any) -> Correction:
    """Accepted: the fix is written to the bank. Sent back: the annotator fixes it again."""
    current = _locked(correction)
    if not any(has_role(by, role) for role in CHECKERS):
        raise PermissionDenied
    if current.state != Correction.State.FIXED:
        raise CorrectionError(
            gettext("correction #%(id)s is %(state)s, not waiting for a check")
            % {"id": current.pk, "state": current.get_state_display()}
        )
    if by.pk in (current.opened_by_id, current.fixed_by_id):
        raise CorrectionError(gettext("another inspector checks this correction: you opened or fixed it"))
    note = note.strip()
    unstorable = unstorable_reason([note])
    if unstorable:
        raise CorrectionError(unstorable)
    if accept:
        try:
            services.edit_question(
                question=current.question, changes={k: v["after"] for k, v in current.changes.items()},
                user=current.fixed_by, expected_version=current.base_version or 0,
                note=f"correction #{current.pk}, checked by {by.get_username()}",
            )  # fmt: skip
        except services.EditConflict:
            raise CorrectionError(
                gettext("the question changed since the fix was made: send the correction back")
            ) from None
        except services.QuestionDataError as exc:  # a fix stored before validate() refused its kind
            raise CorrectionError(str(exc)) from None
        current.state = Correction.State.ACCEPTED
    else:
        if not note:
            raise CorrectionError(gettext("say what is still wrong when sending a correction back"))
        current.state = Correction.State.RETURNED
    current.checked_by, current.checked, current.check_note = by, timezone.now(), note
    current.save(update_fields=["state", "checked_by", "checked", "check_note"])
    return current


# --- into the next release -------------------------------------------------------------------


def carry(release: Release) -> list[dict]:
    """Ties the accepted corrections of the release's questions that no published release carries yet to
    this (draft) release and returns its corrections notes: question, field, before, after, who, why."""
    waiting = Correction.objects.filter(
        state=Correction.State.ACCEPTED, question__release_items__release=release
    ).exclude(released_in__status=Release.Status.PUBLISHED)
    Correction.objects.filter(pk__in=list(waiting.values_list("pk", flat=True))).update(released_in=release)
    return notes_of(release.corrections.all())


def notes_of(corrections: QuerySet[Correction]) -> list[dict]:
    rows = []
    found = corrections.select_related("question", "opened_by", "fixed_by", "checked_by").order_by(
        "question__hash_id", "id"
    )
    for correction in found:
        for field_name, change in sorted(correction.changes.items()):
            rows.append({
                "correction": correction.pk, "hash_id": correction.question.hash_id, "field": field_name,
                "before": change["before"], "after": change["after"], "why": correction.problem,
                "opened_by": _name(correction.opened_by), "fixed_by": _name(correction.fixed_by),
                "checked_by": _name(correction.checked_by),
            })  # fmt: skip
    return rows


def _name(user: Any) -> str:
    return user.get_username() if user is not None else ""
