"""Stratified benchmark sampling (paper, stage 3): from the valid questions of
the bank, a candidate set with a target per subject-grade-type cell and every
core knowledge unit covered at least once.

The draw is reproducible: each cell is shuffled by a generator seeded with the
seed and the cell's key, from the cell's ids in id order; the coverage picks
follow in the units' order with their own seeded generators. So the same seed
and the same bank (the fingerprint records it) give the same set, and one
cell's draw does not depend on the others.

Rejected questions are never eligible; the difficulty filters remove questions
by rejecting them (``inference.difficulty.confirm_filters``), so their removals are
excluded with them.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils.translation import gettext

from annotation.job_shapes import DrawParams, DrawResult
from annotation.models import CandidateSet, KnowledgePoint, Question
from k12vista import job_text
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.models import Job
from k12vista.text import storable
from k12vista.vocabulary import GRADES, QuestionType, Subject

DEFAULT_PER_CELL = 1000  # the paper's "at least 1,000 per subject-grade-type cell where the bank allows"
ELIGIBLE = (Question.Status.SOLUTION_CORRECTED, Question.Status.AUDITED, Question.Status.RELEASED)


class DrawError(ValueError):
    """Targets the draw cannot use; the message says which."""


@dataclass
class Targets:
    per_cell: int = DEFAULT_PER_CELL
    cover_knowledge: bool = True
    subjects: list[str] = field(default_factory=list)  # empty: every subject
    # "subject/grade/qtype" -> a target of its own
    cells: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> Targets:
        """Targets from a form, the API or a job's parameters; refuses what it cannot mean."""
        if not isinstance(data, dict):
            raise DrawError(gettext("targets must be an object"))
        try:
            per_cell = int(data.get("per_cell", DEFAULT_PER_CELL))
            cells = {str(k): int(v) for k, v in (data.get("cells") or {}).items()}
        except (TypeError, ValueError, AttributeError):
            raise DrawError(gettext("targets must be whole numbers")) from None
        if per_cell < 0 or any(v < 0 for v in cells.values()):
            raise DrawError(gettext("a target cannot be negative"))
        malformed = sorted(key for key in cells if not well_formed_cell(key))
        if malformed:
            # The draw job splits each key (cell_row): a malformed one crashed it after it was queued.
            raise DrawError(gettext("unknown cells (subject/grade/type, such as math/7/multiple_choice): %(cells)s")
                            % {"cells": ", ".join(storable(key)[:50] for key in malformed[:10])})  # fmt: skip
        subjects = [s for s in (data.get("subjects") or []) if s]
        unknown = set(subjects) - set(Subject.values)
        if unknown:
            raise DrawError(gettext("unknown subjects: %(subjects)s") % {"subjects": ", ".join(sorted(unknown))})
        return cls(per_cell=per_cell, cover_knowledge=bool(data.get("cover_knowledge", True)), subjects=subjects,
                   cells=cells)  # fmt: skip

    def as_dict(self) -> dict:
        return asdict(self)

    def target(self, key: str) -> int:
        return self.cells.get(key, self.per_cell)


def cell_key(subject: str, grade: int, qtype: str) -> str:
    return f"{subject}/{grade}/{qtype}"


def well_formed_cell(key: str) -> bool:
    """Whether ``key`` names a cell as cell_key writes it: a known subject, grade and type."""
    parts = key.split("/")
    if len(parts) != 3:
        return False
    subject, grade, qtype = parts
    return subject in Subject.values and grade in {str(g) for g in GRADES} and qtype in QuestionType.values


def eligible(targets: Targets):
    questions = Question.objects.filter(status__in=ELIGIBLE)
    return questions.filter(subject__in=targets.subjects) if targets.subjects else questions


def unit_key(point_id: int, unit_id: int | None) -> str:
    # A point not yet in a core unit counts as a unit of its own.
    return f"u{unit_id}" if unit_id else f"p{point_id}"


# --- preview --------------------------------------------------------------------------------


def cell_row(key: str, available: int, target: int) -> dict:
    subject, grade, qtype = key.split("/")
    allocated = min(target, available)
    shortfall = target - allocated
    note = f"the bank has {available} eligible questions here, {shortfall} short of the target" if shortfall else ""
    return {"cell": key, "subject": subject, "grade": int(grade), "qtype": qtype, "available": available,
            "target": target, "allocated": allocated, "shortfall": shortfall, "note": note}  # fmt: skip


def preview(targets: Targets) -> dict:
    """The allocation per cell and its shortfalls, counted by the database (no ids read)."""
    counts = eligible(targets).values("subject", "grade", "qtype").annotate(n=Count("id")).order_by()
    available = {cell_key(r["subject"], r["grade"], r["qtype"]): r["n"] for r in counts}
    keys = sorted(set(available) | set(targets.cells))
    cells = [cell_row(key, available.get(key, 0), targets.target(key)) for key in keys]
    units = reachable_units(targets) if targets.cover_knowledge else 0
    return {
        "cells": cells, "available": sum(available.values()), "allocated": sum(c["allocated"] for c in cells),
        "shortfall": sum(c["shortfall"] for c in cells), "short_cells": sum(1 for c in cells if c["shortfall"]),
        "units_reachable": units,
    }  # fmt: skip


def reachable_units(targets: Targets) -> int:
    points = KnowledgePoint.objects.filter(questions__in=eligible(targets)).values_list("id", "core_unit_id")
    return len({unit_key(p, u) for p, u in points.distinct()})


# --- the draw -------------------------------------------------------------------------------


