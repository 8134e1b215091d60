"""Audit operations: drawing the sample, rating it, sending failed items back
and re-auditing them. Screens, the API and the demo loader all call these.

Sampling. The population is split into strata (subject by default); each
stratum is drawn on its own with a generator seeded by the audit's seed and
the stratum's key, from the stratum's ids in id order. So the same audit
(same population, strata, sizes and seed) draws the same sample again, and
one stratum's draw does not depend on the others.

With an acceptance sampling plan each stratum is a lot: its sample size and
its accept and reject numbers come from the plan for that stratum's size
(ISO 2859-1, normal inspection, level II), and the report decides each
stratum with those numbers; the audit is accepted when every stratum is.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from django.utils.translation import gettext

from annotation import services as bank
from annotation.models import Assignment, Question, QuestionEdit
from k12vista import guidelines, job_text
from k12vista.jobs import start_job
from k12vista.models import Job
from k12vista.vocabulary import QuestionType, Subject
from pem import labelling
from pem.models import ChainOfThought, LabellingTask
from review import sampling
from review.models import DIMENSIONS, STAGE_OF_DIMENSION, Audit, AuditItem, Kind, Rating, Rework, Stage

NO_ANNOTATOR = "—"  # the stratum of items with no value (nobody recorded as having worked on them)
# The status change each question stage records (Question.TRANSITIONS: a step's history row has its name as the note).
STAGE_ACTION = {Stage.OCR_REVIEW: "accept_ocr", Stage.STEP_CORRECTION: "submit_steps"}


class AuditError(ValueError):
    """The audit cannot be created or changed as asked; the message says why."""


# --- the population -------------------------------------------------------------


def population_queryset(population: dict):
    """The questions or chains of thought an audit samples from, as they are now."""
    kind = population.get("kind")
    if kind == Audit.Population.STATUS:
        if population.get("status") not in Question.Status.values:
            raise AuditError(gettext("choose the lifecycle status to sample from"))
        return Question.objects.filter(status=population["status"])
    if kind == Audit.Population.BATCH:
        hash_ids = [h for h in population.get("hash_ids", []) if h]
        if not hash_ids:
            raise AuditError(gettext("list the hash ids of the questions in the batch"))
        return Question.objects.filter(hash_id__in=hash_ids)
    if kind == Audit.Population.IMPORT:
        if not population.get("source_document"):
            raise AuditError(gettext("choose the import to sample from"))
        return Question.objects.filter(source_document_id=population["source_document"])
    if kind == Audit.Population.CANDIDATE_SET:
        if not population.get("candidate_set"):
            raise AuditError(gettext("choose the candidate set to audit"))
        return Question.objects.filter(candidate_sets=population["candidate_set"])
    if kind == Audit.Population.PEBENCH:
        items = ChainOfThought.objects.in_pebench()
        if population.get("build"):
            items = items.filter(pebench_item__build_id=population["build"])
        return items
    raise AuditError(gettext("unknown population %(population)s") % {"population": repr(kind)})


def clean_population(population: Any) -> dict:
    """The population spec in its stored form; refuses what it cannot mean (API input included)."""
    if not isinstance(population, dict):
        raise AuditError(gettext("the population must be an object with a kind"))
    kind = population.get("kind")
    if kind == Audit.Population.STATUS:
        return {"kind": kind, "status": population.get("status")}
    if kind == Audit.Population.BATCH:
        hash_ids = population.get("hash_ids")
        if not isinstance(hash_ids, list) or not all(isinstance(h, str) for h in hash_ids):
            raise AuditError(gettext("the batch must be a list of question hash ids"))
        return {"kind": kind, "hash_ids": list(dict.fromkeys(h.strip() for h in hash_ids if h.strip()))}
    if kind in (Audit.Population.IMPORT, Audit.Population.PEBENCH, Audit.Population.CANDIDATE_SET):
        name = {Audit.Population.IMPORT: "source_document", Audit.Population.PEBENCH: "build"}.get(kind, kind)
        value = population.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise AuditError(gettext("%(name)s must be an id") % {"name": name})
        return {"kind": kind, name: value}
    raise AuditError(gettext("unknown population %(population)s") % {"population": repr(kind)})


def kind_of(population: dict) -> str:
    return Kind.PEBENCH if population.get("kind") == Audit.Population.PEBENCH else Kind.QUESTION


def stratum_rows(population: dict, strata: Sequence[str]) -> list[tuple[int, str]]:
    """(id, stratum key) of every member of the population, in id order."""
    qs = population_queryset(population).order_by("id")
    fields = [f for f in strata if f != Audit.Stratum.ANNOTATOR]
    workers: dict[int, str] = {}
    if Audit.Stratum.ANNOTATOR in strata and kind_of(population) == Kind.QUESTION:
        # The person who did the latest stage of work on the question.
        last = Assignment.objects.filter(question=OuterRef("pk"), done_at__isnull=False).order_by("-done_at", "-id")
        annotated = qs.annotate(worker=Subquery(last.values("annotator__username")[:1]))
        workers = {pk: name for pk, name in annotated.values_list("id", "worker") if name}
    elif Audit.Stratum.ANNOTATOR in strata:
        labellers: dict[int, list[str]] = defaultdict(list)
        submitted = LabellingTask.objects.submitted().filter(cot__in=qs).order_by("annotator__username")
        for cot_id, username in submitted.values_list("cot_id", "annotator__username"):
            labellers[cot_id].append(username)
        workers = {pk: "+".join(names) for pk, names in labellers.items()}
    return [
        (row[0], stratum_key(strata, {"annotator": workers.get(row[0]), **dict(zip(fields, row[1:], strict=True))}))
        for row in qs.values_list("id", *fields)
    ]


def stratum_key(strata: Sequence[str], values: dict) -> str:
    # A blank value (nobody recorded, a PEBench item without a subject) gets a visible stratum of its own.
    return " / ".join(str(values.get(f) or NO_ANNOTATOR) for f in strata)


def expected_strata(strata: Sequence[str]) -> list[str]:
    """Strata that should exist even when the population has nothing in them,
    so that an empty one is reported instead of silently missing."""
    if list(strata) == [Audit.Stratum.SUBJECT]:
        return list(Subject.values)
    if list(strata) == [Audit.Stratum.QTYPE]:
        return list(QuestionType.values)
    return []


def fingerprint(ids: Iterable[int]) -> str:
    return hashlib.sha256(",".join(str(i) for i in sorted(ids)).encode()).hexdigest()


# --- drawing the sample ------------------------------------------------------------


@dataclass
class StratumDraw:
    key: str
    available: int
    size: int  # asked for (fixed number or the plan's sample size)
    ids: list[int]
    note: str = ""
    plan: dict | None = None

    def summary(self) -> dict:
        return {"available": self.available, "size": self.size, "taken": len(self.ids), "note": self.note,
                "plan": self.plan}  # fmt: skip


def draw(
    *, rows: Sequence[tuple[int, str]], seed: int, per_stratum: int | None = None, aql: float | None = None,
    expected: Sequence[str] = (),
) -> list[StratumDraw]:  # fmt: skip
    """Draws each stratum: a fixed number, or the plan's sample size for the stratum's lot size."""
    by_stratum: dict[str, list[int]] = {key: [] for key in expected}
    for pk, key in rows:
        by_stratum.setdefault(key, []).append(pk)
    draws = []
    for key in sorted(by_stratum):
        ids = sorted(by_stratum[key])
        plan = None
        if not ids:
            draws.append(StratumDraw(key, 0, 0, [], note=gettext("empty stratum: nothing to sample")))
            continue
        if aql is not None and len(ids) < 2:
            size = len(ids)  # Table I starts at lots of 2: a lot of one is inspected whole
        elif aql is not None:
            found = sampling.single_sampling_plan(len(ids), aql)
            plan, size = found.as_dict(), found.sample_size
        else:
            size = per_stratum or 0
        note = ""
        if size >= len(ids):
            note = gettext(
                "the stratum has %(available)d items, not more than the %(size)d asked for: all of it is taken"
            ) % {"available": len(ids), "size": size}
            taken = ids
        else:
            taken = sorted(random.Random(f"{seed}:{key}").sample(ids, size))  # noqa: S311 - reproducible, not secret
        draws.append(StratumDraw(key, len(ids), size, taken, note=note, plan=plan))
    return draws


def new_seed() -> int:
    return secrets.randbelow(2**31)


def check_arguments(
    *, strata: Sequence[str], inspectors: Sequence[Any], per_stratum: int | None, aql: float | None,
    inspectors_per_item: int,
) -> tuple[list[str], list[Any]]:  # fmt: skip
    """The strata and inspectors as an audit keeps them; refuses settings it cannot use."""
    strata = list(dict.fromkeys(strata or [Audit.Stratum.SUBJECT]))
    unknown = set(strata) - set(Audit.Stratum.values)
    if unknown:
        raise AuditError(gettext("unknown strata: %(names)s") % {"names": ", ".join(sorted(unknown))})
    if (per_stratum is None) == (aql is None):
        raise AuditError(gettext("give either a sample size per stratum or an AQL for the sampling plan"))
    if per_stratum is not None and per_stratum < 1:
        raise AuditError(gettext("the sample size per stratum must be at least 1"))
    if aql is not None:
        try:
            sampling.aql_heading(aql)
        except sampling.SamplingPlanError as exc:
            raise AuditError(str(exc)) from exc
    inspectors = list(dict.fromkeys(inspectors))
    if inspectors_per_item < 1 or len(inspectors) < inspectors_per_item:
        raise AuditError(
            gettext("each item needs %(inspectors_per_item)s inspectors, and %(n)s were chosen")
            % {"inspectors_per_item": inspectors_per_item, "n": len(inspectors)}
        )
    return strata, inspectors


@transaction.atomic
def create_audit(
    *,
    name: str,
    population: dict,
    strata: Sequence[str],
    inspectors: Sequence[Any],
    by: Any,
    per_stratum: int | None = None,
    aql: float | None = None,
    seed: int | None = None,
    inspectors_per_item: int = 3,
    job: Any = None,
    progress: Any = None,
) -> Audit:
    """Draws the sample and puts every item in its inspectors' queues, all or nothing."""
    strata, inspectors = check_arguments(strata=strata, inspectors=inspectors, per_stratum=per_stratum, aql=aql,
                                         inspectors_per_item=inspectors_per_item)  # fmt: skip
    population = clean_population(population)
    kind = kind_of(population)
    rows = stratum_rows(population, strata)
    if not rows:
        raise AuditError(gettext("the population is empty: there is nothing to sample"))
    if progress:
        progress(1, 4)
    seed = new_seed() if seed is None else seed
    draws = draw(rows=rows, seed=seed, per_stratum=per_stratum, aql=aql, expected=expected_strata(strata))
    audit = Audit.objects.create(
        name=name.strip() or f"audit {timezone.now():%Y-%m-%d %H:%M}",
        kind=kind,
        population=population,
        strata=strata,
        size_rule=Audit.SizeRule.PLAN if aql is not None else Audit.SizeRule.FIXED,
        per_stratum=per_stratum,
        aql=aql,
        seed=seed,
        inspectors_per_item=inspectors_per_item,
        population_count=len(rows),
        population_hash=fingerprint(pk for pk, _key in rows),
        strata_counts={d.key: d.summary() for d in draws},
        created_by=by,
        job=job,
    )
    audit.inspectors.set(inspectors)
    if progress:
        progress(2, 4)
    sampled = [(pk, d.key) for d in draws for pk in d.ids]
    workers = workers_of(kind, [pk for pk, _key in sampled])
    field = "question_id" if kind == Kind.QUESTION else "cot_id"
    items = AuditItem.objects.bulk_create(
        AuditItem(audit=audit, kind=kind, stratum=key, position=i, workers=workers.get(pk, {}), **{field: pk})
        for i, (pk, key) in enumerate(sampled)
    )
    if progress:
        progress(3, 4)
    queue_ratings(items, sorted(inspectors, key=lambda u: u.pk), inspectors_per_item)
    if progress:
        progress(4, 4)
    return audit


