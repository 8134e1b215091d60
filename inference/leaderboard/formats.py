"""The leaderboard's files: CSV, JSON and LaTeX, each stating what its numbers mean."""

from __future__ import annotations

import csv
import io
import json

from inference.leaderboard.core import (
    ERROR_CODES,
    FORMAT,
    OVERALL,
    READABLE_FORMATS,
    RELEASE_TAGS,
    TYPES,
    Cell,
    Entry,
    ErrorDistribution,
    Leaderboard,
    NotCounted,
    PublishedScore,
    Replaced,
    RunInfo,
    _entry_sort_key,
    _group_sort_key,
    _parse_mode,
    in_release,
    tag_of,
)
from inference.leaderboard.statistics import CI_METHOD
from k12vista import csvfiles

# One rule for time, the same for every entry: see DEFINITIONS["time_rule"].
TIME_RULE = "snapshot"

# What every number means. The page shows these (translated), CSV carries them
# as leading "# " lines, JSON under "definitions", LaTeX as comments and notes.
DEFINITIONS: dict[str, str] = {
    "time_rule": (
        "Snapshot rule: each entry is read from the slices stored when its scoring run's job finished, with every "
        "question's subject, grade and type as they were then (the bank the judge scored against). Later edits to "
        "a question do not change any entry until that run is scored again; no entry mixes the two."
    ),
    "entry": (
        "One model (inference run) in one mode, filled by one finished scoring run: the pinned one, else the newest "
        "whose scoring job finished. Scoring runs still going, failed or cancelled are listed beside it "
        "(not_counted), never in its place."
    ),
    "mean": (
        "Mean of item scores over the scored items of the group only: unscored and absent items are not counted "
        "as 0. Item score: direct mode, the mean of the judge's 0/1 marks of the sub-answers; step by step, "
        "correct steps / steps."
    ),
    "interval": (
        "95% Student-t interval for the mean of item scores, mean +- t(0.975, n - 1) * s / sqrt(n) with s the "
        "sample standard deviation of the item scores, clipped to [0, 1]; none below 2 scored items."
    ),
    "coverage": (
        "n / items, where items = n (scored) + unscored (a response without a usable score: failed call, judge "
        "output not understood, no answer, not judged) + absent."
    ),
    "absent": (
        "Questions of the run's question set (its frozen filters, questions created before the run started) that "
        "have no response row, counted in every group of their subject, stage and type."
    ),
    "error_share": (
        "Error-type shares are shares of error steps: steps of scored responses labelled with one of the eight "
        "error types; correct steps (CS) are excluded from the denominator. steps counts every labelled step, CS "
        "included; error_steps the error steps."
    ),
    "grid": (
        "grid:TYPE:TAG is one cell of the paper's tables: a question type (multiple_choice 选择题, fill_in_blank "
        "填空题, free_response 问答题) within a subject-grade tag (math-g6 ... geography-g12; g6 is primary school, "
        "g9 middle, g12 high); cell:TAG is the tag over all types."
    ),
    "outside_release": (
        "Tags outside the release's eleven (such as physics-g6) get their own cells, after the eleven, marked "
        "in_release=false (in LaTeX with a section sign); their items count in overall, stage, subject and type "
        "like every other item."
    ),
    "question_set": (
        "Each entry names its run's question set (the question bank filters frozen when the run started); "
        "other_question_set marks an entry whose set differs from the board's, the set most entries cover."
    ),
    "scale": "Scores, intervals, coverage and shares are fractions in [0, 1] in CSV and JSON, percentages on the page "
    "and in LaTeX. Published numbers stand beside ours, never mixed in.",
}


# --------------------------------------------------------------------------- CSV and JSON

RUN_COLUMNS = (
    "inference_run",
    "inference_run_name",
    "scoring_run",
    "scoring_run_name",
    "snapshot_at",
    "question_set",
    "other_question_set",
    "pinned",
    "not_counted",
    "protocol",
    "replaced",
)
CSV_COLUMNS = (
    "model",
    "mode",
    "group",
    "in_release",
    "n",
    "unscored",
    "absent",
    "items",
    "coverage",
    "mean",
    "ci_low",
    "ci_high",
    "steps",
    "error_steps",
    *ERROR_CODES,
    *(f"{code}_share" for code in ERROR_CODES),
    "published_score",
    "published_source",
    *RUN_COLUMNS,
)


