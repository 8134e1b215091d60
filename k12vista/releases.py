"""One release life cycle for every kind of release (the benchmark's, ``annotation.releases``,
and PEBench's, ``pem.releases``): each app adds only what its release holds.

A release is a numbered version: ``start`` takes the next number and starts the job that
builds it (status ``building``); the job (``build``) writes the app's snapshot and its
checksummed files (``checksummed``) and leaves a ``draft``, or ``failed`` with the reason;
``publish`` freezes a finished draft once the app's own check passes (nothing changed since
the build). A published release never changes: the model refuses to save it again
(``ReleaseBase.save``) and a late build job leaves it alone. ``compare`` lists the items
added, removed and changed between two releases, the app saying what changed in an item.
"""

from __future__ import annotations

import difflib
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from k12vista import job_text
from k12vista.files import sha256_of
from k12vista.jobs import start_job
from k12vista.models import Job, JobAndCreator


class ReleaseError(ValueError):
    """The release cannot be built, published or compared as asked; the message says why."""


class ReleaseBase(JobAndCreator):
    """What every release is: a version, a name, where it is in its life cycle, what it
    summarises, the studio commit and job that built it, who published it and when."""

    class Status(models.TextChoices):
        BUILDING = "building", _("Building")
        DRAFT = "draft", _("Draft")
        PUBLISHED = "published", _("Published")
        FAILED = "failed", _("Failed")

    version = models.PositiveIntegerField(unique=True)
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.BUILDING)
    error = models.TextField(blank=True)
    studio_commit = models.CharField(max_length=64, blank=True)
    summary = models.JSONField(default=dict)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published = models.DateTimeField(null=True, blank=True)

    objects: ClassVar[models.Manager[Self]]  # each release model's own (Django adds it to the concrete ones)

    class Meta:
        abstract = True
        ordering = ["-version"]

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Immutability: a row stored as published is never written again (publishing itself saves a draft).
        if self.pk is not None and type(self).objects.filter(pk=self.pk, status=self.Status.PUBLISHED).exists():
            raise ReleaseError(gettext("%(release)s is published and never changes") % {"release": self.label()})
        super().save(*args, **kwargs)

    def label(self) -> str:
        """The release as messages name it ("release v3", "PEBench v3")."""
        raise NotImplementedError

    def files_written(self) -> bool:
        """Whether the build recorded every file the release is published with."""
        raise NotImplementedError


def studio_commit() -> str:
    """The studio's commit: the ``STUDIO_COMMIT`` setting (set by deployments), else git."""
    if getattr(settings, "STUDIO_COMMIT", ""):
        return settings.STUDIO_COMMIT
    try:
        found = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=5, check=False
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return found.stdout.strip() if found.returncode == 0 else ""


def checksummed(path: Path) -> dict:
    """A written release file as the release records it: its name under MEDIA_ROOT, SHA-256 and size."""
    return {"path": path.relative_to(settings.MEDIA_ROOT).as_posix(), "sha256": sha256_of(path),
            "size": path.stat().st_size}  # fmt: skip


# --- the life cycle ----------------------------------------------------------------------------


def start[R: ReleaseBase](
    model: type[R], *, by: Any, kind: str, title: str, name: str, default_name: str, **fields: Any
) -> R:
    """Creates the next version (``building``) and starts the job ``kind`` that builds it.
    ``default_name`` and the job text ``title`` may name the ``version``."""
    for _attempt in range(3):
        try:
            with transaction.atomic():
                version = (model.objects.aggregate(v=Max("version"))["v"] or 0) + 1
                release = model.objects.create(
                    version=version, name=name.strip() or default_name.format(version=version),
                    studio_commit=studio_commit(), created_by=by, **fields,
                )  # fmt: skip
                release.job = start_job(kind=kind, user=by, params={"release": release.pk},
                                        title=job_text.title(title, version=version))  # fmt: skip
                release.save(update_fields=["job"])
                return release
        except IntegrityError:
            continue  # someone took the version number at the same moment
    raise ReleaseError(gettext("could not take a version number; try again"))