# --- creation as a job over large populations ------------------------------------------

CREATE_JOB = "review.create_audit"


def inline_population() -> int:
    return getattr(settings, "AUDIT_INLINE_POPULATION", 5000)


def start_audit(*, by: Any, **arguments: Any) -> Audit | Job:
    """Creates the audit now when its population is small; over a large one (reading the
    population, its strata and who worked on every sampled item takes a while) starts the
    job that creates it and returns the job. Either way the settings are checked first, and
    the seed is fixed here, so the job draws what was asked for whenever it runs."""
    check_arguments(strata=arguments.get("strata") or [], inspectors=arguments.get("inspectors") or [],
                    per_stratum=arguments.get("per_stratum"), aql=arguments.get("aql"),
                    inspectors_per_item=arguments.get("inspectors_per_item", 3))  # fmt: skip
    population = clean_population(arguments.get("population"))
    size = population_queryset(population).count()
    if size == 0:
        raise AuditError(gettext("the population is empty: there is nothing to sample"))
    if size <= inline_population():
        return create_audit(**arguments, by=by)
    seed = arguments.get("seed")
    params = {
        "name": arguments.get("name") or "", "population": population, "strata": list(arguments.get("strata") or []),
        "per_stratum": arguments.get("per_stratum"), "aql": arguments.get("aql"),
        "seed": new_seed() if seed is None else seed,
        "inspectors": [u.pk for u in dict.fromkeys(arguments["inspectors"])],
        "inspectors_per_item": arguments.get("inspectors_per_item", 3),
    }  # fmt: skip
    return start_job(kind=CREATE_JOB, user=by, params=params,
                     title=job_text.title("create_audit", name=params["name"], size=size)
                     if params["name"] else job_text.title("create_audit_unnamed", size=size))  # fmt: skip


