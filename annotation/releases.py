"""Releases: versioned, immutable snapshots of a candidate set whose every
question is audited.

A release is built by a job (``annotation.build_release``): it snapshots each
question (content, content hash, version, provenance) into ``ReleaseItem`` rows
and writes the release files from the same questions (``release_files``), then
checks that no question changed meanwhile (its version). The draft is published
by ``publish_release``: refused if any question changed since the build, else
its questions move to ``released`` and the release is frozen. A later edit of a
released question changes the bank, never the snapshot, so it appears in the
next release; ``compare_releases`` shows what changed between two.

Audit results come from the review app, which this app may not import; the
setting ``RELEASE_AUDIT_SUMMARY`` names the function that reports them (the
same seam as ``OCR_BACKEND``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db.models import F, Prefetch, QuerySet
from django.utils.module_loading import import_string
from django.utils.translation import gettext

from annotation import corrections, release_files, services, statistics
from annotation.job_shapes import ReleaseBuiltQuestions
from annotation.models import (
    CandidateSet,
    CoreUnit,
    Figure,
    Flag,
    KnowledgePoint,
    Question,
    QuestionEdit,
    Release,
    ReleaseItem,
    StepProposal,
)
from k12vista import releases
from k12vista.job_shapes import ReleaseParams
from k12vista.jobs import Progress, job_handler
from k12vista.models import Job
from k12vista.releases import ReleaseError, field_diff

RELEASABLE = (Question.Status.AUDITED, Question.Status.RELEASED)
CHUNK = 500
DEFAULT_LICENCE = "CC-BY-NC-4.0"
AUDIT_NOTE = re.compile(r"audit #(\d+)")


# --- reading the bank ------------------------------------------------------------------


def snapshot_queryset(questions: QuerySet[Question]) -> QuerySet[Question]:
    """Questions with everything a snapshot reads, prefetched (no query per question)."""
    return questions.select_related("source_document", "source_page").prefetch_related(
        "figures__page",
        Prefetch("knowledge_points", queryset=KnowledgePoint.objects.select_related("core_unit")),
        Prefetch(
            "step_proposals",
            queryset=StepProposal.objects.only("question_id", "model_name", "run_ref", "status", "created"),
        ),  # fmt: skip
        Prefetch(
            "flags",
            queryset=Flag.objects.filter(origin=Flag.Origin.MODEL).only(
                "question_id", "code", "run_ref", "resolved_at"
            ),
        ),  # fmt: skip
        Prefetch(
            "edits",
            queryset=QuestionEdit.objects.filter(field="status", new=Question.Status.AUDITED),
            to_attr="audit_moves",
        ),  # fmt: skip
    )


FIGURES_DIR = "releases/figures"


def keep_figure(figure: Figure) -> str:
    """The release's own copy of a figure's bytes as they are now, named by their SHA-256.

    The bank's figure file is not the release's: a recrop writes a new file and
    deletes the old one, so a snapshot naming the bank's file would lose its
    figure. Copies are shared by every release holding the same bytes (a
    hard link where the storage is a local folder, else a copy)."""
    storage = figure.image.storage
    with figure.image.open("rb") as stored:
        data = stored.read()
    digest = hashlib.sha256(data).hexdigest()
    suffix = Path(figure.image.name or "").suffix.lower()
    if not re.fullmatch(r"\.[a-z0-9]{1,5}", suffix):
        suffix = ".bin"
    name = f"{FIGURES_DIR}/{digest[:2]}/{digest}{suffix}"
    if default_storage.exists(name):
        return name
    try:
        source, target = storage.path(figure.image.name or ""), default_storage.path(name)
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        os.link(source, target)
    except FileExistsError:  # another build kept the same bytes meanwhile
        pass
    except (NotImplementedError, OSError):  # no local paths, or another device
        default_storage.save(name, ContentFile(data))
    return name


def content_snapshot(question: Question) -> tuple[dict, str]:
    """The question's content as the release keeps it, and its content hash (the bank's hash)."""
    points = list(question.knowledge_points.all())
    names = sorted(p.name for p in points)
    content = services.content_of(question, names)
    digest = services.hash_content(content)
    content |= {
        "stage": question.stage,
        "core_units": sorted({p.core_unit.name for p in points if p.core_unit is not None}),
        "figures": [keep_figure(f) for f in question.figures.all()],
    }
    return content, digest


def provenance_of(question: Question) -> dict:
    """Where the question came from and what touched it on its way here, as the bank knows it."""
    document = question.source_document
    return {
        "source": question.source,
        "document": {
            "id": document.pk,
            "name": document.original_name,
            "kind": document.kind,
            "sha256": document.sha256,
        }
        if document
        else None,  # fmt: skip
        "page": question.source_page.number if question.source_page is not None else None,
        "bbox": question.bbox,
        "figures": [
            {"position": f.position, "origin": f.origin, "page": f.page.number if f.page else None, "bbox": f.bbox}
            for f in question.figures.all()
        ],  # fmt: skip
        "refinement": {
            "step_proposals": [
                {"model": p.model_name, "run": p.run_ref, "status": p.status} for p in question.step_proposals.all()
            ],  # fmt: skip
            "model_flags": [
                {"code": f.code, "run": f.run_ref, "resolved": f.resolved_at is not None} for f in question.flags.all()
            ],  # fmt: skip
        },
        "audits": [edit.note for edit in question.audit_moves],  # type: ignore[attr-defined]  # a Prefetch to_attr
    }


def audit_ids(items: Iterable[ReleaseItem]) -> list[int]:
    found: set[int] = set()
    for item in items:
        for note in item.provenance.get("audits", []):
            found.update(int(n) for n in AUDIT_NOTE.findall(note))
    return sorted(found)


def audit_summaries(ids: list[int]) -> list[dict]:
    """The audits' results (rates with intervals, decisions) from the function the setting names."""
    name = getattr(settings, "RELEASE_AUDIT_SUMMARY", "")
    return import_string(name)(ids) if name and ids else []


