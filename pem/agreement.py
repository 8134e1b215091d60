"""Agreement statistics on plain data (numpy arrays of category codes or scores).

Nothing here reads the database: pem.reports feeds it from StepLabel rows and
pem.ratings from researchers' files. Formulas and references are in
docs/agreement.md; each function names its source.

Conventions
- Ratings are category codes 0..q-1 (index into a category list); -1 or None is
  a missing rating. Multi-rater statistics take a ``units x categories`` count
  matrix (how many raters put unit u in category c).
- An estimate is ``{"value", "se", "ci95", "undefined", ...}``. A value that
  cannot be computed (kappa when everyone used one label, no unit rated twice)
  is ``None`` with the reason in ``undefined``, never 0 or 1; the observed
  agreement travels with it so the reader still sees how often people agreed.
- Proportions are k12vista.stats.proportion (Wilson 95% intervals).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from django.utils.translation import gettext_noop  # the reasons are stored in English, shown translated

from k12vista.stats import Z_95, proportion

# Gwet's AC1 depends on the number of categories q; for the nine step labels it is
# fixed at nine whether or not every label occurs in the data (Gwet 2008).
STEP_LABEL_CATEGORIES = 9

# Below this many units a leave-one-out standard error says little; none is given.
MIN_JACKKNIFE_UNITS = 10

NO_PAIRS = gettext_noop("no unit was rated by two or more raters")
ONE_CATEGORY = gettext_noop("every rating is in the same category, so chance agreement is 1 and the ratio is 0/0")
NO_VARIATION = gettext_noop("the values do not vary, so the expected disagreement is 0")


def estimate(
    value: float | None,
    *,
    se: float | None = None,
    undefined: str | None = None,
    n: int = 0,
    observed: float | None = None,
    low: float = -1.0,
    high: float = 1.0,
    **extra,
) -> dict:
    """An estimate with a normal 95% interval from its standard error, clipped to [low, high]."""
    if value is None or not np.isfinite(value):
        value, se = None, None
        undefined = undefined or gettext_noop("not computable")
    else:
        undefined = None
    if se is not None and not np.isfinite(se):
        se = None
    ci95 = None
    if value is not None and se is not None:
        ci95 = [max(low, value - Z_95 * se), min(high, value + Z_95 * se)]
    return {
        "value": None if value is None else float(value),
        "se": None if se is None else float(se),
        "ci95": ci95,
        "undefined": undefined,
        "n": int(n),
        "observed": None if observed is None else float(observed),
        **extra,
    }


def _ratio(num, den):
    """num/den elementwise, nan where den is 0 (0/0 is undefined, not 0)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _chance_corrected(observed, expected):
    """(observed - expected) / (1 - expected); nan where chance agreement is 1."""
    den = 1 - np.asarray(expected, dtype=float)
    return _ratio(np.asarray(observed) - expected, np.where(np.abs(den) < 1e-12, 0.0, den))


def _jackknife(
    stat: Callable[..., np.ndarray], parts: Sequence[np.ndarray], weights: np.ndarray | None = None
) -> tuple[float, float | None]:
    """The statistic on all units and its leave-one-unit-out jackknife standard error.

    ``stat`` takes the column sums of ``parts`` (each has units on axis 0) and
    must broadcast over a leading axis, so all leave-one-out values are
    computed at once from ``total - part[u]`` (Efron & Tibshirani 1993, ch. 11).
    Units with identical parts have identical leave-one-out values, so callers
    pass each distinct unit once with ``weights``, how many units share it
    (distinct_units): with nine labels and two raters there are at most 45
    distinct units however many steps there are.
    """
    weights = np.ones(parts[0].shape[0]) if weights is None else np.asarray(weights, dtype=float)
    totals = [(p * weights[:, None]).sum(axis=0) for p in parts]
    value = float(stat(*totals))
    n = weights.sum()
    if n < MIN_JACKKNIFE_UNITS or not np.isfinite(value):
        return value, None
    loo = np.asarray(stat(*[t[None] - p for t, p in zip(totals, parts, strict=True)]), dtype=float)
    if not np.all(np.isfinite(loo)):
        return value, None
    mean = (weights * loo).sum() / n
    se = float(np.sqrt((n - 1) / n * (weights * (loo - mean) ** 2).sum()))
    return value, se


