"""Registers the reference repository's prompts as a prompt set of versioned
PromptTemplate rows, and finds them again for runs of the reference protocol.

A set is named for the reference and its commit ("K12Vista@d83cf2a94ddd"), or
for the content hash of its prompt files where the checkout has no .git. Inside
a set each (kind, question type) is versioned like the studio's own prompts:
registering the same checkout twice adds nothing, and a changed working tree
of the same commit adds a new version. Rows of a set are never
``prompts.current()`` of their kind, so registering changes no studio run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from inference.models import PromptTemplate
from inference.prompts import hash_row
from inference.reference.prompts import QUESTION_TYPES, CheckoutError, ReferencePrompts, read_checkout

__all__ = [
    "CheckoutError", "Registered", "checkout_in_reference_folder", "latest_set", "reference_prompt",
    "register_checkout", "register_prompts",
]  # fmt: skip

Kind = PromptTemplate.Kind
# (family, mode) of the reader -> the studio's prompt kind
KINDS = {
    ("infer", "direct"): Kind.ANSWER_DIRECT,
    ("infer", "step_by_step"): Kind.ANSWER_STEPS,
    ("judge", "direct"): Kind.JUDGE_DIRECT,
    ("judge", "step_by_step"): Kind.JUDGE_STEPS,
}
ZH_TYPE = {code: zh for zh, code in QUESTION_TYPES.items()}


@dataclass(frozen=True)
class Registered:
    set_name: str
    revision: str
    rows: list[PromptTemplate]  # every prompt of the set, as now stored
    created: int  # how many of them are new versions


def entries(found: ReferencePrompts) -> list[tuple[str, str, str]]:
    """(kind, qtype, text) for every prompt of the reference: six answer prompts, six
    judge prompts and the PEBench judge prompt (type-free)."""
    rows = []
    for family, table in (("infer", found.infer), ("judge", found.judge)):
        for mode, by_type in table.items():
            for qtype, text in by_type.items():
                rows.append((KINDS[(family, mode)].value, qtype, text))
    rows.append((Kind.JUDGE_GIVEN_STEPS.value, "", found.pebench))
    return rows


def register_checkout(path: str | Path, *, user: Any = None) -> Registered:
    """Reads the checkout at ``path`` (never importing it) and registers its prompts."""
    return register_prompts(read_checkout(path), user=user)


def checkout_in_reference_folder(text: str) -> Path | None:
    """The checkout folder ``text`` names when it lies inside REFERENCE_CHECKOUTS_DIR (a relative
    name is taken from there), else None. The prompts page reads only there: its messages say
    whether a path exists, and any other path would let a researcher probe the server's files.
    Decided on the normalised text first, so that a path outside is never looked up; then again
    after following links, so that a link inside cannot lead out. (The management command, run
    by an operator on the server, reads any path.)"""
    root = Path(os.path.normpath(Path(settings.REFERENCE_CHECKOUTS_DIR).expanduser().absolute()))
    try:
        if not text.strip():
            return None
        path = Path(os.path.normpath(root / text))  # an absolute ``text`` replaces ``root``
        if not path.is_relative_to(root):
            return None
        return path if path.resolve().is_relative_to(root.resolve()) else None
    except (OSError, ValueError, RuntimeError):  # a name no file system accepts (NUL, too long), a link loop
        return None


@transaction.atomic
def register_prompts(found: ReferencePrompts, *, user: Any = None) -> Registered:
    set_name = found.set_name
    rows, created = [], 0
    for kind, qtype, text in entries(found):
        digest = hash_row(kind=kind, qtype=qtype, system="", user_template=text)
        versions = PromptTemplate.objects.select_for_update().filter(prompt_set=set_name, kind=kind, qtype=qtype)
        latest = versions.order_by("-version").first()
        if latest is not None and latest.content_hash == digest:
            rows.append(latest)
            continue
        version = (versions.aggregate(v=Max("version"))["v"] or 0) + 1
        label = ZH_TYPE.get(qtype, "PEBench")
        rows.append(
            PromptTemplate.objects.create(
                prompt_set=set_name,
                kind=kind,
                qtype=qtype,
                name=f"{set_name} · {Kind(kind).label} · {label}",
                system="",
                user_template=text,
                content_hash=digest,
                version=version,
                created_by=user,
            )  # fmt: skip
        )
        created += 1
    return Registered(set_name=set_name, revision=found.revision, rows=rows, created=created)


def latest_set() -> str:
    """The most recently registered reference set, "" when none is."""
    newest = PromptTemplate.objects.exclude(prompt_set="").order_by("-created", "-id").first()
    return newest.prompt_set if newest else ""


def reference_prompt(kind: str, qtype: str = "", *, prompt_set: str = "") -> PromptTemplate:
    """The newest version of ``kind`` for ``qtype`` (or type-free) in ``prompt_set``, by default
    the most recently registered set; LookupError when none is registered."""
    chosen = prompt_set or latest_set()
    found = (
        PromptTemplate.objects.filter(prompt_set=chosen, kind=kind, qtype__in=[qtype, ""])
        .order_by("-qtype", "-version")
        .first()
        if chosen
        else None
    )
    if found is None:
        raise LookupError(
            f"no reference prompt of kind {kind!r} for {qtype or 'any type'!r}"
            + (f" in {chosen}" if chosen else ": register the reference prompts first (register_reference_prompts)")
        )
    return found


def registered_sets() -> list[dict[str, Any]]:
    """One row per registered set for the prompts page: name, prompts, newest registration."""
    sets: dict[str, dict[str, Any]] = {}
    for row in PromptTemplate.objects.exclude(prompt_set="").order_by("prompt_set", "kind", "qtype", "-version"):
        blank = {"name": row.prompt_set, "prompts": 0, "versions": 0, "created": row.created}
        entry = sets.setdefault(row.prompt_set, blank)
        entry["versions"] += 1
        entry["created"] = max(entry["created"], row.created)
    for name, entry in sets.items():
        entry["prompts"] = PromptTemplate.objects.filter(prompt_set=name).values("kind", "qtype").distinct().count()
    return sorted(sets.values(), key=lambda entry: entry["created"], reverse=True)