# --- building ------------------------------------------------------------------------------


def not_releasable(candidate_set: CandidateSet) -> QuerySet[Question]:
    return candidate_set.questions.exclude(status__in=RELEASABLE)


def start_release(*, candidate_set: CandidateSet, by: Any, name: str = "", licence: str = DEFAULT_LICENCE) -> Release:
    """Creates the next version as a draft being built and starts the job that builds it."""
    if not candidate_set.questions.exists():
        raise ReleaseError(gettext("the candidate set is empty"))
    waiting = not_releasable(candidate_set).count()
    if waiting:
        raise ReleaseError(gettext("%(n)d questions of the candidate set are not audited yet") % {"n": waiting})
    return releases.start(
        Release, by=by, kind="annotation.build_release", title="build_release", name=name,
        default_name="K12Vista v{version}", candidate_set=candidate_set, licence=licence.strip() or DEFAULT_LICENCE,
    )  # fmt: skip


def snapshot(release: Release, progress: Progress | None = None) -> int:
    """Writes the release's items from its candidate set (again from scratch: a rerun
    of the job gives the same rows)."""
    questions = release.candidate_set.questions.order_by("id") if release.candidate_set else Question.objects.none()
    waiting = questions.exclude(status__in=RELEASABLE).count()
    if waiting:
        raise ReleaseError(gettext("%(n)d questions of the candidate set are not audited") % {"n": waiting})
    total = questions.count()
    release.items.all().delete()
    done = 0
    batch: list[ReleaseItem] = []
    for question in snapshot_queryset(questions).iterator(chunk_size=CHUNK):
        content, digest = content_snapshot(question)
        batch.append(ReleaseItem(release=release, question=question, hash_id=question.hash_id,
                                 version=question.version, content_hash=digest, content=content,
                                 provenance=provenance_of(question)))  # fmt: skip
        if len(batch) >= CHUNK:
            ReleaseItem.objects.bulk_create(batch)
            done += len(batch)
            batch = []
            if progress:
                progress(done, total * 2)
    ReleaseItem.objects.bulk_create(batch)
    return done + len(batch)


def changed_since_snapshot(release: Release) -> QuerySet[ReleaseItem]:
    """Items whose question was saved (or deleted) after the snapshot."""
    return release.items.exclude(question__version=F("version"))


