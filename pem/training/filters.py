"""The four PEM-800K filters and their funnel, as set-based SQL.

A filter run reads every chain labelled by one label source (the import's
labels, or a judge panel's votes) once, into one ``FilteredChain`` row per
chain with the facts the filters need (step count, labelled steps, steps
whose text is not in the response, errors without a reason, whether the last
step gives the reference answer, the first error's label, steps per label).
The filters are then UPDATEs over that table, in order; each chain carries
the first filter that removed it and why:

1. **format**: no steps (the output was not parsed), fewer labelled steps than
   steps (a judge panel's no-majority steps count here: never guessed), more
   steps than ``max_steps`` or fewer than ``min_steps``, or steps whose text is
   not in the response (more than ``max_text_mismatch``).
2. **consistency**: an error label without a reason; a chain whose labels say
   every step is correct while its last step does not give the reference
   answer (the first line of it).
3. **coverage**: a question is kept only while at least ``min_models``
   different models' chains of it survive (chains of unknown models do not
   count towards it).
4. **balance**: chains by category (``correct``, or the label of the first
   wrong step) are sampled down to the ``target`` shares, as many as the
   scarcest category allows; categories not in the target are removed. The
   sample is a seeded order (a multiplicative hash of the chain id and the
   seed), so the same data and seed keep the same chains.

The funnel (what each filter removed, in chains and steps, by reason,
subject, stage and step label) is computed by GROUP BY and stored on the run.
"""

# SQL here is assembled from our own table names, label codes and checked numbers only;
# every value from a request travels as a query parameter.
# ruff: noqa: S608

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext

from k12vista.vocabulary import LABEL_CODES
from pem.models import ChainOfThought, FilteredChain, FilterRun, Step, StepLabel

STAGES = ("format", "consistency", "coverage", "balance")
CORRECT = "correct"
CATEGORIES = (CORRECT, *[code for code in LABEL_CODES if code != "CS"])
DEFAULT_PARAMS: dict[str, Any] = {
    "format": {"min_steps": 1, "max_steps": 60, "max_text_mismatch": 0},
    "consistency": {"require_reason": True, "check_final_answer": True},
    "coverage": {"min_models": 3},
    "balance": {"target": {}, "seed": 0},
}


class FilterError(ValueError):
    """Parameters the filters cannot run with; the message says why."""


class UnknownLabels(FilterError):
    """The named label source has no labels: a run over it would filter nothing."""


