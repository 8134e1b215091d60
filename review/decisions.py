"""Applying an audit's decision to its lots: the sampling plan's (``apply_decision``) or an inspector's
(``decide_lot``), the moves they make in the question bank, what they leave behind and re-auditing a
rejected lot. Apart from review.services because a decision reads the audit's report (review.reports),
which builds on services."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils.translation import gettext

from annotation import services as bank
from annotation.models import Assignment, Question
from review.models import Audit, AuditItem, Kind, LotDecision, Stage
from review.reports import build_report, rated_items
from review.services import (
    AuditError,
    create_audit,
    dimension_names,
    failed_stages,
    item_verdict,
    population_queryset,
    send_for_rework,
    stratum_rows,
    suggested_note,
    workers_of,
)


class LotAlreadyDecided(AuditError):
    """A lot's decision is made once: deciding it the other way is refused (a conflict, 409 in the API)."""


def decide(*, audit: Audit, by: Any, stratum: str = "", decision: str = "") -> list[LotDecision]:
    """The audit's decide action, as the page and the API take it: an audit with a sampling plan applies the
    plan's decision to every decided lot; one without decides the named lot as the inspector says."""
    if audit.aql is None:
        return [decide_lot(audit=audit, stratum=stratum, decision=decision, by=by)]
    if stratum or decision:
        raise AuditError(gettext("this audit's sampling plan decides its lots: apply the plan's decision"))
    return apply_decision(audit=audit, by=by)


# --- applying the plan's decision ------------------------------------------------------------


def audit_note(audit: Audit, stratum: str, decision: str) -> str:
    """How the question history names the audit that moved a question (``audit #12``)."""
    # Kept in this form whatever the language: releases read the audit's id back from it (releases.AUDIT_NOTE).
    return f"audit #{audit.pk} {audit.name}: lot {stratum} {decision}"


def lot_ids(audit: Audit, stratum: str) -> list[int]:
    """The questions of one lot: the stratum's members of the population as it is
    now, limited to those that existed when the sample was drawn."""
    existed = set(population_queryset(audit.population).filter(created__lte=audit.created).values_list("id", flat=True))
    return [pk for pk, key in stratum_rows(audit.population, audit.strata) if key == stratum and pk in existed]


def not_yet_passed(audit: Audit, stratum: str) -> set[int | None]:
    """Sampled questions of the lot whose latest round did not pass (failed, or still being rated)."""
    names = dimension_names(audit.kind)
    latest: dict[int | None, AuditItem] = {}  # by question: an audit of questions has one per item
    for item in AuditItem.objects.filter(audit=audit, stratum=stratum).prefetch_related("ratings").order_by("round"):
        latest[item.question_id] = item
    out: set[int | None] = set()
    for question_id, item in latest.items():
        ratings = list(item.ratings.all())
        verdict = item_verdict(ratings, names)
        if verdict is None or not all(verdict.values()) or any(r.submitted is None for r in ratings):
            out.add(question_id)
    return out


def _rework_failed_samples(audit: Audit, stratum: str, by: Any) -> int:
    """Sends each failed sampled item of round 1 back to the stage that failed, once."""
    sent = 0
    for item in AuditItem.objects.filter(audit=audit, stratum=stratum, round=1).prefetch_related("ratings"):
        for stage in failed_stages(item):
            if item.reworks.filter(stage=stage).exists():
                continue
            try:
                send_for_rework(item=item, stage=stage, note=suggested_note(item, stage) or audit_note(
                    audit, stratum, "reject"), by=by)  # fmt: skip
            except AuditError:
                continue  # nobody recorded for the work, or already back there: the report shows the item
            sent += 1
    return sent


def _rework_lot(audit: Audit, stratum: str, ids: Sequence[int], by: Any) -> int:
    """A rejected lot goes back as a whole, to the earliest stage its failures came from."""
    failures: set[str] = set()
    for item in AuditItem.objects.filter(audit=audit, stratum=stratum, round=1).prefetch_related("ratings"):
        failures |= set(failed_stages(item))
    stage = Stage.OCR_REVIEW if Stage.OCR_REVIEW in failures or not failures else Stage.STEP_CORRECTION
    sent = _rework_failed_samples(audit, stratum, by)
    # The failed samples went back above (with the inspectors' notes); the rest of the lot follows.
    rest = list(ids)
    workers = workers_of(Kind.QUESTION, rest)
    # Work nobody is recorded for goes to whoever did most of the lot's work at that stage.
    counts: dict[int, int] = defaultdict(int)
    for found in workers.values():
        for person in found.get(stage, []):
            counts[person] += 1
    from django.contrib.auth import get_user_model

    people = get_user_model().objects.in_bulk(list(counts))
    fallback = people.get(max(counts, key=counts.__getitem__)) if counts else None
    note = gettext("%(audit)s: the lot failed its sampling plan; check this question again") % {
        "audit": audit_note(audit, stratum, "reject")
    }
    for question in Question.objects.filter(pk__in=rest, status=Question.Status.SOLUTION_CORRECTED).order_by("id"):
        did = workers.get(question.pk, {}).get(stage)
        annotator = (people.get(did[0]) if did else None) or fallback
        if annotator is None:
            continue
        try:
            bank.return_for_rework(question=question, task=stage, annotator=annotator, note=note, by=by)
        except (bank.LifecycleError, bank.QuestionDataError):
            continue
        sent += 1
    return sent