def create_audit_from_job(job: Job, progress: Any) -> Audit:
    """The job's audit: found when a rerun (after a crash) finds it made, else created."""
    made = Audit.objects.filter(job=job).first()
    if made is not None:
        return made
    params = dict(job.params)
    wanted = params.pop("inspectors")
    found = {u.pk: u for u in get_user_model().objects.filter(pk__in=wanted)}
    return create_audit(**params, inspectors=[found[pk] for pk in wanted if pk in found], by=job.started_by,
                        job=job, progress=progress)  # fmt: skip


def queue_ratings(items: Sequence[AuditItem], inspectors: Sequence[Any], per_item: int) -> None:
    """Each item goes to ``per_item`` inspectors, rotating so the work is spread evenly."""
    Rating.objects.bulk_create(
        Rating(item=item, inspector=inspectors[(item.position + j) % len(inspectors)])
        for item in items
        for j in range(per_item)
    )


def workers_of(kind: str, ids: Sequence[int]) -> dict[int, dict[str, list[int]]]:
    """Who did each stage of the work on these items now: {id: {stage: [user ids]}}.

    Questions: the annotator of the latest finished assignment for the stage;
    for work done outside the queues, the person who moved the question on.
    PEBench items: everyone who submitted labels."""
    found: dict[int, dict[str, list[int]]] = defaultdict(dict)
    if kind == Kind.PEBENCH:
        for cot_id, user_id in (
            LabellingTask.objects.submitted().filter(cot_id__in=ids).order_by("annotator_id")
            .values_list("cot_id", "annotator_id")
        ):  # fmt: skip
            found[cot_id].setdefault(Stage.PEBENCH_LABELLING, []).append(user_id)
        return found
    done = Assignment.objects.filter(question_id__in=ids, done_at__isnull=False).order_by("done_at", "id")
    for question_id, task, user_id in done.values_list("question_id", "task", "annotator_id"):
        found[question_id][task] = [user_id]  # the latest wins
    for stage, action in STAGE_ACTION.items():
        moved_on_by: dict[int, list[int]] = {}
        edits = QuestionEdit.objects.filter(question_id__in=ids, field="status", note=action, user__isnull=False)
        for question_id, user_id in edits.order_by("created", "id").values_list("question_id", "user_id"):
            moved_on_by[question_id] = [user_id]
        for question_id, users in moved_on_by.items():
            found[question_id].setdefault(stage, users)
    return found


