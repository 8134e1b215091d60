"""An audit's report: high-quality rates per stratum and dimension with Wilson
intervals (the layout of the paper's Tables 5 and 8), agreement between
inspectors, defects per annotator and the sampling plan's decision.

Rates and the decision describe the sample as drawn (round 1): an item passes
a dimension when most of its inspectors passed it (a tie fails), and an item
is defective when it fails any dimension. Re-audits after rework are counted
separately, so fixing an item never makes the delivered work look better.
"""

from __future__ import annotations

import io
import statistics
from collections import defaultdict
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Prefetch
from django.utils.translation import gettext as _

from k12vista import csvfiles
from k12vista.stats import proportion
from k12vista.templatetags.text_extras import vocab
from pem import agreement
from review import sampling
from review.models import STAGE_OF_DIMENSION, Audit, AuditItem, Rating, Rework
from review.services import dimension_names, item_verdict, population_change

PENDING = "pending"


def rated_items(audit: Audit, round: int = 1) -> list[dict]:
    """Each item of a round with its submitted ratings and verdict."""
    names = dimension_names(audit.kind)
    rating_rows = Rating.objects.select_related("inspector").only(
        "item_id", "verdicts", "submitted", "active_seconds", "guideline_version", "inspector__username"
    )
    items = (
        AuditItem.objects.filter(audit=audit, round=round)
        .select_related("question", "cot")
        .only("audit", "kind", "stratum", "round", "position", "workers", "question__hash_id", "cot__key")
        .prefetch_related(Prefetch("ratings", queryset=rating_rows))
        .order_by("position", "id")
    )
    out = []
    for item in items:
        ratings = list(item.ratings.all())
        done = [r for r in ratings if r.submitted is not None]
        out.append({
            "item": item, "ratings": done, "slots": len(ratings), "complete": len(done) == len(ratings),
            "verdict": item_verdict(done, names),
        })  # fmt: skip
    return out


def active_time(rows: list[dict]) -> dict:
    """The active seconds the submitted ratings took: the median per rating, overall and per inspector,
    and the audit-criteria versions they were made under."""
    by_inspector: dict[str, list[int]] = defaultdict(list)
    versions: set[str] = set()
    for row in rows:
        for rating in row["ratings"]:
            versions.add(rating.guideline_version)
            if rating.active_seconds is not None:
                by_inspector[rating.inspector.username].append(rating.active_seconds)
    every = [s for seconds in by_inspector.values() for s in seconds]
    return {
        "median_seconds": statistics.median(every) if every else None,
        "by_inspector": {name: {"ratings_timed": len(s), "median_seconds": statistics.median(s)}
                         for name, s in sorted(by_inspector.items())},
        "guideline_versions": sorted(v for v in versions if v),
    }  # fmt: skip


def rates(rows: list[dict], names: list[str]) -> dict[str, dict]:
    """Per dimension, and "all" (every dimension passed), the share of rated items that passed."""
    judged = [r["verdict"] for r in rows if r["verdict"] is not None]
    out = {name: proportion(sum(v[name] for v in judged), len(judged)) for name in names}
    out["all"] = proportion(sum(all(v.values()) for v in judged), len(judged))
    return out


def decision(audit: Audit, key: str, rows: list[dict]) -> dict | None:
    """The plan's verdict on one stratum: accept with Ac or fewer defective items."""
    summary = audit.strata_counts.get(key, {})
    if audit.aql is None or not rows:
        return None
    defects = sum(1 for r in rows if r["verdict"] is not None and not all(r["verdict"].values()))
    plan_info = summary.get("plan")
    if plan_info is None:  # a lot of one item: inspected whole, any defect rejects it
        accept_number = 0
    else:
        accept_number = plan_info["accept"]
    if not all(r["complete"] for r in rows):
        return {"decision": PENDING, "defects": defects, "accept": accept_number, "reject": accept_number + 1}
    if plan_info is None:
        verdict = "accept" if defects == 0 else "reject"
    else:
        verdict = sampling.decide(sampling.single_sampling_plan(summary["available"], audit.aql), defects)
    return {"decision": verdict, "defects": defects, "accept": accept_number, "reject": accept_number + 1}