# --- building blocks ---------------------------------------------------------------------


def distinct_units(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a count matrix and how many units have each."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape[0] == 0:
        return counts, np.zeros(0, dtype=np.int64)
    base = int(counts.max()) + 1
    if counts.shape[1] * np.log2(base) < 62:  # each row fits one integer key: sort keys, not rows
        keys = counts @ (base ** np.arange(counts.shape[1], dtype=np.int64))
        _, first, weights = np.unique(keys, return_index=True, return_counts=True)
        return counts[first], weights
    return np.unique(counts, axis=0, return_counts=True)


def count_matrix(unit_index: np.ndarray, codes: np.ndarray, n_units: int, n_categories: int) -> np.ndarray:
    """``units x categories`` counts from parallel arrays of unit index and category code (-1 skipped)."""
    unit_index, codes = np.asarray(unit_index, dtype=np.int64), np.asarray(codes, dtype=np.int64)
    keep = codes >= 0
    flat = unit_index[keep] * n_categories + codes[keep]
    return np.bincount(flat, minlength=n_units * n_categories).reshape(n_units, n_categories)


def pair_table(a: np.ndarray, b: np.ndarray, n_categories: int) -> np.ndarray:
    """``q x q`` contingency table of two raters (rows a, columns b), units where both rated."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    both = (a >= 0) & (b >= 0)
    flat = a[both] * n_categories + b[both]
    return np.bincount(flat, minlength=n_categories * n_categories).reshape(n_categories, n_categories)


# --- raw agreement ----------------------------------------------------------------------


def raw_agreement(counts: np.ndarray) -> dict:
    """Share of units rated at least twice on which every rating is the same (Wilson interval),
    and the mean pairwise agreement (Fleiss's P-bar; equal to the share for two raters)."""
    m = counts.sum(axis=1)
    pairable = m >= 2
    unanimous = int(np.sum(counts[pairable].max(axis=1) == m[pairable]))
    result = proportion(unanimous, int(pairable.sum()))
    pairwise = _ratio((counts[pairable] * (counts[pairable] - 1)).sum(axis=1), m[pairable] * (m[pairable] - 1))
    result["pairwise"] = float(pairwise.mean()) if pairwise.size else None
    return result


# --- two raters ---------------------------------------------------------------------------


def cohen_kappa_table(table: np.ndarray) -> dict:
    """Cohen's (1960) kappa from a ``q x q`` table, with the large-sample standard error of
    Fleiss, Cohen & Everitt (1969) (the "ASE" of SAS PROC FREQ) and a normal 95% interval."""
    table = np.asarray(table, dtype=float)
    n = table.sum()
    if n == 0:
        return estimate(None, undefined=NO_PAIRS, n=0)
    p = table / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    po, pe = float(np.trace(p)), float(rows @ cols)
    if pe >= 1 - 1e-12:
        return estimate(None, undefined=ONE_CATEGORY, n=int(n), observed=po, expected=pe)
    kappa = (po - pe) / (1 - pe)
    diag = np.diag(p)
    a = np.sum(diag * (1 - (rows + cols) * (1 - kappa)) ** 2)
    off = p.copy()
    np.fill_diagonal(off, 0)
    # p_ij (p_.i + p_j.)^2: column margin of the row's category plus row margin of the column's.
    b = (1 - kappa) ** 2 * np.sum(off * (cols[:, None] + rows[None, :]) ** 2)
    c = (kappa - pe * (1 - kappa)) ** 2
    var = max(0.0, (a + b - c) / ((1 - pe) ** 2 * n))
    return estimate(kappa, se=float(np.sqrt(var)), n=int(n), observed=po, expected=pe)


def cohen_kappa(a: np.ndarray, b: np.ndarray, n_categories: int) -> dict:
    return cohen_kappa_table(pair_table(a, b, n_categories))


def scott_pi_table(table: np.ndarray) -> dict:
    """Scott's (1955) pi: chance agreement from the two raters' pooled margins. Standard error
    by the jackknife over units."""
    table = np.asarray(table, dtype=np.int64)
    n = int(table.sum())
    if n == 0:
        return estimate(None, undefined=NO_PAIRS, n=0)
    q = table.shape[0]
    # One part per distinct cell (a one-hot q x q table), weighted by the units in it.
    rows, cols = np.nonzero(table)
    parts = np.zeros((len(rows), q * q))
    parts[np.arange(len(rows)), rows * q + cols] = 1.0

    def stat(flat):
        t = flat.reshape(*flat.shape[:-1], q, q)
        total = t.sum(axis=(-2, -1))
        po = _ratio(np.trace(t, axis1=-2, axis2=-1), total)
        pooled = _ratio(t.sum(axis=-1) + t.sum(axis=-2), 2 * total[..., None])
        return _chance_corrected(po, (pooled**2).sum(axis=-1))

    po = np.trace(table) / n
    pooled = (table.sum(axis=1) + table.sum(axis=0)) / (2 * n)
    if (pooled**2).sum() >= 1 - 1e-12:
        return estimate(None, undefined=ONE_CATEGORY, n=n, observed=po)
    value, se = _jackknife(stat, [parts], weights=table[rows, cols])
    return estimate(value, se=se, n=n, observed=po, expected=float((pooled**2).sum()))


def weighted_kappa_table(table: np.ndarray, values: Sequence[float] | np.ndarray | None = None) -> dict:
    """Cohen's (1968) weighted kappa with quadratic disagreement weights (i - j)^2 on the
    category values (their positions when not given). With quadratic weights it approximates
    the intraclass correlation (Fleiss & Cohen 1973). No standard error is given."""
    table = np.asarray(table, dtype=float)
    n = table.sum()
    q = table.shape[0]
    if n == 0:
        return estimate(None, undefined=NO_PAIRS, n=0)
    v = np.arange(q, dtype=float) if values is None else np.asarray(values, dtype=float)
    weights = (v[:, None] - v[None, :]) ** 2
    p = table / n
    expected = np.outer(p.sum(axis=1), p.sum(axis=0))
    observed_d, expected_d = float((weights * p).sum()), float((weights * expected).sum())
    if expected_d == 0:
        return estimate(None, undefined=ONE_CATEGORY, n=int(n), observed=float(np.trace(p)))
    return estimate(1 - observed_d / expected_d, n=int(n), observed=float(np.trace(p)))


# --- many raters --------------------------------------------------------------------------


def _fleiss_stat(agree_sum, units, category_sums):
    p_bar = _ratio(agree_sum[..., 0], units[..., 0])
    p = _ratio(category_sums, category_sums.sum(axis=-1, keepdims=True))
    return _chance_corrected(p_bar, (p**2).sum(axis=-1))


def fleiss_kappa(counts: np.ndarray) -> dict:
    """Fleiss' (1971) kappa for any number of raters. Units may have different numbers of
    ratings (the usual generalisation: P_i over each unit's own pairs, p_j pooled); units
    rated once are left out. Standard error: jackknife over units."""
    counts = np.asarray(counts)
    counts = counts[counts.sum(axis=1) >= 2]
    n = len(counts)
    if n == 0:
        return estimate(None, undefined=NO_PAIRS, n=0)
    rows, weights = distinct_units(counts)
    rows = rows.astype(float)
    m = rows.sum(axis=1)
    agree = (rows * (rows - 1)).sum(axis=1) / (m * (m - 1))
    p = (weights[:, None] * rows).sum(axis=0) / (weights * m).sum()
    pe, p_bar = float((p**2).sum()), float((weights * agree).sum() / n)
    if pe >= 1 - 1e-12:
        return estimate(None, undefined=ONE_CATEGORY, n=n, observed=p_bar)
    value, se = _jackknife(_fleiss_stat, [agree[:, None], np.ones((len(m), 1)), rows], weights=weights)
    return estimate(value, se=se, n=n, observed=p_bar, expected=pe)


def fleiss_category_kappas(counts: np.ndarray) -> list[dict]:
    """Fleiss' (1971) kappa for each category against the rest (his kappa_j): the kappa of
    the data collapsed to "this label" vs "any other label"."""
    counts = np.asarray(counts)
    m = counts.sum(axis=1, keepdims=True)
    return [fleiss_kappa(np.hstack([counts[:, [j]], m - counts[:, [j]]])) for j in range(counts.shape[1])]


def gwet_ac1(counts: np.ndarray, n_categories: int) -> dict:
    """Gwet's (2008) AC1 for any number of raters with q = ``n_categories`` fixed:
    pa over units rated at least twice, pi_k the mean over all rated units of each unit's
    share of ratings in k, pe = sum pi_k (1 - pi_k) / (q - 1). Standard error: jackknife."""
    q = n_categories
    if q < 2:
        return estimate(None, undefined="AC1 needs at least two categories", n=0)
    counts = np.asarray(counts)
    counts = counts[counts.sum(axis=1) >= 1]
    rows, weights = distinct_units(counts)
    rows = rows.astype(float)
    m = rows.sum(axis=1)
    pairable = m >= 2
    n_pairable = int(weights[pairable].sum())
    if n_pairable == 0:
        return estimate(None, undefined=NO_PAIRS, n=0, categories=q)
    agree = np.where(pairable, (rows * (rows - 1)).sum(axis=1) / np.where(pairable, m * (m - 1), 1), 0.0)
    shares = rows / m[:, None]
    parts = [agree[:, None], pairable.astype(float)[:, None], shares, np.ones((len(m), 1))]

    def stat(agree_sum, pairable_n, share_sum, units):
        pa = _ratio(agree_sum[..., 0], pairable_n[..., 0])
        pi = _ratio(share_sum, units)
        return _chance_corrected(pa, (pi * (1 - pi)).sum(axis=-1) / (q - 1))

    value, se = _jackknife(stat, parts, weights=weights)
    pi = (weights[:, None] * shares).sum(axis=0) / weights.sum()
    return estimate(
        value,
        se=se,
        n=n_pairable,
        observed=float((weights * agree).sum() / n_pairable),
        expected=float((pi * (1 - pi)).sum() / (q - 1)),
        categories=q,
    )


# --- Krippendorff's alpha -----------------------------------------------------------------


def _ordinal_distance(marginals: np.ndarray) -> np.ndarray:
    """Krippendorff's ordinal metric: (sum of n_g from c to k - (n_c + n_k)/2)^2, broadcast over
    a leading axis of marginals."""
    cum = np.cumsum(marginals, axis=-1)
    q = marginals.shape[-1]
    c, k = np.meshgrid(np.arange(q), np.arange(q), indexing="ij")
    lo, hi = np.minimum(c, k), np.maximum(c, k)
    below = np.where(lo > 0, np.take(cum, np.maximum(lo - 1, 0), axis=-1), 0.0)
    span = np.take(cum, hi, axis=-1) - below
    return (span - (np.take(marginals, c, axis=-1) + np.take(marginals, k, axis=-1)) / 2) ** 2


def krippendorff_alpha(counts: np.ndarray, *, metric: str = "nominal", values: Sequence[float] | None = None) -> dict:
    """Krippendorff's alpha from a ``units x categories`` count matrix, missing ratings allowed
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"). ``metric`` is nominal,
    ordinal (categories in their given order) or interval (on ``values``, default 0..q-1).
    Standard error: jackknife over units (Krippendorff's own bootstrap is not used)."""
    counts = np.asarray(counts)
    counts = counts[counts.sum(axis=1) >= 2]
    n_units = len(counts)
    if n_units == 0:
        return estimate(None, undefined=NO_PAIRS, n=0, metric=metric)
    rows, weights = distinct_units(counts)
    rows = rows.astype(float)
    m = rows.sum(axis=1)
    q = rows.shape[1]
    if metric == "interval":
        v = np.arange(q, dtype=float) if values is None else np.asarray(values, dtype=float)
        return _alpha_interval_from_sums(m, rows @ v, rows @ (v**2), weights)
    if metric not in ("nominal", "ordinal"):
        raise ValueError(f"unknown metric {metric!r} (nominal, ordinal or interval)")
    # Coincidences of unit u: (n_uc n_uk - [c == k] n_uc) / (m_u - 1).
    per_unit = rows[:, :, None] * rows[:, None, :]
    per_unit[:, np.arange(q), np.arange(q)] -= rows
    per_unit /= (m - 1)[:, None, None]
    nominal = 1.0 - np.eye(q)

    def stat(flat):
        o = flat.reshape(*flat.shape[:-1], q, q)
        marg = o.sum(axis=-1)
        total = marg.sum(axis=-1)
        delta = nominal if metric == "nominal" else _ordinal_distance(marg)
        observed = (o * delta).sum(axis=(-2, -1))
        expected = (marg[..., :, None] * marg[..., None, :] * delta).sum(axis=(-2, -1))
        return 1 - (total - 1) * _ratio(observed, expected)

    coincidences = (weights[:, None, None] * per_unit).sum(axis=0)
    observed_agreement = float(np.trace(coincidences) / coincidences.sum())
    value, se = _jackknife(stat, [per_unit.reshape(len(rows), q * q)], weights=weights)
    if not np.isfinite(value):
        return estimate(None, undefined=ONE_CATEGORY, n=n_units, observed=observed_agreement, metric=metric)
    return estimate(value, se=se, n=n_units, observed=observed_agreement, metric=metric)


def _alpha_interval_from_sums(
    m: np.ndarray, sums: np.ndarray, squares: np.ndarray, weights: np.ndarray | None = None
) -> dict:
    """Interval alpha from each unit's count, sum and sum of squares of values.

    Within a unit, sum over ordered pairs i != j of (v_i - v_j)^2 = 2 (m S2 - S1^2), so
    D_o = sum_u [2 (m_u S2_u - S1_u^2) / (m_u - 1)] / n and D_e = 2 (n S2 - S1^2) / (n (n - 1)).
    """
    within = 2 * (m * squares - sums**2) / (m - 1)
    parts = [within[:, None], m[:, None], sums[:, None], squares[:, None]]

    def stat(within_sum, n, s1, s2):
        n, s1, s2, within_sum = n[..., 0], s1[..., 0], s2[..., 0], within_sum[..., 0]
        d_o = _ratio(within_sum, n)
        d_e = _ratio(2 * (n * s2 - s1**2), n * (n - 1))
        return 1 - _ratio(d_o, np.where(np.abs(d_e) < 1e-15, 0.0, d_e))

    n = len(m) if weights is None else int(np.sum(weights))
    value, se = _jackknife(stat, parts, weights=weights)
    if not np.isfinite(value):
        return estimate(None, undefined=NO_VARIATION, n=n, metric="interval")
    return estimate(value, se=se, n=n, metric="interval")


def krippendorff_alpha_scores(units: Sequence[Sequence[float]]) -> dict:
    """Interval alpha on raw numeric scores: one list of values per unit (missing left out)."""
    rows = [np.asarray(u, dtype=float) for u in units if len(u) >= 2]
    if not rows:
        return estimate(None, undefined=NO_PAIRS, n=0, metric="interval")
    m = np.array([len(r) for r in rows], dtype=float)
    return _alpha_interval_from_sums(m, np.array([r.sum() for r in rows]), np.array([(r**2).sum() for r in rows]))


# --- a rater against a reference ------------------------------------------------------------


def accuracy_by_reference(reference: np.ndarray, rated: np.ndarray, n_categories: int) -> dict:
    """Share of units where the rater gave the reference's category, per reference category
    and overall (micro: over all units, as the paper's Table 9 "Overall" is; its caption says
    "average", but its numbers are the micro accuracy, not the mean of the columns). A missing
    rating (-1) counts as wrong: it stays in the denominator."""
    reference, rated = np.asarray(reference), np.asarray(rated)
    has = reference >= 0
    reference, rated = reference[has], rated[has]
    right = reference == rated
    totals = np.bincount(reference, minlength=n_categories)
    hits = np.bincount(reference[right], minlength=n_categories)
    per = [proportion(int(hits[c]), int(totals[c])) for c in range(n_categories)]
    present = [p["value"] for p in per if p["value"] is not None]
    return {
        "overall": proportion(int(right.sum()), len(reference)),
        "per_category": per,
        "macro": float(np.mean(present)) if present else None,
        "coverage": proportion(int((rated >= 0).sum()), len(reference)),
    }


def macro_f1(reference: np.ndarray, rated: np.ndarray, n_categories: int) -> dict:
    """Mean F1 over the categories that occur in the reference or the ratings. A missing rating
    is a miss for the reference's category (a false negative, no false positive)."""
    reference, rated = np.asarray(reference), np.asarray(rated)
    has = reference >= 0
    reference, rated = reference[has], rated[has]
    tp = np.bincount(reference[reference == rated], minlength=n_categories).astype(float)
    gold = np.bincount(reference, minlength=n_categories).astype(float)
    predicted = np.bincount(rated[rated >= 0], minlength=n_categories).astype(float)
    present = (gold + predicted) > 0
    if not present.any():
        return {"value": None, "undefined": "no ratings", "per_category": [None] * n_categories}
    f1 = _ratio(2 * tp, gold + predicted)
    per = [float(f1[c]) if present[c] else None for c in range(n_categories)]
    return {"value": float(np.mean(f1[present])), "undefined": None, "per_category": per}


def first_wrong_step(reference: np.ndarray, rated: np.ndarray, item_index: np.ndarray, correct: int) -> dict:
    """ProcessBench's task on step labels: per item, the position of the first step not labelled
    ``correct`` (or none). Agreement is the share of items where rater and reference name the
    same step (or both none); ProcessBench's F1 is the harmonic mean of that accuracy on items
    the reference calls erroneous and on items it calls all correct (Zheng et al. 2024).

    Arrays are per step in order within each item; a missing rating is not an error label.
    """
    item_index = np.asarray(item_index)
    if item_index.size == 0:
        return {"agreement": proportion(0, 0), "erroneous": proportion(0, 0), "correct": proportion(0, 0), "f1": None}
    n_items = int(item_index.max()) + 1
    positions = np.arange(len(item_index))
    big = len(item_index) + 1

    def first(codes):
        wrong = (codes >= 0) & (codes != correct)
        found = np.full(n_items, big)
        np.minimum.at(found, item_index[wrong], positions[wrong])
        return found

    ref_first, rated_first = first(np.asarray(reference)), first(np.asarray(rated))
    present = np.bincount(item_index, minlength=n_items) > 0
    same = (ref_first == rated_first)[present]
    erroneous = (ref_first < big)[present]
    acc_err = proportion(int(same[erroneous].sum()), int(erroneous.sum()))
    acc_ok = proportion(int(same[~erroneous].sum()), int((~erroneous).sum()))
    f1 = None
    if acc_err["value"] is not None and acc_ok["value"] is not None and acc_err["value"] + acc_ok["value"] > 0:
        f1 = 2 * acc_err["value"] * acc_ok["value"] / (acc_err["value"] + acc_ok["value"])
    return {
        "agreement": proportion(int(same.sum()), int(present.sum())),
        "erroneous": acc_err,
        "correct": acc_ok,
        "f1": f1,
    }


def pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


# --- the usual set --------------------------------------------------------------------------


def people_statistics(counts: np.ndarray, *, n_categories_ac1: int, metric: str = "nominal", values=None) -> dict:
    """Every multi-rater statistic on one count matrix (the raters are exchangeable)."""
    return {
        "raw_agreement": raw_agreement(counts),
        "fleiss_kappa": fleiss_kappa(counts),
        "krippendorff_alpha": krippendorff_alpha(counts, metric=metric, values=values),
        "gwet_ac1": gwet_ac1(counts, n_categories_ac1),
    }


def two_rater_statistics(table: np.ndarray) -> dict:
    return {"cohen_kappa": cohen_kappa_table(table), "scott_pi": scott_pi_table(table)}


# --- everything about one set of nominal ratings ----------------------------------------------


def pair_rows(unit: np.ndarray, rater: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indexes (i, j) of every pair of ratings of the same unit, rater[i] before rater[j].

    Rows are sorted by (unit, rater); pairs are found by comparing each rating with the one
    d places later, for d up to the largest number of ratings on a unit.
    """
    unit, rater = np.asarray(unit, dtype=np.int64), np.asarray(rater, dtype=np.int64)
    if unit.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((rater, unit))
    sorted_unit = unit[order]
    most = int(np.bincount(sorted_unit).max())
    first, second = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for d in range(1, most):
        same = sorted_unit[:-d] == sorted_unit[d:]
        first.append(order[:-d][same])
        second.append(order[d:][same])
    return np.concatenate(first), np.concatenate(second)


def label_statistics(
    unit: np.ndarray,
    rater: np.ndarray,
    code: np.ndarray,
    *,
    n_units: int,
    rater_names: Sequence[str],
    categories: Sequence[str],
    ac1_categories: int,
    metric: str = "nominal",
    values: Sequence[float] | None = None,
    correct: int | None = None,
) -> dict:
    """All between-rater statistics of nominal (or ordinal) ratings: unit, rater and code are
    parallel integer arrays, one entry per rating (no missing codes).

    Cohen's kappa is defined for two fixed raters. With more raters overall it is given per
    pair of raters (on the units both rated) and pooled: every pair of ratings of a unit, the
    rater earlier in ``rater_names`` as the row. Fleiss, Krippendorff and AC1 treat raters as
    exchangeable and need no pairing. ``correct`` (the index of the correct label) adds the
    collapse correct vs error.
    """
    unit, rater, code = (np.asarray(x, dtype=np.int64) for x in (unit, rater, code))
    q = len(categories)
    counts = count_matrix(unit, code, n_units, q)
    per_unit = counts.sum(axis=1)
    result = people_statistics(counts, n_categories_ac1=ac1_categories, metric=metric, values=values)
    first, second = pair_rows(unit, rater)
    ra, rb, ca, cb = rater[first], rater[second], code[first], code[second]
    pooled = pair_table(ca, cb, q)
    result.update(two_rater_statistics(pooled))
    result["confusion"] = pooled.tolist()
    result["units"] = {
        "total": int(n_units),
        "rated": int((per_unit >= 1).sum()),
        "single_rating": int((per_unit == 1).sum()),
        "pairable": int((per_unit >= 2).sum()),
        "ratings": int(len(code)),
    }
    result["pairs"] = _per_pair(ra, rb, ca, cb, rater_names, q)
    result["raters"] = _rater_usage(rater, code, rater_names, categories)
    category_kappas = fleiss_category_kappas(counts)
    result["per_label"] = [
        {
            "label": categories[c],
            "ratings": int(counts[:, c].sum()),
            # Of the units someone put in this category, the share everyone did.
            "agreement": proportion(
                int(((counts[:, c] == per_unit) & (per_unit >= 2) & (counts[:, c] > 0)).sum()),
                int(((counts[:, c] > 0) & (per_unit >= 2)).sum()),
            ),
            "kappa": category_kappas[c],
        }
        for c in range(q)
    ]
    if correct is not None:
        binary = np.where(code == correct, 0, 1)
        binary_counts = np.stack([counts[:, correct], per_unit - counts[:, correct]], axis=1)
        result["binary"] = {
            "categories": ["correct", "error"],
            **people_statistics(binary_counts, n_categories_ac1=2),
            **two_rater_statistics(pair_table(binary[first], binary[second], 2)),
        }
    return result


def _per_pair(ra, rb, ca, cb, rater_names, q) -> list[dict]:
    if ra.size == 0:
        return []
    keys = ra * len(rater_names) + rb
    unique, inverse = np.unique(keys, return_inverse=True)
    tables = np.bincount(inverse * q * q + ca * q + cb, minlength=len(unique) * q * q).reshape(len(unique), q, q)
    pairs = []
    for key, table in zip(unique, tables, strict=True):
        a, b = divmod(int(key), len(rater_names))
        pairs.append({
            "raters": [rater_names[a], rater_names[b]],
            "units": int(table.sum()),
            "agreement": proportion(int(np.trace(table)), int(table.sum())),
            "cohen_kappa": cohen_kappa_table(table),
        })  # fmt: skip
    return pairs


def _rater_usage(rater, code, rater_names, categories) -> list[dict]:
    q = len(categories)
    usage = np.bincount(rater * q + code, minlength=len(rater_names) * q).reshape(len(rater_names), q)
    return [
        {
            "rater": name,
            "ratings": int(usage[r].sum()),
            "never_used": [categories[c] for c in range(q) if usage[r, c] == 0],
        }
        for r, name in enumerate(rater_names)
    ]