def population_change(audit: Audit) -> dict | None:
    """How the population differs now from when the sample was drawn (None: unchanged).
    The sample itself never changes; this is only reported."""
    rows = stratum_rows(audit.population, audit.strata)
    if len(rows) == audit.population_count and fingerprint(pk for pk, _k in rows) == audit.population_hash:
        return None
    now: dict[str, int] = defaultdict(int)
    for _pk, key in rows:
        now[key] += 1
    keys = sorted(set(now) | set(audit.strata_counts))
    strata = [
        {"stratum": key, "then": audit.strata_counts.get(key, {}).get("available", 0), "now": now.get(key, 0)}
        for key in keys
    ]
    return {
        "then": audit.population_count,
        "now": len(rows),
        "strata": [s for s in strata if s["then"] != s["now"]],
    }


# --- rating ---------------------------------------------------------------------------


def dimension_names(kind: str) -> list[str]:
    return [name for name, _label in DIMENSIONS[kind]]


@transaction.atomic
def submit_rating(
    *, rating: Rating, verdicts: dict[str, bool], notes: dict[str, str], by: Any, active_seconds: Any = None
) -> Rating:
    """Saves an inspector's rating of an item. Rating again edits the same row.

    The row is locked while it is written, so two saves of the same rating
    (two tabs) happen one after the other; different inspectors write
    different rows and never wait for each other."""
    current = Rating.objects.select_for_update(of=("self",)).select_related("item__audit").get(pk=rating.pk)
    if current.inspector_id != by.pk:
        raise AuditError(gettext("this item is not in your queue"))
    if current.item.audit.closed:
        raise AuditError(gettext("the audit is closed"))
    names = dimension_names(current.item.kind)
    if set(verdicts) != set(names):
        raise AuditError(gettext("rate each of: %(names)s") % {"names": ", ".join(names)})
    notes = {name: (notes.get(name) or "").strip() for name in names}
    missing = [name for name in names if not verdicts[name] and not notes[name]]
    if missing:
        raise AuditError(
            gettext("say what is wrong in a note for each failed dimension: %(names)s") % {"names": ", ".join(missing)}
        )
    now = timezone.now()
    current.verdicts = {name: bool(verdicts[name]) for name in names}
    current.notes = {name: text for name, text in notes.items() if text}
    current.submitted = current.submitted or now
    current.updated = now
    current.guideline_version = guidelines.current_version_name(guidelines.Kind.AUDIT)
    current.save(update_fields=["verdicts", "notes", "submitted", "updated", "guideline_version"])
    current.add_active_seconds(guidelines.active_seconds(active_seconds))
    return current


