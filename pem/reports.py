"""Agreement reports over the database: people with people, judges with gold, and
the checkers (expert scores against judge scores, the paper's Table 6).

Read with a few ``values_list`` queries and computed with numpy (pem.agreement);
the method is in docs/agreement.md. Both functions return JSON-ready dicts; the
agreement page, the API and other parts read this shape.

Shapes
------
An *estimate* is ``{"value": float|None, "se": float|None, "ci95": [lo, hi]|None,
"undefined": reason|None, "n": units, "observed": raw agreement|None, ...}``: when
``value`` is None, ``undefined`` says why and ``observed`` still carries the raw
agreement. A *proportion* is k12vista.stats.proportion: ``{"successes", "n",
"value", "ci95"}`` with a Wilson 95% interval.

``agreement_report(cots=None)``::

    {
      "categories": ["CS", "ICE", ...],            # the nine labels, key order
      "ac1_categories": 9,                         # q used for Gwet's AC1
      "items": int, "steps": int,                  # chains of thought and steps in scope
      "people": {                                  # person labels, units = steps
        "raw_agreement": proportion + {"pairwise": float},
        "cohen_kappa": estimate,                   # pooled over every pair of ratings of a step
        "scott_pi": estimate, "fleiss_kappa": estimate,
        "krippendorff_alpha": estimate + {"metric": "nominal"},
        "gwet_ac1": estimate + {"categories": 9},
        "confusion": [[int]*9]*9,                  # pooled pairs, rows: the rater first by name
        "units": {"total", "rated", "single_rating", "pairable", "ratings"},
        "pairs": [{"raters": [a, b], "units", "agreement": proportion, "cohen_kappa": estimate}],
        "raters": [{"rater", "ratings", "never_used": [codes]}],
        "per_label": [{"label", "ratings", "agreement": proportion, "kappa": estimate}],
        "binary": {"categories": ["correct", "error"], raw_agreement, cohen_kappa, scott_pi,
                   fleiss_kappa, krippendorff_alpha, gwet_ac1 (categories 2)},
      },
      "gold": {"steps": int, "items": int, "distribution": {code: int}},
      "judges": [{                                 # one per (source, rater) other than people and gold
        "source": "model"|"panel"|"imported", "rater": str, "scoring_runs": [id],
        "items": int, "steps": int,                # gold steps of the items it labelled
        "coverage": proportion,                    # of those steps, how many it has a label for
        "accuracy": proportion,                    # micro, as Table 9's "Overall"
        "accuracy_by_label": {code: proportion},   # Table 9's columns (accuracy on each gold label)
        "macro_accuracy": float|None,              # mean of the columns, as Table 9's caption says
        "cohen_kappa": estimate,                   # on the steps it labelled
        "macro_f1": {"value", "undefined", "per_category"},
        "binary": {"accuracy": proportion, "cohen_kappa": estimate},
        "first_wrong_step": {"agreement", "erroneous", "correct": proportion, "f1": float|None},
        "confusion": [[int]*10]*9,                 # gold rows; judge columns, the last "no label"
      }],
      "alignment": [{"scoring_run", "name", "judge", "items", "same_count", "different_count",
                     "kinds": {"identical", "realigned", "partial"}, "unmatched_judge_steps"}],
    }

``checker_report(scoring_runs=None)``::

    {
      "experts": {"responses", "experts", "scores", "agreement": estimate (interval alpha)},
      "reference": "mean",                         # the experts' mean per response ("Avg.Expert")
      "runs": [{"scoring_run", "name", "judge", "method", "mode": "direct"|"step",
                "responses": int, "coverage": proportion, "units",
                "weighted_kappa": estimate, "binary_kappa": estimate,
                "krippendorff_alpha": estimate, "mean_absolute_difference", "pearson_r",
                "exact_agreement": proportion}],
    }
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
from django.db import connections
from django.db.models import Case, IntegerField, TextField, Value, When
from django.db.models.functions import Cast

from inference.models import Judgment, ScoringRun
from k12vista.stats import proportion
from k12vista.vocabulary import CORRECT, LABEL_CODES
from pem import agreement
from pem.models import Alignment, ExpertScore, Step, StepLabel
from pem.ratings import score_agreement

CODE = {code: index for index, code in enumerate(LABEL_CODES)}
N_LABELS = len(LABEL_CODES)
CORRECT_INDEX = CODE[CORRECT]
PERSON, GOLD = StepLabel.Source.PERSON.value, StepLabel.Source.GOLD.value
# How pem.alignment marks a gold step not matched one-to-one, in the stored pairs.
NOT_PLAIN_MATCH = ('"merged"', '"positional"', '"missing"', '"extra"')
MODE_OF_METHOD = {ScoringRun.Method.JUDGE_DIRECT.value: "direct", ScoringRun.Method.JUDGE_STEPS.value: "step"}


def _scope(cots: Any) -> Any:
    """A queryset or iterable of chains of thought (or ids) -> a filter value; None means all."""
    if cots is None:
        return None
    if hasattr(cots, "values"):
        return cots.values("pk")
    return [getattr(c, "pk", c) for c in cots]


def _raw_rows(queryset: Any, *fields: str) -> list[tuple]:
    """The queryset's rows as the database driver returns them.

    Its SQL runs on a plain cursor: the columns read here are integers and text, so Django's
    per-value converters (a third of the report's time on 134,000 labels) have nothing to do.
    """
    sql, params = queryset.values_list(*fields).query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _int_rows(queryset: Any, *fields: str) -> np.ndarray:
    """An ``n x len(fields)`` int64 array of integer columns."""
    rows = _raw_rows(queryset, *fields)
    return np.array(rows, dtype=np.int64).reshape(len(rows), len(fields))


def _index_of(field: str, names: list[str]) -> Case | Value:
    """The position of a column's value in ``names`` (-1 for anything else), computed by the
    database so that rows arrive as integers (no per-row work in Python)."""
    whens = [When(**{field: name}, then=Value(i)) for i, name in enumerate(names)]
    return Case(*whens, default=Value(-1), output_field=IntegerField()) if whens else Value(-1)


def agreement_report(cots: Any = None) -> dict:
    scope = _scope(cots)
    steps_qs = Step.objects.order_by("cot_id", "position")
    labels = StepLabel.objects.order_by().annotate(code=_index_of("label", list(LABEL_CODES)))
    if scope is not None:
        steps_qs = steps_qs.filter(cot__in=scope)
        labels = labels.filter(step__cot__in=scope)
    steps = _int_rows(steps_qs, "id", "cot_id")
    step_ids, step_cot = steps[:, 0], steps[:, 1]
    n_steps = len(step_ids)
    # Steps come sorted by (cot, position); looking up a label's step needs them sorted by id.
    by_id = np.argsort(step_ids, kind="stable")
    sorted_ids = step_ids[by_id]

    def step_index(ids: np.ndarray) -> np.ndarray:
        return by_id[np.searchsorted(sorted_ids, ids)] if len(ids) else np.zeros(0, dtype=np.int64)

    cot_ids, step_item = np.unique(step_cot, return_inverse=True)
    report: dict = {
        "categories": list(LABEL_CODES),
        "ac1_categories": agreement.STEP_LABEL_CATEGORIES,
        "items": len(cot_ids),
        "steps": n_steps,
    }

    people = labels.filter(source=PERSON)
    person_names = sorted(set(people.values_list("rater", flat=True).distinct()))
    person = _int_rows(people.annotate(who=_index_of("rater", person_names)), "step_id", "who", "code")
    person = person[person[:, 2] >= 0]
    report["people"] = agreement.label_statistics(
        step_index(person[:, 0]), person[:, 1], person[:, 2],
        n_units=n_steps, rater_names=person_names, categories=list(LABEL_CODES),
        ac1_categories=agreement.STEP_LABEL_CATEGORIES, correct=CORRECT_INDEX,
    )  # fmt: skip

    gold_rows = _int_rows(labels.filter(source=GOLD), "step_id", "code")
    gold = np.full(n_steps, -1, dtype=np.int64)
    gold[step_index(gold_rows[:, 0])] = gold_rows[:, 1]
    has_gold = gold >= 0
    # An item counts as gold when every one of its steps has a gold label.
    steps_per_item = np.bincount(step_item, minlength=len(cot_ids))
    gold_per_item = np.bincount(step_item[has_gold], minlength=len(cot_ids))
    gold_items = (steps_per_item > 0) & (gold_per_item == steps_per_item)
    report["gold"] = {
        "steps": int(has_gold.sum()),
        "items": int(gold_items.sum()),
        "distribution": dict(zip(LABEL_CODES, np.bincount(gold[has_gold], minlength=N_LABELS).tolist(), strict=True)),
    }

    others = labels.exclude(source__in=[PERSON, GOLD])
    runs: dict[tuple[str, str], set[int]] = defaultdict(set)
    for source, rater, run in others.values_list("source", "rater", "scoring_run_id").distinct():
        runs[source, rater].update([run] if run is not None else [])
    report["judges"] = []
    for source, rater in sorted(runs, key=lambda key: (key[0] != StepLabel.Source.MODEL, key[1])):
        rows = _int_rows(others.filter(source=source, rater=rater), "step_id", "code")
        judged = np.full(n_steps, -1, dtype=np.int64)
        judged[step_index(rows[:, 0])] = rows[:, 1]
        labelled = np.zeros(n_steps, dtype=bool)
        labelled[step_index(rows[:, 0])] = True
        report["judges"].append(
            {"source": source, "rater": rater, "scoring_runs": sorted(runs[source, rater])}
            | _judge(judged, labelled, gold, step_item, gold_items)
        )
    report["alignment"] = _alignment_summary(scope)
    return report


def _judge(judged, labelled, gold, step_item, gold_items) -> dict:
    """One judge against gold. ``judged`` is its code per step (-1: none or not a label)."""
    # The items it labelled at all; within them every gold step counts, labelled or not.
    items = np.zeros(gold_items.shape, dtype=bool)
    items[step_item[labelled]] = True
    steps = items[step_item] & (gold >= 0)
    ref, mine = gold[steps], judged[steps]
    accuracy = agreement.accuracy_by_reference(ref, mine, N_LABELS)
    covered = mine >= 0
    confusion = np.zeros((N_LABELS, N_LABELS + 1), dtype=np.int64)
    np.add.at(confusion, (ref, np.where(covered, mine, N_LABELS)), 1)
    binary_ref = np.where(ref == CORRECT_INDEX, 0, 1)
    binary_mine = np.where(covered, np.where(mine == CORRECT_INDEX, 0, 1), -1)
    whole = items & gold_items
    in_whole = whole[step_item]
    return {
        "items": int(items.sum()),
        "steps": int(steps.sum()),
        "coverage": accuracy["coverage"],
        "accuracy": accuracy["overall"],
        "accuracy_by_label": dict(zip(LABEL_CODES, accuracy["per_category"], strict=True)),
        "macro_accuracy": accuracy["macro"],
        "cohen_kappa": agreement.cohen_kappa(ref, mine, N_LABELS),
        "macro_f1": agreement.macro_f1(ref, mine, N_LABELS),
        "binary": {
            "accuracy": proportion(int((binary_ref == binary_mine).sum()), len(ref)),
            "cohen_kappa": agreement.cohen_kappa(binary_ref, binary_mine, 2),
        },
        "first_wrong_step": agreement.first_wrong_step(
            gold[in_whole], judged[in_whole], np.unique(step_item[in_whole], return_inverse=True)[1], CORRECT_INDEX
        ),
        "confusion": confusion.tolist(),
    }


def _alignment_summary(scope: Any) -> list[dict]:
    """Per scoring run: how many items the judge split differently, and how they aligned.

    Read from the text of the stored pairs instead of decoding 12,000 JSON lists (most of
    the report's time otherwise). The kind follows pem.alignment.StepAlignment.kind:
    "partial" when a gold step is "missing"; "identical" when the counts are equal and
    every pair is a plain "match" (a monotonic one-to-one matching of n steps onto n steps
    is the identity); otherwise "realigned". Unmatched judge steps are the "extra" entries.
    """
    rows = Alignment.objects.order_by("scoring_run_id").annotate(text=Cast("pairs", TextField()))
    if scope is not None:
        rows = rows.filter(cot__in=scope)
    by_run: dict[int, dict] = {}
    for run_id, gold_steps, judge_steps, text in _raw_rows(rows, "scoring_run_id", "gold_steps", "judge_steps", "text"):
        entry = by_run.setdefault(run_id, {
            "scoring_run": run_id, "name": "", "judge": "", "items": 0, "same_count": 0, "different_count": 0,
            "kinds": {"identical": 0, "realigned": 0, "partial": 0}, "unmatched_judge_steps": 0,
        })  # fmt: skip
        entry["items"] += 1
        entry["same_count" if gold_steps == judge_steps else "different_count"] += 1
        if '"missing"' in text:
            kind = "partial"
        elif gold_steps == judge_steps and not any(word in text for word in NOT_PLAIN_MATCH):
            kind = "identical"
        else:
            kind = "realigned"
        entry["kinds"][kind] += 1
        entry["unmatched_judge_steps"] += text.count('"extra"')
    runs = ScoringRun.objects.filter(pk__in=list(by_run))
    for pk, name, judge in runs.values_list("pk", "name", "judge__name"):
        by_run[pk].update(name=name, judge=judge)
    return list(by_run.values())


# --- checking the checkers (paper Table 6) ---------------------------------------------------


def checker_report(scoring_runs: Iterable[Any] | None = None) -> dict:
    """Expert 0-1 scores against judge scores of the same responses, per scoring run.

    The reference is the experts' mean score per response (the paper's "Avg.Expert").
    Judgments without a score (unparsable, failed) stay in the denominator of coverage
    and out of the statistics.
    """
    expert_rows = list(ExpertScore.objects.order_by().values_list("response_id", "expert_id", "score"))
    per_response: dict[int, list[float]] = defaultdict(list)
    for response_id, _expert, score in expert_rows:
        per_response[response_id].append(score)
    reference = {r: float(np.mean(scores)) for r, scores in per_response.items()}
    report: dict = {
        "experts": {
            "responses": len(per_response),
            "experts": len({e for _, e, _ in expert_rows}),
            "scores": len(expert_rows),
            "agreement": agreement.krippendorff_alpha_scores(list(per_response.values())),
        },
        "reference": "mean",
        "runs": [],
    }
    runs = ScoringRun.objects.filter(method__in=MODE_OF_METHOD).order_by("created", "pk")
    if scoring_runs is not None:
        runs = runs.filter(pk__in=[getattr(r, "pk", r) for r in scoring_runs])
    run_rows = list(runs.values_list("pk", "name", "judge__name", "method"))
    judged: dict[int, dict[int, float | None]] = defaultdict(dict)
    found = Judgment.objects.filter(scoring_run__in=[r[0] for r in run_rows], response_id__in=list(reference))
    for run_id, response_id, judge_score in found.values_list("scoring_run_id", "response_id", "score"):
        judged[run_id][response_id] = judge_score
    for pk, name, judge, method in run_rows:
        scores = judged.get(pk, {})
        if not scores:
            continue
        pairs = [(reference[r], s) for r, s in scores.items() if s is not None]
        report["runs"].append({
            "scoring_run": pk, "name": name, "judge": judge, "method": method, "mode": MODE_OF_METHOD[method],
            "responses": len(scores), "coverage": proportion(len(pairs), len(scores)),
            **score_agreement(pairs),
        })  # fmt: skip
    return report