def summarize(release: Release) -> dict:
    """Counts per cell, knowledge-point coverage, models used, audits with their rates."""
    # (subject, grade, type, stage): grade None where the source gave only the stage.
    cells: Counter[tuple[str, int | None, str, str]] = Counter()
    points: set[str] = set()
    units: set[str] = set()
    models: set[str] = set()
    runs: set[str] = set()
    items = list(release.items.only("content", "provenance"))
    for item in items:
        c = item.content
        known = c.get("grade_known", True)
        cells[(c["subject"], c["grade"] if known else None, c["qtype"], "" if known else c.get("stage", ""))] += 1
        points.update(f"{c['subject']}:{name}" for name in c["knowledge_points"])
        units.update(f"{c['subject']}:{name}" for name in c.get("core_units", []))
        for proposal in item.provenance.get("refinement", {}).get("step_proposals", []):
            models.update([proposal["model"]] if proposal["model"] else [])
            runs.update([proposal["run"]] if proposal["run"] else [])
        for flag in item.provenance.get("refinement", {}).get("model_flags", []):
            runs.update([flag["run"]] if flag["run"] else [])
    subjects = {subject for subject, _g, _t, _s in cells}
    return {
        "questions": len(items),
        "cells": [
            {"subject": s, "grade": g, "qtype": t, "count": n, **({"stage": stage} if g is None else {})}
            for (s, g, t, stage), n in sorted(cells.items(), key=lambda c: (c[0][0], c[0][1] or 0, c[0][2:]))
        ],
        "knowledge_points": {
            "covered": len(points),
            "in_bank": KnowledgePoint.objects.filter(subject__in=subjects).count(),
            "core_units_covered": len(units),
            "core_units": CoreUnit.objects.filter(subject__in=subjects).count(),
        },  # fmt: skip
        # The paper's Table 2 for this release, its tokenizer named.
        "statistics": statistics.table_2(item.content for item in items),
        "refinement": {"models": sorted(models), "runs": sorted(runs)},
        "audits": audit_summaries(audit_ids(items)),
        "candidate_set": {
            "id": release.candidate_set_id,
            "seed": release.candidate_set.seed,
            "targets": release.candidate_set.targets,
        }
        if release.candidate_set
        else None,  # fmt: skip
    }


@job_handler("annotation.build_release", queue=Job.Queue.CPU, params=ReleaseParams, result=ReleaseBuiltQuestions)
def build_release_job(job: Job, progress: Progress) -> dict:
    def work(release: Release) -> tuple[dict, dict]:
        count = snapshot(release, progress)
        # The accepted corrections it carries, with their diffs: the release's corrections notes.
        release.summary = {**summarize(release), "corrections": corrections.carry(release)}
        release.save(update_fields=["summary"])
        release_files.write_all(release, progress=lambda done: progress(count + done, count * 2))
        stale = changed_since_snapshot(release).count()
        if stale:
            raise ReleaseError(
                gettext("%(n)d questions changed while the release was built; build it again") % {"n": stale}
            )
        return {"release": release.pk, "version": release.version, "questions": count}, {}

    return releases.build(Release, job, work)


# --- publishing ------------------------------------------------------------------------------


def publish_release(*, release: Release, by: Any) -> Release:
    """Freezes a built draft and moves its questions to ``released``."""

    def unchanged(release: Release) -> None:
        stale = changed_since_snapshot(release).count()
        if stale:
            raise ReleaseError(
                gettext("%(n)d questions changed since this draft was built; build a new release") % {"n": stale}
            )

    def release_questions(release: Release) -> None:
        Question.objects.in_release(release).release(by=by, note=f"release v{release.version}")

    return releases.publish(release, by=by, check=unchanged, then=release_questions)


# --- comparing -------------------------------------------------------------------------------

DIFF_FIELDS = (*services.EDITABLE_FIELDS, "figures")


def compare_releases(old: Release, new: Release) -> dict:
    """Questions added, removed and changed from ``old`` to ``new``, with a diff per changed field.
    The content hash leaves out the figures, so every question in both is read."""

    def changes(a: dict, b: dict) -> list[dict]:
        return [
            {"field": name, "old": a.get(name), "new": b.get(name), "diff": field_diff(a.get(name), b.get(name))}
            for name in DIFF_FIELDS if a.get(name) != b.get(name)
        ]  # fmt: skip

    return releases.compare(old, new, key="hash_id", changes=changes, hash_covers_content=False)