def item_verdict(ratings: Iterable[Rating], names: Sequence[str]) -> dict[str, bool] | None:
    """The item's verdict per dimension: the inspectors' majority; a tie fails
    (an item only passes when most inspectors say so). None before any rating."""
    done = [r.verdicts for r in ratings if r.submitted is not None]
    if not done:
        return None
    return {name: sum(bool(v.get(name)) for v in done) * 2 > len(done) for name in names}


# --- rework -------------------------------------------------------------------------------


def failed_stages(item: AuditItem) -> dict[str, list[str]]:
    """Stage -> the dimensions that failed and belong to it."""
    verdict = item_verdict(item.ratings.all(), dimension_names(item.kind)) or {}
    stages: dict[str, list[str]] = defaultdict(list)
    for name, passed in verdict.items():
        if not passed:
            stages[STAGE_OF_DIMENSION[(item.kind, name)]].append(name)
    return dict(stages)


def suggested_note(item: AuditItem, stage: str) -> str:
    """The inspectors' notes on the dimensions that failed at this stage, for the rework form."""
    names = failed_stages(item).get(stage, [])
    lines = []
    for rating in item.ratings.filter(submitted__isnull=False).select_related("inspector"):
        labels = dict(DIMENSIONS[item.kind])
        lines += [f"{labels.get(name, name)}: {rating.notes[name]}" for name in names if rating.notes.get(name)]
    return "\n".join(dict.fromkeys(lines))


