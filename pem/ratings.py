"""Researchers' ratings files: reading them, and their agreement statistics.

A file is CSV (with a header row) or JSONL (one object a line) of rows
``item, rater, label`` or ``item, rater, score``. Every problem is reported with
its line number and the file is refused as a whole (statistics on part of a file
would look complete and not be): missing cells, unknown labels (never guessed),
scores that are not numbers, a second row for the same (item, rater), items not
in a given list. Conditions that are legal but worth knowing (an item with a
single rating, a rater who never uses some label) are returned as notes.

Labels are matched after Unicode NFKC normalisation (full-width letters and
spaces become ordinary ones) and trimming: by code, English or Chinese name for
the nine step labels (k12vista.vocabulary.label_from_name), or exactly (case
ignored) against a category list the researcher gives.
"""

from __future__ import annotations

import csv
import io
import json
import math
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from k12vista.stats import proportion
from k12vista.vocabulary import CORRECT, LABEL_CODES, label_from_name
from pem import agreement

SCALES = ("nominal", "ordinal", "interval")
MAX_ERRORS_SHOWN = 50


class RatingsError(ValueError):
    """The file cannot be used; ``errors`` lists every problem with its line."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        shown = errors[:MAX_ERRORS_SHOWN]
        more = len(errors) - len(shown)
        super().__init__("\n".join(shown + ([f"... and {more} more problems"] if more > 0 else [])))


@dataclass
class Ratings:
    kind: str  # "label" or "score"
    format: str  # "csv" or "jsonl"
    # (item, rater, value): value is a category name (labels) or a float (scores).
    rows: list[tuple[str, str, str | float]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)

    @property
    def items(self) -> list[str]:
        return sorted({item for item, _, _ in self.rows})

    @property
    def raters(self) -> list[str]:
        return sorted({rater for _, rater, _ in self.rows})


def clean(text: object) -> str:
    """NFKC (full-width to ordinary characters) and trimmed; None becomes ""."""
    if text is None:
        return ""
    return unicodedata.normalize("NFKC", str(text)).strip()


def label_matcher(categories: Sequence[str] | None):
    """A function raw text -> category name, raising ValueError for anything else."""
    if not categories:

        def step_label(raw: str) -> str:
            return label_from_name(clean(raw)).code

        return step_label
    by_key = {clean(c).casefold(): clean(c) for c in categories}

    def listed(raw: str) -> str:
        found = by_key.get(clean(raw).casefold())
        if found is None:
            raise ValueError(f"unknown label {raw!r} (expected one of {', '.join(by_key.values())})")
        return found

    return listed


def _records(text: str, fmt: str) -> Iterable[tuple[int, dict | None, str | None]]:
    """(line number, row as a dict of cleaned lower-case keys, or None with an error)."""
    if fmt == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, None, f"line {number}: not valid JSON ({exc.msg})"
                continue
            if not isinstance(obj, dict):
                yield number, None, f"line {number}: expected a JSON object"
                continue
            yield number, {clean(k).casefold(): v for k, v in obj.items()}, None
        return
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    for row in reader:
        number = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [clean(cell).casefold() for cell in row]
            missing = [name for name in ("item", "rater") if name not in header]
            if missing or not ({"label", "score"} & set(header)):
                yield number, None, f"line {number}: the header needs columns item, rater and label or score"
                return
            continue
        if len(row) > len(header):
            yield number, None, f"line {number}: {len(row)} cells, the header has {len(header)}"
            continue
        yield number, dict(zip(header, row + [""] * (len(header) - len(row)), strict=True)), None


def detect_format(text: str, filename: str = "") -> str:
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv", ".txt")):
        return "csv"
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def read_ratings(
    data: bytes | str,
    *,
    filename: str = "",
    categories: Sequence[str] | None = None,
    known_items: Iterable[str] | None = None,
) -> Ratings:
    """Parses a ratings file; raises RatingsError listing every bad line."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise RatingsError([f"the file is not UTF-8 text (byte {exc.start})"]) from None
    fmt = detect_format(data, filename)
    match = label_matcher(categories)
    known = {clean(i) for i in known_items} if known_items is not None else None
    errors: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    kind: str | None = None
    result = Ratings(kind="label", format=fmt)
    for number, row, error in _records(data, fmt):
        if error:
            errors.append(error)
            continue
        assert row is not None
        has_label = clean(row.get("label")) != ""
        has_score = clean(row.get("score")) != ""
        item, rater = clean(row.get("item")), clean(row.get("rater"))
        problems = [f"the {name} is empty" for name, value in (("item", item), ("rater", rater)) if not value]
        if not has_label and not has_score:
            problems.append("the label (or score) is empty")
        elif has_label and has_score:
            problems.append("give a label or a score, not both")
        else:
            row_kind = "label" if has_label else "score"
            if kind is None:
                kind = row_kind
            elif row_kind != kind:
                problems.append(f"a {row_kind} in a file of {kind}s")
        if problems:
            errors.append(f"line {number}: " + "; ".join(problems))
            continue
        if known is not None and item not in known:
            errors.append(f"line {number}: unknown item {item!r}")
            continue
        try:
            value: str | float
            if kind == "label":
                value = match(str(row["label"]))
            else:
                value = float(clean(row["score"]))
                if not math.isfinite(value):
                    raise ValueError
        except ValueError as exc:
            problem = str(exc) if kind == "label" else f"score {row.get('score')!r} is not a number"
            errors.append(f"line {number}: {problem}")
            continue
        if (item, rater) in seen:
            errors.append(f"line {number}: item {item!r} already has a rating by {rater!r} (line {seen[item, rater]})")
            continue
        seen[item, rater] = number
        result.rows.append((item, rater, value))
    if not errors and not result.rows:
        errors.append("the file has no ratings")
    if errors:
        raise RatingsError(errors)
    result.kind = kind or "label"
    if result.kind == "label":
        result.categories = [clean(c) for c in categories] if categories else list(LABEL_CODES)
    return result