def agreement_of(rows: list[dict], names: list[str]) -> dict[str, dict]:
    """Inspectors' agreement on pass/fail per dimension: Fleiss' kappa and the share of
    items on which every inspector agreed (items rated by two or more)."""
    out = {}
    for name in names:
        counts = np.array(
            [[sum(1 for r in row["ratings"] if r.verdicts.get(name)), sum(1 for r in row["ratings"]
              if not r.verdicts.get(name))] for row in rows if len(row["ratings"]) >= 2],
            dtype=np.int64,
        ).reshape(-1, 2)  # fmt: skip
        out[name] = {"fleiss_kappa": agreement.fleiss_kappa(counts), "unanimous": agreement.raw_agreement(counts)}
    return out


def defects_by_annotator(audit: Audit, rows: list[dict], names: list[str]) -> list[dict]:
    """Whose work failed, and on what: per annotator, the rated items they worked on and
    those that failed a dimension their stage produced. Most defective first."""
    worked: dict[int, set[int]] = defaultdict(set)
    failed: dict[int, set[int]] = defaultdict(set)
    failed_on: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(names, 0))
    for row in rows:
        if row["verdict"] is None:
            continue
        item = row["item"]
        for name in names:
            for person in item.workers.get(STAGE_OF_DIMENSION[(audit.kind, name)], []):
                worked[person].add(item.pk)
                if not row["verdict"][name]:
                    failed[person].add(item.pk)
                    failed_on[person][name] += 1
    people = get_user_model().objects.in_bulk(list(worked))
    table = [
        {"annotator": people[pk].get_username() if pk in people else f"#{pk}", "annotator_id": pk,
         "rate": proportion(len(failed[pk]), len(worked[pk])), "by_dimension": failed_on[pk]}
        for pk in worked
    ]  # fmt: skip
    return sorted(table, key=lambda r: (-r["rate"]["successes"], -(r["rate"]["value"] or 0), r["annotator"]))


def rework_summary(audit: Audit) -> dict:
    reworks = Rework.objects.filter(item__audit=audit)
    later = AuditItem.objects.filter(audit=audit, round__gt=1).prefetch_related("ratings")
    names = dimension_names(audit.kind)
    verdicts = [item_verdict(list(i.ratings.all()), names) for i in later]
    return {
        "sent": reworks.count(),
        "reaudited": len(verdicts),
        "passed_after_rework": sum(1 for v in verdicts if v is not None and all(v.values())),
    }


def rates_chart(report: dict, dims: list[tuple[str, str]]) -> dict:
    """The high-quality rates as a chart spec (static/js/charts.js): one bar group per stratum,
    one bar per dimension, the overall last; the rates table beside it holds the same numbers."""
    rows = [*report["strata"], {"stratum": str(_("Overall")), "rates": report["overall"]["rates"]}]
    return {
        "kind": "bar", "percent": True, "y_max": 1, "categories": [vocab(row["stratum"]) for row in rows],
        "series": [
            {"name": str(label), "data": [row["rates"][name]["value"] for row in rows]} for name, label in dims
        ],
    }  # fmt: skip