@transaction.atomic
def send_for_rework(*, item: AuditItem, stage: str, note: str, by: Any, annotator: Any = None) -> Rework:
    """Returns a failed item to the stage that produced the failure, with the note,
    to the annotator who did that work (or the one given)."""
    item = AuditItem.objects.select_for_update(of=("self",)).select_related("question", "cot").get(pk=item.pk)
    if stage not in failed_stages(item):
        raise AuditError(gettext("the inspectors did not fail anything this stage produced"))
    if item.reworks.filter(stage=stage).exists():
        raise AuditError(gettext("this item was already sent back to that stage in this round"))
    if AuditItem.objects.filter(audit=item.audit, round__gt=item.round).filter(item.same_object()).exists():
        raise AuditError(gettext("a later round of this item exists; send that one back instead"))
    note = note.strip()
    if not note:
        raise AuditError(gettext("the annotator needs a note saying what to fix"))
    if annotator is None:
        from django.contrib.auth import get_user_model

        workers = item.workers.get(stage) or []
        annotator = get_user_model().objects.filter(pk__in=workers[:1]).first()
        if annotator is None:
            raise AuditError(gettext("nobody is recorded as having done this work: choose an annotator"))
    try:
        if item.kind == Kind.QUESTION:
            assert item.question is not None  # the item's check constraint, by its kind
            work = bank.return_for_rework(question=item.question, task=stage, annotator=annotator, note=note, by=by)
        else:
            assert item.cot is not None
            work = labelling.return_for_rework(cot=item.cot, annotator=annotator, note=note, by=by)
    except (bank.LifecycleError, bank.QuestionDataError, labelling.LabellingError, IntegrityError) as exc:
        raise AuditError(gettext("could not send it back: %(exc)s") % {"exc": exc}) from exc
    return Rework.objects.create(item=item, stage=stage, annotator=annotator, note=note, created_by=by,
                                 work_ref=getattr(work, "pk", None))  # fmt: skip


def rework_done(rework: Rework) -> bool:
    """Whether the annotator has finished the work the rework asked for."""
    if rework.stage == Stage.PEBENCH_LABELLING:
        return LabellingTask.objects.filter(
            cot_id=rework.item.cot_id, annotator=rework.annotator, submitted__gte=rework.created
        ).exists()
    if rework.work_ref is None:  # no work was opened (a filter on pk=None finds nothing either)
        return False
    return Assignment.objects.filter(pk=rework.work_ref, done_at__isnull=False).exists()


@transaction.atomic
def reaudit(*, item: AuditItem, by: Any) -> AuditItem:
    """Puts a reworked item before the inspectors again, as the next round."""
    item = AuditItem.objects.select_for_update().get(pk=item.pk)
    reworks = list(item.reworks.select_related("item"))
    if not reworks:
        raise AuditError(gettext("only an item sent back for rework can be audited again"))
    if not all(rework_done(r) for r in reworks):
        raise AuditError(gettext("the rework is not finished yet"))
    if AuditItem.objects.filter(audit=item.audit, round__gt=item.round).filter(item.same_object()).exists():
        raise AuditError(gettext("this item is already being audited again"))
    inspectors = [r.inspector for r in item.ratings.select_related("inspector").order_by("inspector_id")]
    object_id = item.question_id or item.cot_id
    assert object_id is not None  # the item's check constraint: a question or a chain of thought
    next_round = AuditItem.objects.create(
        audit=item.audit, kind=item.kind, question=item.question, cot=item.cot, stratum=item.stratum,
        round=item.round + 1, position=item.position,
        workers=workers_of(item.kind, [object_id]).get(object_id, {}),
    )  # fmt: skip
    Rating.objects.bulk_create(Rating(item=next_round, inspector=person) for person in inspectors)
    item.reworks.update(reaudit=next_round)
    return next_round


def history(item: AuditItem) -> list[dict]:
    """Every round of an item in its audit: the ratings and the reworks that followed."""
    rounds = AuditItem.objects.filter(audit=item.audit).filter(item.same_object()).order_by("round")
    names = dimension_names(item.kind)
    out = []
    for r in rounds.prefetch_related("ratings__inspector", "reworks__annotator", "reworks__created_by"):
        ratings = list(r.ratings.all())
        out.append({
            "item": r, "ratings": ratings, "verdict": item_verdict(ratings, names),
            "reworks": [{"rework": w, "done": rework_done(w)} for w in r.reworks.all()],
        })  # fmt: skip
    return out


def close_audit(*, audit: Audit, by: Any) -> Audit:
    Audit.objects.filter(pk=audit.pk, closed__isnull=True).update(closed=timezone.now())
    audit.refresh_from_db()
    return audit