def bank_rows(targets: Targets) -> tuple[list[tuple[int, str]], dict[int, set[str]], str]:
    """(id, cell) of every eligible question in id order, their units, and the bank's fingerprint."""
    rows = [(pk, cell_key(s, g, t)) for pk, s, g, t in
            eligible(targets).order_by("id").values_list("id", "subject", "grade", "qtype")]  # fmt: skip
    digest = hashlib.sha256()
    for pk, key in rows:
        digest.update(f"{pk}:{key};".encode())
    units: dict[int, set[str]] = defaultdict(set)
    if targets.cover_knowledge:
        through = Question.knowledge_points.through.objects.filter(question__in=eligible(targets))
        pairs = through.order_by("question_id", "knowledgepoint_id").values_list(
            "question_id", "knowledgepoint_id", "knowledgepoint__core_unit_id"
        )
        for question_id, point_id, unit_id in pairs:
            units[question_id].add(unit_key(point_id, unit_id))
            digest.update(f"{question_id}>{unit_key(point_id, unit_id)};".encode())
    return rows, units, digest.hexdigest()


def draw(targets: Targets, seed: int) -> tuple[list[int], dict, str]:
    """The candidate set's ids, the per-cell report and the bank's fingerprint."""
    rows, units, fingerprint = bank_rows(targets)
    by_cell: dict[str, list[int]] = defaultdict(list)
    for pk, key in rows:
        by_cell[key].append(pk)
    for key in targets.cells:
        by_cell.setdefault(key, [])
    chosen: set[int] = set()
    cells = {}
    for key in sorted(by_cell):
        ids = list(by_cell[key])
        random.Random(f"{seed}:{key}").shuffle(ids)  # noqa: S311 - reproducible, not secret
        row = cell_row(key, len(ids), targets.target(key))
        chosen.update(ids[: row["allocated"]])
        cells[key] = {**row, "drawn": row["allocated"], "for_coverage": 0}
    coverage = {"units": 0, "covered_by_targets": 0, "added_for_coverage": 0}
    if targets.cover_knowledge:
        cell_of = dict(rows)
        holders: dict[str, list[int]] = defaultdict(list)
        for pk, found in units.items():
            for unit in found:
                holders[unit].append(pk)
        covered = {u for pk in chosen for u in units.get(pk, ())}
        coverage["units"], coverage["covered_by_targets"] = len(holders), len(covered)
        for unit in sorted(holders):
            if unit in covered:
                continue
            pick = random.Random(f"{seed}:unit:{unit}").choice(sorted(holders[unit]))  # noqa: S311
            chosen.add(pick)
            covered |= units[pick]
            cells[cell_of[pick]]["drawn"] += 1
            cells[cell_of[pick]]["for_coverage"] += 1
            coverage["added_for_coverage"] += 1
        coverage["covered"] = len(covered)
    report = {"cells": list(cells.values()), "total": len(chosen), "coverage": coverage,
              "short_cells": sum(1 for c in cells.values() if c["shortfall"])}  # fmt: skip
    return sorted(chosen), report, fingerprint


def new_seed() -> int:
    return secrets.randbelow(2**31)


def check_draws_something(targets: Targets) -> None:
    """DrawError when the draw would take no question (issue 29): the bank has none eligible
    (in the chosen subjects), or every target is 0 and no knowledge unit is to be covered."""
    allocation = preview(targets)
    if allocation["allocated"] or allocation["units_reachable"]:
        return
    if not allocation["available"]:
        subjects = ", ".join(targets.subjects) or gettext("any subject")
        raise DrawError(
            gettext("the bank has no eligible question (solution corrected, audited or released) in %(subjects)s: "
                    "the draw would take none") % {"subjects": subjects}
        )  # fmt: skip
    raise DrawError(gettext("every target is 0 and no knowledge unit is to be covered: the draw would take none"))


def start_draw(*, targets: Targets, by: Any, name: str = "", seed: int | None = None) -> CandidateSet:
    """Records the draw (targets, seed) and starts the job that fills it; DrawError, before
    anything is saved, when it would take no question."""
    check_draws_something(targets)
    seed = new_seed() if seed is None else seed
    with transaction.atomic():
        name = name.strip() or gettext("Draw with seed %(seed)s") % {"seed": seed}
        candidate = CandidateSet.objects.create(name=name, targets=targets.as_dict(),
                                                seed=seed, bank_fingerprint="", created_by=by)  # fmt: skip
        candidate.job = start_job(kind="annotation.draw_candidates", user=by, params={"candidate_set": candidate.pk},
                                  title=job_text.title("draw", name=candidate.name))  # fmt: skip
        candidate.save(update_fields=["job"])
    return candidate


def fill(candidate: CandidateSet, progress: Progress | None = None) -> CandidateSet:
    """Draws the set and stores it (from scratch, so a rerun gives the same rows)."""
    targets = Targets.from_dict(candidate.targets)
    if progress:
        progress(0, 2)
    ids, report, fingerprint = draw(targets, candidate.seed)
    if progress:
        progress(1, 2)
    through = CandidateSet.questions.through
    with transaction.atomic():
        through.objects.filter(candidateset=candidate).delete()
        through.objects.bulk_create((through(candidateset=candidate, question_id=pk) for pk in ids), batch_size=5000)
        CandidateSet.objects.filter(pk=candidate.pk).update(report=report, bank_fingerprint=fingerprint)
    candidate.refresh_from_db()
    return candidate


@job_handler("annotation.draw_candidates", queue=Job.Queue.CPU, params=DrawParams, result=DrawResult)
def draw_job(job: Job, progress: Progress) -> dict:
    candidate = fill(CandidateSet.objects.get(pk=job.params["candidate_set"]), progress)
    return {"candidate_set": candidate.pk, "questions": candidate.report["total"],
            "short_cells": candidate.report["short_cells"]}  # fmt: skip