def _num(value: float | int | None) -> str:
    return "" if value is None else repr(value)


def _not_counted_json(run: RunInfo) -> list[dict]:
    return [{"scoring_run": n.scoring_run, "name": n.name, "status": n.status} for n in run.not_counted]


def _run_json(run: RunInfo | None) -> dict | None:
    if run is None:
        return None
    return {
        "inference_run": run.inference_run,
        "inference_run_name": run.inference_run_name,
        "scoring_run": run.scoring_run,
        "scoring_run_name": run.scoring_run_name,
        "snapshot_at": run.snapshot_at,
        "question_set": run.question_set,
        "other_question_set": run.other_question_set,
        "pinned": run.pinned,
        "not_counted": _not_counted_json(run),
        "protocol": run.protocol,
        "replaced": _replaced_json(run.replaced),
    }


def _replaced_json(replaced: Replaced | None) -> dict | None:
    if replaced is None:
        return None
    return {"scoring_run": replaced.scoring_run, "name": replaced.name, "differs": list(replaced.differs)}


def _replaced_from_json(raw: dict | None) -> Replaced | None:
    return Replaced(raw["scoring_run"], raw["name"], tuple(raw["differs"])) if raw else None


def _run_from_json(raw: dict | None) -> RunInfo | None:
    if not raw:
        return None
    return RunInfo(
        raw["inference_run"], raw["inference_run_name"], raw["scoring_run"], raw["scoring_run_name"],
        raw["snapshot_at"], raw["question_set"], raw["other_question_set"], raw["pinned"],
        tuple(NotCounted(n["scoring_run"], n["name"], n["status"]) for n in raw["not_counted"]),
        raw.get("protocol", "studio"), _replaced_from_json(raw.get("replaced")),
    )  # fmt: skip


def _run_fields(run: RunInfo | None) -> list[str]:
    if run is None:
        return [""] * len(RUN_COLUMNS)
    return [
        str(run.inference_run), run.inference_run_name, str(run.scoring_run), run.scoring_run_name,
        run.snapshot_at, run.question_set, str(run.other_question_set).lower(), str(run.pinned).lower(),
        json.dumps(_not_counted_json(run), ensure_ascii=False) if run.not_counted else "",
        run.protocol, json.dumps(_replaced_json(run.replaced), ensure_ascii=False) if run.replaced else "",
    ]  # fmt: skip


def csv_preamble() -> str:
    """The definitions as leading ``# `` lines (``pandas.read_csv(..., comment="#")`` skips them)."""
    lines = [f"# {FORMAT}; time rule: {TIME_RULE}"]
    lines += [f"# {name}: {text}" for name, text in DEFINITIONS.items()]
    return "\n".join(lines) + "\n"


def to_csv(leaderboard: Leaderboard) -> str:
    """The definitions (``# `` lines), then one row per (model, mode, group),
    in the leaderboard's order.

    Scores, intervals, coverage and shares are on 0-1 and written with
    ``repr`` so they read back exactly; empty fields mean "not applicable" (no
    scored item, nothing published, no run behind the entry). ``items``,
    ``coverage``, ``error_steps``, ``in_release`` and the ``_share`` columns
    are derived and ignored by :func:`from_csv`. Every row of an entry repeats
    its run columns.
    """
    out = io.StringIO()
    out.write(csv_preamble())
    writer = csvfiles.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for entry in leaderboard.entries:
        run_fields = _run_fields(entry.run)
        for group, cell in entry.cells.items():
            dist = entry.errors.get(group)
            pub = entry.published.get(group)
            writer.writerow(
                [
                    entry.model,
                    entry.mode,
                    group,
                    str(in_release(group)).lower(),
                    cell.n,
                    cell.unscored,
                    cell.absent,
                    cell.items,
                    _num(cell.coverage),
                    _num(cell.mean),
                    _num(cell.ci_low),
                    _num(cell.ci_high),
                    *(
                        [dist.steps, dist.error_steps, *dist.counts.values(), *map(_num, dist.shares.values())]
                        if dist
                        else [""] * (2 + 2 * len(ERROR_CODES))
                    ),
                    _num(pub.score) if pub else "",
                    pub.source if pub else "",
                    *run_fields,
                ]
            )
    return out.getvalue()


def _opt_float(text: str) -> float | None:
    return float(text) if text else None