def ratings_report(ratings: Ratings, *, scale: str = "", reference: str = "") -> dict:
    """The agreement statistics of a ratings file as JSON-ready data.

    ``scale`` defaults to nominal for labels and interval for scores. Scores on a nominal or
    ordinal scale use their distinct values as the categories (in numeric order).
    ``reference`` names a rater the others are compared with (accuracy per reference
    category, Cohen's kappa, macro-F1), as gold is in the PEBench report.
    """
    scale = scale or ("nominal" if ratings.kind == "label" else "interval")
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r} (nominal, ordinal or interval)")
    raters = ratings.raters
    if reference and reference not in raters:
        raise ValueError(f"the reference rater {reference!r} has no ratings in the file")
    items = ratings.items
    item_index = {item: i for i, item in enumerate(items)}
    rater_index = {rater: r for r, rater in enumerate(raters)}
    unit = np.array([item_index[i] for i, _, _ in ratings.rows], dtype=np.int64)
    rater = np.array([rater_index[r] for _, r, _ in ratings.rows], dtype=np.int64)
    report: dict = {
        "kind": ratings.kind,
        "format": ratings.format,
        "scale": scale,
        "items": len(items),
        "raters": raters,
        "ratings": len(ratings.rows),
    }
    if ratings.kind == "score" and scale == "interval":
        scores = np.array([v for _, _, v in ratings.rows], dtype=float)
        report.update(_score_statistics(unit, rater, scores, raters, reference))
    else:
        if ratings.kind == "score":
            values = sorted({float(v) for _, _, v in ratings.rows})
            categories = [f"{v:g}" for v in values]
            position: dict[float | str, int] = {v: c for c, v in enumerate(values)}
            code = np.array([position[float(v)] for _, _, v in ratings.rows], dtype=np.int64)
            numeric: list[float] | None = values
        else:
            categories = ratings.categories
            position = {c: k for k, c in enumerate(categories)}
            code = np.array([position[v] for _, _, v in ratings.rows], dtype=np.int64)
            numeric = None
        is_step_labels = categories == list(LABEL_CODES)
        report["categories"] = categories
        report["statistics"] = agreement.label_statistics(
            unit, rater, code, n_units=len(items), rater_names=raters, categories=categories,
            ac1_categories=agreement.STEP_LABEL_CATEGORIES if is_step_labels else len(categories),
            metric=scale, values=numeric, correct=LABEL_CODES.index(CORRECT) if is_step_labels else None,
        )  # fmt: skip
        if reference:
            report["against_reference"] = _against_reference(
                unit, rater, code, len(items), raters, reference, categories
            )
    report["notes"] = _notes(unit, items, report)
    return report


def _against_reference(unit, rater, code, n_units, raters, reference, categories) -> dict:
    q = len(categories)
    ref = np.full(n_units, -1, dtype=np.int64)
    is_ref = rater == raters.index(reference)
    ref[unit[is_ref]] = code[is_ref]
    found = []
    for r, name in enumerate(raters):
        if name == reference:
            continue
        mine = rater == r
        rated = np.full(n_units, -1, dtype=np.int64)
        rated[unit[mine]] = code[mine]
        # Only the units this rater was given (rated at all) are compared.
        shared = (ref >= 0) & np.isin(np.arange(n_units), unit[mine])
        accuracy = agreement.accuracy_by_reference(ref[shared], rated[shared], q)
        found.append({
            "rater": name,
            "units": int(shared.sum()),
            "accuracy": accuracy["overall"],
            "accuracy_by_reference": dict(zip(categories, accuracy["per_category"], strict=True)),
            "cohen_kappa": agreement.cohen_kappa(ref[shared], rated[shared], q),
            "macro_f1": agreement.macro_f1(ref[shared], rated[shared], q),
        })  # fmt: skip
    return {"reference": reference, "raters": found}