def clean_params(given: dict | None) -> dict:
    """The defaults overlaid with ``given``, checked: every threshold a run used is recorded."""
    given = given or {}
    params: dict[str, Any] = {}
    for stage, defaults in DEFAULT_PARAMS.items():
        part = given.get(stage) or {}
        if not isinstance(part, dict):
            raise FilterError(gettext("%(stage)s: expected an object of parameters") % {"stage": stage})
        unknown = set(part) - set(defaults)
        if unknown:
            raise FilterError(
                gettext("%(stage)s: unknown parameters %(names)s")
                % {"stage": stage, "names": ", ".join(sorted(unknown))}
            )
        params[stage] = {**defaults, **part}
    for name in ("min_steps", "max_steps", "max_text_mismatch"):
        value = params["format"][name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FilterError(gettext("format.%(name)s must be a whole number >= 0") % {"name": name})
    min_models = params["coverage"]["min_models"]
    if isinstance(min_models, bool) or not isinstance(min_models, int) or min_models < 1:
        raise FilterError(gettext("coverage.min_models must be a whole number >= 1"))
    target = params["balance"]["target"]
    if not isinstance(target, dict) or any(k not in CATEGORIES for k in target):
        raise FilterError(
            gettext("balance.target: shares for %(categories)s only") % {"categories": ", ".join(CATEGORIES)}
        )
    if any(isinstance(v, bool) or not isinstance(v, int | float) or v < 0 for v in target.values()):
        raise FilterError(gettext("balance.target: each share must be a number >= 0"))
    if target and not sum(target.values()) > 0:
        raise FilterError(gettext("balance.target: the shares must not all be zero"))
    seed = params["balance"]["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise FilterError(gettext("balance.seed must be a whole number from 0 to 2^32-1"))
    return params


def label_sources() -> list[tuple[str, str]]:
    """(source, rater) of every label source but people's: what a run can filter on."""
    rows = (
        StepLabel.objects.exclude(source__in=[StepLabel.Source.PERSON])
        .values_list("source", "rater")
        .order_by("source", "rater")
        .distinct()
    )
    return list(rows)


# --- SQL pieces per database -----------------------------------------------------------------


def _sql() -> dict[str, str]:
    if connection.vendor == "postgresql":
        return {
            "strpos": "strpos({hay}, {needle})",
            "question_key": "split_part(c.key, ':', 1)",
            "first_line": "split_part(c.reference_answer, chr(10), 1)",
        }
    return {
        "strpos": "instr({hay}, {needle})",
        "question_key": "CASE WHEN instr(c.key, ':') > 0 THEN substr(c.key, 1, instr(c.key, ':') - 1) ELSE c.key END",
        "first_line": "CASE WHEN instr(c.reference_answer, char(10)) > 0 "
        "THEN substr(c.reference_answer, 1, instr(c.reference_answer, char(10)) - 1) ELSE c.reference_answer END",
    }


def _table(model: Any) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _population_sql(source: str) -> str:
    """Which chains a run reads, as the facts query's HAVING: chains with a label from the source
    (counted by the query's own join: a separate EXISTS read every step and label a second time,
    a quarter of the run at 840K chains); for a panel, also those with only no-majority steps."""
    labelled = "COUNT(l.id) > 0"
    try:
        vote = apps.get_model("pem", "PanelVote")
        panel_run = apps.get_model("pem", "PanelRun")
    except LookupError:
        return labelled
    if source != StepLabel.Source.PANEL:
        return labelled
    return (
        f"{labelled} OR EXISTS (SELECT 1 FROM {_table(Step)} vs "
        f"JOIN {_table(vote)} v ON v.step_id = vs.id JOIN {_table(panel_run)} pr ON pr.id = v.panel_run_id "
        "WHERE vs.cot_id = c.id AND pr.name = %(rater)s)"
    )


def _facts_sql(source: str) -> str:
    sql = _sql()
    strpos = sql["strpos"]
    first_line = sql["first_line"]
    index = {code: i for i, code in enumerate(LABEL_CODES)}
    first_error = "MIN(CASE WHEN l.label <> 'CS' THEN s.position * 16 + CASE l.label {} END END) %% 16".format(
        " ".join(f"WHEN '{code}' THEN {i}" for code, i in index.items())
    )
    category = (
        "CASE WHEN SUM(CASE WHEN l.label <> 'CS' THEN 1 ELSE 0 END) = 0 THEN 'correct' ELSE CASE {} {} END END".format(
            first_error, " ".join(f"WHEN {i} THEN '{code}'" for code, i in index.items())
        )
    )
    counts = ", ".join(f"SUM(CASE WHEN l.label = '{code}' THEN 1 ELSE 0 END)" for code in LABEL_CODES)
    count_columns = ", ".join(f"n_{code.lower()}" for code in LABEL_CODES)
    last_gives_answer = strpos.format(hay="s.text", needle=first_line)
    return f"""
        INSERT INTO {_table(FilteredChain)} (run_id, cot_id, question_key, model_name, subject, stage, n_steps,
            n_labelled, n_text_mismatch, n_error, n_error_no_reason, answer_matches, category, removed_by, reason,
            {count_columns})
        SELECT %(run)s, c.id, {sql["question_key"]}, c.model_name, c.subject, c.stage, COUNT(s.id), COUNT(l.id),
            SUM(CASE WHEN s.id IS NOT NULL AND c.response_text <> ''
                AND {strpos.format(hay="c.response_text", needle="s.text")} = 0 THEN 1 ELSE 0 END),
            SUM(CASE WHEN l.label <> 'CS' THEN 1 ELSE 0 END),
            SUM(CASE WHEN l.label <> 'CS' AND TRIM(l.explanation) = '' THEN 1 ELSE 0 END),
            CASE WHEN {first_line} = '' OR COUNT(s.id) = 0 THEN TRUE
                ELSE MAX(CASE WHEN {last_gives_answer} > 0 THEN s.position ELSE 0 END) = MAX(s.position) END,
            {category}, '', '', {counts}
        FROM {_table(ChainOfThought)} c
        LEFT JOIN {_table(Step)} s ON s.cot_id = c.id
        LEFT JOIN {_table(StepLabel)} l ON l.step_id = s.id AND l.source = %(source)s AND l.rater = %(rater)s
        GROUP BY c.id
        HAVING {_population_sql(source)}
    """


def _facts(run: FilterRun) -> None:
    _execute(_facts_sql(run.label_source), {"run": run.pk, "source": run.label_source, "rater": run.label_rater})
    if connection.vendor == "postgresql":
        # Fresh statistics, or the planner takes the new rows for a handful and re-runs
        # the coverage and balance subqueries once per row.
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {_table(FilteredChain)}")


def _execute(sql: str, params: dict) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _remove(run: FilterRun, stage: str, reason_sql: str, condition: str, params: dict | None = None) -> int:
    table = _table(FilteredChain)
    sql = (
        f"UPDATE {table} SET removed_by = %(stage)s, reason = {reason_sql} "
        f"WHERE run_id = %(run)s AND removed_by = '' AND ({condition})"
    )
    return _execute(sql, {"stage": stage, "run": run.pk, **(params or {})})


def _format(run: FilterRun, p: dict) -> None:
    _remove(
        run,
        "format",
        "CASE WHEN n_steps = 0 THEN 'unparsed' WHEN n_labelled < n_steps THEN 'unlabelled_steps' "
        "WHEN n_steps < %(min)s OR n_steps > %(max)s THEN 'step_count' ELSE 'text_mismatch' END",
        "n_steps = 0 OR n_labelled <> n_steps OR n_steps < %(min)s OR n_steps > %(max)s "
        "OR n_text_mismatch > %(mismatch)s",
        {"min": p["min_steps"], "max": p["max_steps"], "mismatch": p["max_text_mismatch"]},
    )


def _consistency(run: FilterRun, p: dict) -> None:
    conditions = []
    if p["require_reason"]:
        conditions.append("n_error_no_reason > 0")
    if p["check_final_answer"]:
        conditions.append("(n_error = 0 AND NOT answer_matches)")
    if conditions:
        _remove(
            run,
            "consistency",
            "CASE WHEN n_error_no_reason > 0 THEN 'error_without_reason' ELSE 'answer_contradicts_labels' END",
            " OR ".join(conditions),
        )


def _coverage(run: FilterRun, p: dict) -> None:
    table = _table(FilteredChain)
    scarce = (
        f"SELECT question_key FROM {table} WHERE run_id = %(run)s AND removed_by = '' GROUP BY question_key "
        "HAVING COUNT(DISTINCT NULLIF(model_name, '')) < %(min)s"
    )
    _remove(run, "coverage", "'fewer_models'", f"question_key IN ({scarce})", {"min": p["min_models"]})


def balance_quotas(available: dict[str, int], target: dict[str, float]) -> dict[str, int]:
    """Chains to keep per category: the target shares of the largest total the scarcest category allows."""
    shares = {k: v / sum(target.values()) for k, v in target.items() if v > 0}
    if not shares:
        return {}
    total = min(available.get(k, 0) / share for k, share in shares.items())
    return {k: min(available.get(k, 0), int(total * share + 1e-9)) for k, share in shares.items()}


def _balance(run: FilterRun, p: dict) -> dict[str, int]:
    if not p["target"]:
        return {}
    survivors = dict(
        FilteredChain.objects.filter(run=run, removed_by="").order_by().values_list("category").annotate(n=Count("id"))
    )
    quotas = balance_quotas(survivors, p["target"])
    table = _table(FilteredChain)
    quota_sql = "CASE category {} ELSE 0 END".format(
        " ".join(f"WHEN '{k}' THEN {int(n)}" for k, n in quotas.items()) or "WHEN '' THEN 0"
    )
    ranked = (
        f"SELECT id, category, ROW_NUMBER() OVER (PARTITION BY category "
        f"ORDER BY ((cot_id + %(seed)s) * 2654435761) %% 4294967296, cot_id) AS rn "
        f"FROM {table} WHERE run_id = %(run)s AND removed_by = ''"
    )
    condition = f"id IN (SELECT id FROM ({ranked}) ranked WHERE rn > {quota_sql})"
    listed = ", ".join(f"'{k}'" for k in quotas) or "''"
    reason = f"CASE WHEN category IN ({listed}) THEN 'sampled_out' ELSE 'not_in_target' END"
    _remove(run, "balance", reason, condition, {"seed": p["seed"]})
    return quotas


def funnel(run: FilterRun) -> dict:
    """Chains and steps each filter removed, by reason, subject, stage and label; and what is kept."""
    label_columns = [f"n_{code.lower()}" for code in LABEL_CODES]
    sums = ", ".join(f"SUM({c})" for c in label_columns)
    sql = (
        f"SELECT removed_by, reason, subject, stage, COUNT(*), SUM(n_steps), {sums} FROM {_table(FilteredChain)} "
        "WHERE run_id = %s GROUP BY removed_by, reason, subject, stage"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.pk])
        rows = cursor.fetchall()

    def empty() -> dict:
        return {"chains": 0, "steps": 0, "reasons": defaultdict(int), "by_subject": defaultdict(lambda: [0, 0]),
                "by_stage": defaultdict(lambda: [0, 0]), "by_label": dict.fromkeys(LABEL_CODES, 0)}  # fmt: skip

    groups: dict[str, dict] = {name: empty() for name in ("input", *STAGES, "kept")}
    for removed_by, reason, subject, stage, chains, steps, *labels in rows:
        for name in ("input", removed_by or "kept"):
            group = groups[name]
            group["chains"] += chains
            group["steps"] += steps or 0
            if name not in ("input", "kept"):
                group["reasons"][reason] += chains
            group["by_subject"][subject or "-"][0] += chains
            group["by_subject"][subject or "-"][1] += steps or 0
            group["by_stage"][stage or "-"][0] += chains
            group["by_stage"][stage or "-"][1] += steps or 0
            for code, n in zip(LABEL_CODES, labels, strict=True):
                group["by_label"][code] += n or 0
    remaining_chains, remaining_steps = groups["input"]["chains"], groups["input"]["steps"]
    for name in STAGES:
        remaining_chains -= groups[name]["chains"]
        remaining_steps -= groups[name]["steps"]
        groups[name]["remaining_chains"], groups[name]["remaining_steps"] = remaining_chains, remaining_steps
    return {
        name: {
            **group,
            "reasons": dict(group["reasons"]),
            "by_subject": {k: {"chains": v[0], "steps": v[1]} for k, v in sorted(group["by_subject"].items())},
            "by_stage": {k: {"chains": v[0], "steps": v[1]} for k, v in sorted(group["by_stage"].items())},
        }
        for name, group in groups.items()
    }


def start_filter_run(*, source: str, rater: str, params: dict | None, user: Any) -> FilterRun:
    if source not in StepLabel.Source.values or source == StepLabel.Source.PERSON:
        raise FilterError(gettext("cannot filter on labels of source %(source)r") % {"source": source})
    if not rater.strip():
        raise FilterError(gettext("name the labels to filter on (the import, judge or panel)"))
    params = clean_params(params)
    # A run over labels that do not exist would "succeed" with nothing in it (issue 29): refused before a job.
    if not StepLabel.objects.filter(source=source, rater=rater.strip()).exists():
        known = [name for kind, name in label_sources() if kind == source]
        raise UnknownLabels(
            gettext("no labels of source %(source)s by %(rater)s; known: %(known)s")
            % {"source": source, "rater": rater.strip(), "known": ", ".join(known[:10]) or "-"}
        )
    return FilterRun.objects.create(label_source=source, label_rater=rater.strip(), params=params,
                                    created_by=user)  # fmt: skip


def run_filters(run: FilterRun, progress: Callable[[int, int | None], None] | None = None) -> dict:
    """Runs (or runs again, from scratch) the four filters of ``run`` and stores the funnel."""
    p = clean_params(run.params)
    steps = [
        ("facts", lambda: _facts(run)),
        ("format", lambda: _format(run, p["format"])),
        ("consistency", lambda: _consistency(run, p["consistency"])),
        ("coverage", lambda: _coverage(run, p["coverage"])),
    ]
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # One hash aggregate over millions of steps, instead of a sort spilled to disk.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL work_mem = '256MB'")
        FilteredChain.objects.filter(run=run).delete()
        for done, (_name, step) in enumerate(steps):
            if progress:
                progress(done, len(steps) + 2)
            step()
        quotas = _balance(run, p["balance"])
        if progress:
            progress(len(steps) + 1, len(steps) + 2)
        run.funnel = {**funnel(run), "quotas": quotas}
        run.kept = run.funnel["kept"]["chains"]
        run.finished = timezone.now()
        run.save(update_fields=["funnel", "kept", "finished"])
    if progress:
        progress(len(steps) + 2, len(steps) + 2)
    return {"filter_run": run.pk, "input": run.funnel["input"]["chains"], "kept": run.kept}


def kept_chains(run: FilterRun):
    return ChainOfThought.objects.filter(pk__in=FilteredChain.objects.filter(run=run, removed_by="").values("cot_id"))