def apply_decision(*, audit: Audit, by: Any) -> list[LotDecision]:
    """Applies the sampling plan's decision to every decided lot of the audit.

    Accepted lot: its questions move to ``audited`` in one set-based service call
    (``QuestionQuerySet.audit``), except sampled items that failed, which
    go back for rework first and follow once a later round passes. Rejected lot:
    every question goes back for rework; ``reaudit_lot`` then audits it again.
    Lots still being rated are left for later; applying again moves what has
    become eligible since and never sends a question back twice.
    """
    if audit.kind != Kind.QUESTION:
        raise AuditError(gettext("only audits of questions move questions through their lifecycle"))
    if audit.aql is None:
        raise AuditError(gettext("this audit has no sampling plan, so it accepts or rejects nothing"))
    report = build_report(audit)
    done = []
    for stratum in report["strata"]:
        verdict = stratum["decision"]
        if not verdict or verdict["decision"] not in LotDecision.Decision.values:
            continue
        done.append(_apply_lot(audit, stratum["stratum"], verdict["decision"], verdict["defects"],
                               stratum["sampled"], by))  # fmt: skip
    return done


def decide_lot(*, audit: Audit, stratum: str, decision: str, by: Any) -> LotDecision:
    """An inspector's own decision on one lot of an audit without a sampling plan (fixed sample sizes decide
    nothing by themselves): the same moves as the plan's decision, once every sampled item of the lot is rated."""
    if audit.kind != Kind.QUESTION:
        raise AuditError(gettext("only audits of questions move questions through their lifecycle"))
    if audit.aql is not None:
        raise AuditError(gettext("this audit's sampling plan decides its lots: apply the plan's decision"))
    if decision not in LotDecision.Decision.values:
        raise AuditError(gettext("a lot is accepted or rejected"))
    earlier = LotDecision.objects.filter(audit=audit, stratum=stratum).first()
    if earlier is not None and earlier.decision != decision:  # never turned round silently
        raise LotAlreadyDecided(
            gettext("this lot was already decided: %(decision)s") % {"decision": earlier.get_decision_display()}
        )
    rows = [r for r in rated_items(audit) if r["item"].stratum == stratum]
    if not rows:
        raise AuditError(gettext("this audit has no such lot"))
    if not all(r["complete"] for r in rows):
        raise AuditError(gettext("the lot is still being rated: every sampled item needs all its ratings"))
    defects = sum(1 for r in rows if r["verdict"] is not None and not all(r["verdict"].values()))
    return _apply_lot(audit, stratum, decision, defects, len(rows), by)


def _apply_lot(audit: Audit, key: str, decision: str, defects: int, sampled: int, by: Any) -> LotDecision:
    """Records a lot's decision once and makes its moves (again: only what became eligible since)."""
    with transaction.atomic():
        lot, created = LotDecision.objects.select_for_update().get_or_create(
            audit=audit, stratum=key,
            defaults={"decision": decision, "defects": defects, "sampled": sampled, "decided_by": by},
        )  # fmt: skip
        if lot.decision == LotDecision.Decision.ACCEPT:
            ids = lot_ids(audit, key)
            lot.question_ids = ids
            lot.reworked += _rework_failed_samples(audit, key, by)
            eligible = Question.objects.filter(pk__in=set(ids) - not_yet_passed(audit, key))
            lot.moved += eligible.audit(by=by, note=audit_note(audit, key, "accept"))
        elif created:
            lot.question_ids = lot_ids(audit, key)
            lot.reworked = _rework_lot(audit, key, lot.question_ids, by)
        lot.save()
    return lot


def left_behind(lot: LotDecision) -> dict[str, int]:
    """The lot's questions its decision could not move, by status: neither audited (or released) nor waiting
    in someone's queue for rework, such as questions still imported, which no audit can pass or send back."""
    from collections import Counter

    reworking = Assignment.objects.open().filter(question_id__in=lot.question_ids).values("question_id")
    statuses = (
        Question.objects.filter(pk__in=lot.question_ids)
        .exclude(status__in=[Question.Status.AUDITED, Question.Status.RELEASED])
        .exclude(pk__in=reworking)
        .values_list("status", flat=True)
    )
    return dict(Counter(statuses))


@transaction.atomic
def reaudit_lot(*, lot: LotDecision, by: Any) -> Audit:
    """Audits a rejected lot again once its rework is done: a new audit of the same
    questions under the same plan, strata and inspectors."""
    lot = LotDecision.objects.select_for_update().select_related("audit").get(pk=lot.pk)
    if lot.decision != LotDecision.Decision.REJECT:
        raise AuditError(gettext("only a rejected lot is audited again"))
    if lot.reaudit_id:
        raise AuditError(gettext("this lot is already being audited again"))
    waiting = Question.objects.filter(pk__in=lot.question_ids).exclude(
        status__in=[Question.Status.SOLUTION_CORRECTED, Question.Status.REJECTED]
    )
    if waiting.exists():
        raise AuditError(
            gettext("%(count)s questions of the lot are still being reworked") % {"count": waiting.count()}
        )
    hash_ids = list(
        Question.objects.filter(pk__in=lot.question_ids, status=Question.Status.SOLUTION_CORRECTED)
        .order_by("id").values_list("hash_id", flat=True)
    )  # fmt: skip
    if not hash_ids:
        raise AuditError(gettext("nothing of the lot is left to audit"))
    audit = lot.audit
    again = create_audit(
        name=f"{audit.name} — re-audit of {lot.stratum}"[:200], population={"kind": "batch", "hash_ids": hash_ids},
        strata=audit.strata, inspectors=list(audit.inspectors.all()), by=by, aql=audit.aql,
        inspectors_per_item=audit.inspectors_per_item,
    )  # fmt: skip
    lot.reaudit = again
    lot.save(update_fields=["reaudit"])
    return again