def build[R: ReleaseBase](model: type[R], job: Job, work: Callable[[R], tuple[dict, dict]]) -> dict:
    """The build job's frame: ``work`` writes the release's snapshot and files and returns the job's
    result and the fields to store with the draft; a ``ReleaseError`` leaves it ``failed``."""
    release = model.objects.get(pk=job.params["release"])
    if release.status == model.Status.PUBLISHED:
        return {"release": release.pk, "published": True}  # a late re-delivery: nothing to redo
    try:
        result, fields = work(release)
    except ReleaseError as exc:
        model.objects.filter(pk=release.pk).update(status=model.Status.FAILED, error=str(exc))
        raise
    model.objects.filter(pk=release.pk).update(status=model.Status.DRAFT, error="", **fields)
    return result


@transaction.atomic
def publish[R: ReleaseBase](
    release: R, *, by: Any, check: Callable[[R], None], then: Callable[[R], None] | None = None
) -> R:
    """Freezes a built draft: ``check`` raises ``ReleaseError`` where it may not be published (its
    sources changed since the build); ``then`` does what publishing means to the app."""
    release = type(release).objects.select_for_update().get(pk=release.pk)
    if release.status == release.Status.PUBLISHED:
        raise ReleaseError(gettext("%(release)s is published already") % {"release": release.label()})
    if release.status != release.Status.DRAFT:
        raise ReleaseError(
            gettext("%(release)s is %(status)s, not a built draft")
            % {"release": release.label(), "status": release.get_status_display()}  # type: ignore[attr-defined]
        )
    if not release.files_written():
        raise ReleaseError(gettext("the release files are not all written"))
    check(release)
    if then is not None:
        then(release)
    release.status = release.Status.PUBLISHED
    release.published, release.published_by = timezone.now(), by
    release.save(update_fields=["status", "published", "published_by"])
    return release


# --- comparing ---------------------------------------------------------------------------------


def field_diff(old: Any, new: Any) -> list[str]:
    """A line diff of two values (text as lines, lists one element per line)."""

    def lines(value: Any) -> list[str]:
        if isinstance(value, str):
            return value.splitlines() or [""]
        if isinstance(value, list):
            return [v if isinstance(v, str) else str(v) for v in value]
        return [str(value)]

    return list(difflib.unified_diff(lines(old), lines(new), "before", "after", lineterm="", n=1))[2:]


def compare(
    old: ReleaseBase, new: ReleaseBase, *, key: str, changes: Callable[[dict, dict], list[dict]],
    hash_covers_content: bool = True,
) -> dict:  # fmt: skip
    """Items (named by the item field ``key``) added, removed and changed from ``old`` to ``new``.
    ``changes`` lists what differs between two contents, a field at a time. Where the content hash
    covers all of the content only items whose hash differs are read; an item whose hash differs
    is changed even when ``changes`` names nothing."""
    before = dict(old.items.values_list(key, "content_hash"))  # type: ignore[attr-defined]
    after = dict(new.items.values_list(key, "content_hash"))  # type: ignore[attr-defined]
    common = set(before) & set(after)
    read = {k for k in common if before[k] != after[k]} if hash_covers_content else common

    def contents(release: ReleaseBase) -> dict:
        items = release.items.only(key, "content")  # type: ignore[attr-defined]
        if hash_covers_content:
            items = items.filter(**{f"{key}__in": read})
        return {getattr(i, key): i.content for i in items}

    was, now = (contents(old), contents(new)) if read else ({}, {})
    changed = []
    for k in sorted(read):
        fields = changes(was[k], now[k])
        if fields or before[k] != after[k]:
            changed.append({key: k, "fields": fields})
    return {"old": old.version, "new": new.version, "added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)), "changed": changed}  # fmt: skip