def _run_from_csv(record: dict) -> RunInfo | None:
    if not record.get("scoring_run"):
        return None
    not_counted = json.loads(record["not_counted"]) if record["not_counted"] else []
    return RunInfo(
        int(record["inference_run"]), record["inference_run_name"], int(record["scoring_run"]),
        record["scoring_run_name"], record["snapshot_at"], record["question_set"],
        record["other_question_set"] == "true", record["pinned"] == "true",
        tuple(NotCounted(n["scoring_run"], n["name"], n["status"]) for n in not_counted),
        record.get("protocol") or "studio",
        _replaced_from_json(json.loads(record["replaced"])) if record.get("replaced") else None,
    )  # fmt: skip


def from_csv(text: str) -> Leaderboard:
    """Read back what :func:`to_csv` wrote (the ``# `` lines are skipped)."""
    lines = [line for line in io.StringIO(text, newline="") if not line.startswith("#")]
    by_key: dict[tuple[str, str], tuple[dict, dict, dict, list]] = {}
    for written in csv.DictReader(lines):
        record = {name: csvfiles.read_cell(value) for name, value in written.items()}
        cells, errors, published, runs = by_key.setdefault((record["model"], record["mode"]), ({}, {}, {}, []))
        group = record["group"]
        cells[group] = Cell(
            group,
            int(record["n"]),
            int(record["unscored"]),
            int(record["absent"]),
            _opt_float(record["mean"]),
            _opt_float(record["ci_low"]),
            _opt_float(record["ci_high"]),
        )
        if record["steps"]:
            errors[group] = ErrorDistribution(
                group, int(record["steps"]), {code: int(record[code]) for code in ERROR_CODES}
            )
        if record["published_score"]:
            published[group] = PublishedScore(float(record["published_score"]), record["published_source"])
        if not runs:
            runs.append(_run_from_csv(record))
    return Leaderboard(
        tuple(Entry(*key, *by_key[key][:3], run=by_key[key][3][0]) for key in sorted(by_key, key=_entry_sort_key))
    )


def to_json(leaderboard: Leaderboard, *, indent: int | None = 2) -> str:
    """JSON with a fixed key order (format, interval, time rule, definitions,
    the board's question set, then entries in the leaderboard's order, groups
    in display order); scores on 0-1."""
    return json.dumps(to_document(leaderboard), ensure_ascii=False, indent=indent)


def to_document(leaderboard: Leaderboard) -> dict:
    """What :func:`to_json` writes, as a dict (the API renders it itself)."""
    return {
        "format": FORMAT,
        "interval": CI_METHOD,
        "time_rule": TIME_RULE,
        "definitions": DEFINITIONS,
        "question_set": leaderboard.question_set,
        "entries": [
            {
                "model": entry.model,
                "mode": entry.mode,
                "run": _run_json(entry.run),
                "cells": {
                    group: {
                        "n": cell.n,
                        "unscored": cell.unscored,
                        "absent": cell.absent,
                        "items": cell.items,
                        "coverage": cell.coverage,
                        "mean": cell.mean,
                        "ci_low": cell.ci_low,
                        "ci_high": cell.ci_high,
                        "in_release": in_release(group),
                    }
                    for group, cell in entry.cells.items()
                },
                "errors": {
                    group: {
                        "steps": dist.steps,
                        "error_steps": dist.error_steps,
                        "counts": dist.counts,
                        "shares": dist.shares,
                    }
                    for group, dist in entry.errors.items()
                },
                "published": {
                    group: {"score": pub.score, "source": pub.source} for group, pub in entry.published.items()
                },
            }
            for entry in leaderboard.entries
        ],
    }


def from_json(text: str) -> Leaderboard:
    """Read back what :func:`to_json` wrote (derived fields are recomputed);
    version 1 documents (without runs) are read too."""
    document = json.loads(text)
    if document.get("format") not in READABLE_FORMATS:
        raise ValueError(f"not a {FORMAT} document (format {document.get('format')!r})")
    entries = []
    for raw in document["entries"]:
        cells = {
            group: Cell(group, c["n"], c["unscored"], c["absent"], c["mean"], c["ci_low"], c["ci_high"])
            for group, c in raw["cells"].items()
        }
        errors = {
            group: ErrorDistribution(group, d["steps"], {code: d["counts"][code] for code in ERROR_CODES})
            for group, d in raw["errors"].items()
        }
        published = {group: PublishedScore(p["score"], p["source"]) for group, p in raw["published"].items()}
        entries.append(Entry(raw["model"], raw["mode"], cells, errors, published, _run_from_json(raw.get("run"))))
    return Leaderboard(tuple(entries), document.get("question_set", ""))