def build_report(audit: Audit) -> dict:
    """The whole report as plain data: the page, the CSV and the JSON all read this."""
    names = dimension_names(audit.kind)
    rows = rated_items(audit)
    by_stratum: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_stratum[row["item"].stratum].append(row)
    strata = []
    for key in sorted(set(audit.strata_counts) | set(by_stratum)):
        stratum_rows = by_stratum.get(key, [])
        summary = audit.strata_counts.get(key, {})
        strata.append({
            "stratum": key, "available": summary.get("available", 0), "sampled": len(stratum_rows),
            "rated": sum(1 for r in stratum_rows if r["verdict"] is not None),
            "complete": sum(1 for r in stratum_rows if r["complete"]), "note": summary.get("note", ""),
            "plan": summary.get("plan"), "rates": rates(stratum_rows, names),
            "decision": decision(audit, key, stratum_rows),
        })  # fmt: skip
    decided = [s["decision"]["decision"] for s in strata if s["decision"]]
    if audit.aql is None or not decided:
        overall_decision = None
    elif PENDING in decided:
        overall_decision = PENDING
    else:
        overall_decision = "accept" if all(d == "accept" for d in decided) else "reject"
    return {
        "audit": {
            "id": audit.pk, "name": audit.name, "kind": audit.kind, "population": audit.population,
            "strata": audit.strata, "size_rule": audit.size_rule, "per_stratum": audit.per_stratum,
            "aql": audit.aql, "seed": audit.seed, "inspectors_per_item": audit.inspectors_per_item,
            "population_count": audit.population_count, "created": audit.created.isoformat(),
        },
        "dimensions": names,
        "sampled": len(rows),
        "complete": sum(1 for r in rows if r["complete"]),
        "strata": strata,
        "overall": {"rates": rates(rows, names), "decision": overall_decision},
        "agreement": agreement_of(rows, names),
        "active_time": active_time(rows),
        "annotators": defects_by_annotator(audit, rows, names),
        "rework": rework_summary(audit),
        "population_change": population_change(audit),
    }  # fmt: skip


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def report_csv(report: dict) -> str:
    """One row per stratum (and the overall row) and dimension."""
    buffer = io.StringIO()
    writer = csvfiles.writer(buffer)
    writer.writerow(["stratum", "dimension", "rated", "passed", "rate", "ci95_low", "ci95_high", "decision"])
    rows = [(s["stratum"], s["rates"], (s["decision"] or {}).get("decision", "")) for s in report["strata"]]
    rows.append(("overall", report["overall"]["rates"], report["overall"]["decision"] or ""))
    for stratum, stratum_rates, verdict in rows:
        for name in [*report["dimensions"], "all"]:
            p = stratum_rates[name]
            low, high = p["ci95"] or (None, None)
            writer.writerow([stratum, name, p["n"], p["successes"], _fmt(p["value"]), _fmt(low), _fmt(high), verdict])
    return buffer.getvalue()


# --- the dashboard -----------------------------------------------------------------------


def dashboard(audits: list[Audit], limit: int = 10) -> dict:
    """Pass rates over time (oldest first) and the annotators with the most defective
    items across these audits; each audit's ratings are read once."""
    over_time = []
    totals: dict[str, dict[str, Any]] = {}
    for audit in sorted(audits, key=lambda a: a.created):
        names = dimension_names(audit.kind)
        rows = rated_items(audit)
        over_time.append({"audit": audit, "rate": rates(rows, names)["all"]})
        for row in defects_by_annotator(audit, rows, names):
            entry = totals.setdefault(row["annotator"], {"annotator": row["annotator"], "failed": 0, "items": 0})
            entry["failed"] += row["rate"]["successes"]
            entry["items"] += row["rate"]["n"]
    table = [{**e, "rate": proportion(e["failed"], e["items"])} for e in totals.values() if e["failed"]]
    return {"over_time": over_time, "most_defects": sorted(table, key=lambda e: (-e["failed"], e["annotator"]))[:limit]}


# --- for releases --------------------------------------------------------------------------


def release_audit_summary(audit_ids: list[int]) -> list[dict]:
    """What a release records of the audits that moved its questions: the plan, the
    decision and the high-quality rates with their Wilson intervals, overall and per lot.
    Named by the RELEASE_AUDIT_SUMMARY setting (the question bank may not import this app)."""
    out = []
    for audit in Audit.objects.filter(pk__in=audit_ids).order_by("id"):
        report = build_report(audit)
        out.append({
            "id": audit.pk, "name": audit.name, "aql": audit.aql, "seed": audit.seed,
            "population_count": audit.population_count, "sampled": report["sampled"],
            "decision": report["overall"]["decision"], "rates": report["overall"]["rates"],
            "strata": [{"stratum": s["stratum"], "sampled": s["sampled"], "rates": s["rates"],
                        "decision": (s["decision"] or {}).get("decision")} for s in report["strata"] if s["sampled"]],
        })  # fmt: skip
    return out
