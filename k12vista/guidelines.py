"""The guidelines shown beside each task: reading the current version, publishing a new one,
and reading the active time a page sent with a save."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from k12vista.models import MAX_ACTIVE_SECONDS, Guideline

Kind = Guideline.Kind


def current(kind: str) -> Guideline | None:
    return Guideline.objects.of_kind(kind).first()


def current_version_name(kind: str) -> str:
    """The version a label made now is made under; before any step-labelling guideline was
    written in the studio, the one the settings name."""
    guideline = current(kind)
    if guideline is not None:
        return guideline.version_name
    return settings.PEM_GUIDELINE_VERSION if kind == Kind.STEP_LABELS else ""


def publish(*, kind: str, text: str, by: Any) -> Guideline:
    """Saves an edit as the next version; the same text again makes no new version."""
    text = text.replace("\r\n", "\n").strip()
    latest = current(kind)
    if latest is not None and latest.text == text:
        return latest
    for _attempt in range(3):  # two admins saving at once: the loser takes the next number
        version = (Guideline.objects.filter(kind=kind).aggregate(v=Max("version"))["v"] or 0) + 1
        try:
            with transaction.atomic():
                return Guideline.objects.create(kind=kind, version=version, text=text, updated_by=by)
        except IntegrityError:
            continue
    raise IntegrityError("guideline version taken three times in a row")


def active_seconds(value: Any) -> int | None:
    """The active seconds a page sent, as stored: a whole number clamped to [0, MAX_ACTIVE_SECONDS];
    None when nothing usable was sent (an old page, a script, garbage)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if seconds != seconds:  # NaN
        return None
    return int(min(max(seconds, 0), MAX_ACTIVE_SECONDS))