# --------------------------------------------------------------------------- LaTeX

GROUPINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "stage": (("stage:primary", "Primary"), ("stage:middle", "Middle"), ("stage:high", "High")),
    "subject": (
        ("subject:math", "Math"),
        ("subject:physics", "Physics"),
        ("subject:chemistry", "Chemistry"),
        ("subject:biology", "Biology"),
        ("subject:geography", "Geography"),
    ),
    "type": (
        ("type:multiple_choice", "Multiple choice"),
        ("type:fill_in_blank", "Fill-in-blank"),
        ("type:free_response", "Free response"),
    ),
    "cell": tuple((f"cell:{tag}", tag) for tag in RELEASE_TAGS),
}
LATEX_GROUPINGS = (*GROUPINGS, "grid")
TYPE_TITLES = {"multiple_choice": "MC", "fill_in_blank": "Fill", "free_response": "FR"}
MODE_TITLES = {"direct": "Direct Inference Score", "step_by_step": "Step-by-Step Score"}

_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
EM_DASH = "---"
DAGGER = r"$^\dagger$"
DDAGGER = r"$^\ddagger$"
OUTSIDE = r"\S"


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(char, char) for char in text)


def outside_tags(entries: list[Entry]) -> list[str]:
    """Subject-grade tags outside the release that some entry has items (or a published number) in."""
    found = {
        tag
        for entry in entries
        for group, cell in entry.cells.items()
        if group.startswith("cell:") and not in_release(group) and (cell.items or group in entry.published)
        for tag in [tag_of(group)]
    }
    return [g.removeprefix("cell:") for g in sorted((f"cell:{t}" for t in found), key=_group_sort_key)]


def latex_definitions() -> list[str]:
    """The definitions as LaTeX comment lines, above the table."""
    return [f"% {name}: {text}" for name, text in DEFINITIONS.items()]