def _score_statistics(unit, rater, scores, raters, reference) -> dict:
    order = np.lexsort((rater, unit))
    per_unit: dict[int, list[float]] = {}
    for u, s in zip(unit[order], scores[order], strict=True):
        per_unit.setdefault(int(u), []).append(float(s))
    groups = list(per_unit.values())
    pairable = [g for g in groups if len(g) >= 2]
    exact = sum(1 for g in pairable if max(g) == min(g))
    first, second = agreement.pair_rows(unit, rater)
    out: dict = {
        "statistics": {
            "krippendorff_alpha": agreement.krippendorff_alpha_scores(groups),
            "exact_agreement": proportion(exact, len(pairable)),
            "mean_absolute_difference": float(np.abs(scores[first] - scores[second]).mean()) if first.size else None,
            "units": {"total": len(groups), "single_rating": len(groups) - len(pairable), "pairable": len(pairable)},
        }
    }
    if reference:
        out["against_reference"] = {"reference": reference, "raters": []}
        ref_index = raters.index(reference)
        ref_scores = {int(u): float(s) for u, r, s in zip(unit, rater, scores, strict=True) if r == ref_index}
        for r, name in enumerate(raters):
            if r == ref_index:
                continue
            mine = [(ref_scores[int(u)], float(s)) for u, rr, s in zip(unit, rater, scores, strict=True)
                    if rr == r and int(u) in ref_scores]  # fmt: skip
            out["against_reference"]["raters"].append(score_agreement(mine) | {"rater": name})
    return out


def score_agreement(pairs: Sequence[tuple[float, float]]) -> dict:
    """Agreement of paired 0-1 scores (reference, rated): interval alpha, quadratic-weighted
    kappa on the scores rounded to tenths, kappa on the collapse at 0.5, mean absolute
    difference and Pearson's r. Also what checker_report uses for the paper's Table 6."""
    if not pairs:
        alpha = agreement.estimate(None, undefined=agreement.NO_PAIRS, metric="interval")  # as with pairs
        return {"units": 0, "krippendorff_alpha": alpha}
    ref = np.array([a for a, _ in pairs], dtype=float)
    rated = np.array([b for _, b in pairs], dtype=float)
    in_unit_range = bool(((ref >= 0) & (ref <= 1) & (rated >= 0) & (rated <= 1)).all())
    result: dict = {
        "units": len(pairs),
        "krippendorff_alpha": agreement.krippendorff_alpha_scores(list(zip(ref, rated, strict=True))),
        "mean_absolute_difference": float(np.abs(ref - rated).mean()),
        "pearson_r": agreement.pearson(ref, rated),
        "exact_agreement": proportion(int(np.isclose(ref, rated).sum()), len(pairs)),
    }
    if in_unit_range:
        tenths_ref, tenths_rated = np.rint(ref * 10).astype(int), np.rint(rated * 10).astype(int)
        table = agreement.pair_table(tenths_ref, tenths_rated, 11)
        result["weighted_kappa"] = agreement.weighted_kappa_table(table, values=np.arange(11) / 10)
        result["binary_kappa"] = agreement.cohen_kappa((ref >= 0.5).astype(int), (rated >= 0.5).astype(int), 2)
    return result


def _notes(unit: np.ndarray, items: list[str], report: dict) -> list[str]:
    notes = []
    counts = np.bincount(unit, minlength=len(items))
    single = [items[i] for i in np.flatnonzero(counts == 1)]
    if single:
        shown = ", ".join(single[:10]) + (f" and {len(single) - 10} more" if len(single) > 10 else "")
        notes.append(f"items with a single rating, which count for no agreement statistic ({len(single)}): {shown}")
    notes.extend(
        f"rater {usage['rater']!r} never used: {', '.join(usage['never_used'])}"
        for usage in report.get("statistics", {}).get("raters", [])
        if usage["never_used"]
    )
    return notes


def agreement_from_file(
    data: bytes | str,
    *,
    filename: str = "",
    categories: Sequence[str] | None = None,
    scale: str = "",
    reference: str = "",
    known_items: Iterable[str] | None = None,
) -> dict:
    """The one operation behind ``manage.py agreement`` and the API: file in, statistics out.
    Raises RatingsError (bad lines) or ValueError (bad options)."""
    if scale and scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r} (nominal, ordinal or interval)")
    ratings = read_ratings(data, filename=filename, categories=categories, known_items=known_items)
    return ratings_report(ratings, scale=scale, reference=clean(reference))