def to_latex(
    leaderboard: Leaderboard,
    *,
    mode: str,
    grouping: str = "stage",
    source: str = "ours",
    caption: str | None = None,
    label: str | None = None,
) -> str:
    """A booktabs table like the paper's Table 7 for one mode, after the
    definitions as ``%`` comments.

    Rows are models, sorted by Overall (highest first, empty last, then by
    name); columns are the grouping's groups (``stage``: Primary, Middle,
    High; also ``subject``, ``type``, ``cell``) and Overall; ``grid`` has a row
    per model and question type and a column per subject-grade tag, then the
    type's overall. ``cell`` and ``grid`` add a column, marked with a section
    sign, for each tag outside the release that has items. Scores are
    percentages with two decimals; the best value of each column as printed is
    bold (ties all bold; in ``grid``, among rows of one type); an empty cell is
    an em dash (``---``). With ``source="ours"`` a cell with items whose
    coverage is below 1 gets a dagger (an em dash too, when none of its items
    was scored) and the table a note; a model over another question set than
    the board's a double dagger; models with no item in this mode are left out,
    a model whose every response was unparsable is kept. ``source="published"``
    tabulates the merged published numbers of models that have any.
    ``caption`` is LaTeX and is not escaped; model names are.
    """
    mode = _parse_mode(mode)
    if grouping not in LATEX_GROUPINGS:
        raise ValueError(f"grouping must be one of {', '.join(LATEX_GROUPINGS)}, got {grouping!r}")
    if source not in ("ours", "published"):
        raise ValueError(f"source must be ours or published, got {source!r}")
    entries = leaderboard.for_mode(mode)
    extra = outside_tags(entries) if grouping in ("cell", "grid") else []
    if grouping == "grid":
        tags = [*RELEASE_TAGS, *extra]
        row_groups = [(qtype, [*(f"grid:{qtype}:{tag}" for tag in tags), f"type:{qtype}"]) for qtype in TYPES]
        titles = [*(latex_escape(t) for t in RELEASE_TAGS), *(f"{latex_escape(t)}{OUTSIDE}" for t in extra), "All"]
    else:
        columns = (*GROUPINGS[grouping], *((f"cell:{tag}", tag) for tag in extra), (OVERALL, "Overall"))
        row_groups = [("", [group for group, _title in columns])]
        titles = [latex_escape(t) + (OUTSIDE if not in_release(g) else "") for g, t in columns]

    def values_of(entry: Entry, groups: list[str]) -> tuple[list[float | None], list[bool]]:
        values: list[float | None] = []
        partial: list[bool] = []
        for group in groups:
            if source == "ours":
                cell = entry.cells.get(group)
                values.append(cell.mean if cell else None)
                partial.append(bool(cell and cell.items and cell.n < cell.items))
            else:
                pub = entry.published.get(group)
                values.append(pub.score if pub else None)
                partial.append(False)
        return values, partial

    kept = []
    for entry in entries:
        overall_values, _p = values_of(entry, [OVERALL])
        if (
            entry.cells[OVERALL].items
            if source == "ours"
            else any(v is not None for v in values_of(entry, [g for _q, gs in row_groups for g in gs] + [OVERALL])[0])
        ):
            kept.append((entry, overall_values[0]))
    kept.sort(key=lambda row: (row[1] is None, -(row[1] or 0.0), row[0].model))

    body: list[str] = []
    any_partial = any_other = False
    for qtype, groups in row_groups:
        rows = [(entry, *values_of(entry, groups)) for entry, _overall in kept]
        printed = [[None if v is None else f"{v * 100:.2f}" for v in values] for _e, values, _p in rows]
        best = [max((float(v) for r in printed if (v := r[i]) is not None), default=None) for i in range(len(groups))]
        if qtype and body:
            body.append(r"    \midrule")
        for (entry, _values, partial), texts in zip(rows, printed, strict=True):
            shown = []
            for i, text in enumerate(texts):
                mark = DAGGER if partial[i] else ""
                any_partial = any_partial or partial[i]
                if text is None:
                    shown.append(EM_DASH + mark)
                    continue
                shown.append((rf"\textbf{{{text}}}" if float(text) == best[i] else text) + mark)
            other = source == "ours" and entry.run is not None and entry.run.other_question_set
            any_other = any_other or other
            name = latex_escape(entry.model) + (DDAGGER if other else "")
            lead = f"{name} & {TYPE_TITLES[qtype]}" if qtype else name
            body.append(f"    {lead} & {' & '.join(shown)} \\\\")

    width = len(titles)
    lead_cols = 2 if grouping == "grid" else 1
    what = {"stage": "stage", "subject": "subject", "type": "question type", "cell": "subject and stage",
            "grid": "question type and subject-grade"}[grouping]  # fmt: skip
    suffix = "-published" if source == "published" else ""
    if caption is None:
        caption = f"{MODE_TITLES[mode]} (\\%) by {what}" + (" (published)." if suffix else ".")
    label = label or f"tab:k12vista-{mode.replace('_', '-')}-{grouping}{suffix}"
    header = "Model & Type" if grouping == "grid" else "Model"
    lines = [
        *latex_definitions(),
        r"\begin{table}[htbp]",
        r"  \centering",
        f"  \\caption{{{caption}}}",
        f"  \\label{{{label}}}",
        f"  \\begin{{tabular}}{{{'l' * lead_cols}{'r' * width}}}",
        r"    \toprule",
        f"    {'& ' * lead_cols}\\multicolumn{{{width}}}{{c}}{{{MODE_TITLES[mode]}}} \\\\",
        f"    \\cmidrule(lr){{{lead_cols + 1}-{width + lead_cols}}}",
        f"    {header} & {' & '.join(titles)} \\\\",
        r"    \midrule",
        *body,
        r"    \bottomrule",
        r"  \end{tabular}",
    ]
    notes = []
    if source == "ours":
        notes.append("Mean over scored items; the bank as each scoring run saw it.")
    if any_partial:
        notes.append(r"$^\dagger$ Coverage below 100\,\%: mean over scored responses only.")
    if any_other:
        notes.append(r"$^\ddagger$ Run over another question set than the board's.")
    if extra:
        notes.append(r"\S{} Outside the release's subject-grade tags; counted in Overall.")
    if notes:
        lines.append(r"  \par\smallskip")
        lines += [f"  {{\\footnotesize {note}}}" + (r"\par" if i < len(notes) - 1 else "") for i, note in
                  enumerate(notes)]  # fmt: skip
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
