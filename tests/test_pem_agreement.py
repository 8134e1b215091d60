"""Agreement statistics on plain data, checked against published worked examples.

Sources of the expected numbers:
- Cohen's 2x2: Wikipedia "Cohen's kappa", 50 grant applications (a=20, b=5, c=10, d=15):
  po = 0.7, pe = 0.5, kappa = 0.4.
- Cohen's 3x3 with its standard error, Scott's pi: irrCAC's ``cont3x3abstractors`` (Gwet 2014,
  Handbook of Inter-Rater Reliability, 4th ed.; irrCAC vignette): kappa 0.7964094, SE
  0.05891072; pi 0.7962397.
- Fleiss' kappa: Fleiss (1971) as in Wikipedia "Fleiss' kappa", 10 subjects x 14 raters,
  5 categories: P-bar 0.378, Pe 0.213, kappa 0.210.
- Krippendorff's alpha: Krippendorff (2011) "Computing Krippendorff's alpha-reliability",
  example C: 4 observers, 12 units, missing values: nominal 0.743, ordinal 0.815, interval 0.849.
- Gwet's AC1: the same data as irrCAC's ``cac.raw4raters`` (Gwet 2014): AC1 0.77544 with
  pa 0.8182 and pe 0.1903 (q = 5).
"""

import numpy as np
import pytest

from pem import agreement

N = None
# Krippendorff (2011), example C: rows are units 1-12, columns observers A-D.
KRIPPENDORFF_UNITS = [
    [1, 1, N, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [N, 5, 5, 5], [N, N, 1, 1], [N, 3, N, N],
]  # fmt: skip
# Fleiss (1971): subjects x categories, 14 raters each.
FLEISS = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]  # fmt: skip


def counts_of(units, categories):
    counts = np.zeros((len(units), len(categories)), dtype=int)
    for u, row in enumerate(units):
        for value in row:
            if value is not None:
                counts[u, categories.index(value)] += 1
    return counts


def krippendorff_counts():
    return counts_of(KRIPPENDORFF_UNITS, [1, 2, 3, 4, 5])


# --- Cohen's kappa ------------------------------------------------------------------------


def test_cohen_2x2_wikipedia_example_is_0_40():
    result = agreement.cohen_kappa_table(np.array([[20, 5], [10, 15]]))
    assert result["observed"] == pytest.approx(0.7)
    assert result["expected"] == pytest.approx(0.5)
    assert result["value"] == pytest.approx(0.4)
    assert result["n"] == 50 and result["undefined"] is None


def test_cohen_standard_error_by_hand_on_the_2x2_example():
    # Fleiss, Cohen & Everitt (1969), proportions p = [[.4, .1], [.2, .3]], rows .5/.5, columns .6/.4:
    # A = .4 (1 - 1.1 x .6)^2 + .3 (1 - .9 x .6)^2 = .04624 + .06348 = .10972
    # B = .6^2 (.1 x (.6 + .5)^2 + .2 x (.4 + .5)^2) = .36 x .283 = .10188
    # C = (.4 - .5 x .6)^2 = .01;  var = (A + B - C) / ((1 - .5)^2 x 50) = .2016 / 12.5 = .016128
    result = agreement.cohen_kappa_table(np.array([[20, 5], [10, 15]]))
    assert result["se"] == pytest.approx(np.sqrt(0.016128), abs=1e-9)
    low, high = result["ci95"]
    assert low == pytest.approx(0.4 - 1.959964 * 0.1269961, abs=1e-5)
    assert high == pytest.approx(0.4 + 1.959964 * 0.1269961, abs=1e-5)


def test_cohen_kappa_and_its_standard_error_match_gwets_3x3_example():
    table = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])
    result = agreement.cohen_kappa_table(table)
    assert result["value"] == pytest.approx(0.7964094, abs=1e-7)
    assert result["se"] == pytest.approx(0.05891072, abs=1e-7)


def test_cohen_kappa_from_rating_arrays_skips_missing_ratings():
    a = np.array([0, 0, 1, 1, -1, 0])
    b = np.array([0, 1, 1, 1, 0, -1])
    result = agreement.cohen_kappa(a, b, 2)
    # Four rated pairs: (0,0) (0,1) (1,1) (1,1): po .75, rows .25/.75... pe = .5 x .25 + .5 x .75 = .5
    assert result["n"] == 4
    assert result["value"] == pytest.approx((0.75 - 0.5) / 0.5)


# --- Scott's pi ----------------------------------------------------------------------------


def test_scott_pi_matches_gwets_3x3_example():
    assert agreement.scott_pi_table(np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]]))["value"] == pytest.approx(
        0.7962397, abs=1e-7
    )


def test_scott_pi_on_the_2x2_example_by_hand():
    # Pooled margins: yes (25 + 30) / 100 = .55, no .45; pe = .55^2 + .45^2 = .505;
    # pi = (.7 - .505) / (1 - .505) = .393939...
    result = agreement.scott_pi_table(np.array([[20, 5], [10, 15]]))
    assert result["expected"] == pytest.approx(0.505)
    assert result["value"] == pytest.approx(0.195 / 0.495)
    assert result["se"] > 0 and result["ci95"][0] < result["value"] < result["ci95"][1]


# --- Fleiss' kappa -----------------------------------------------------------------------------


def test_fleiss_1971_example_is_0_210():
    result = agreement.fleiss_kappa(np.array(FLEISS))
    assert round(result["value"], 3) == 0.210
    assert round(result["observed"], 3) == 0.378
    assert round(result["expected"], 3) == 0.213


def test_fleiss_jackknife_standard_error_is_the_leave_one_out_spread():
    counts = np.array(FLEISS)
    loo = [agreement.fleiss_kappa(np.delete(counts, u, axis=0))["value"] for u in range(len(counts))]
    n = len(loo)
    expected = np.sqrt((n - 1) / n * np.sum((np.array(loo) - np.mean(loo)) ** 2))
    assert agreement.fleiss_kappa(counts)["se"] == pytest.approx(expected)


def test_fleiss_with_two_raters_is_scotts_pi():
    # Fleiss' kappa reduces to Scott's pi for two raters: each unit of the 2x2 example.
    units = [[0, 0]] * 20 + [[0, 1]] * 5 + [[1, 0]] * 10 + [[1, 1]] * 15
    counts = counts_of(units, [0, 1])
    assert agreement.fleiss_kappa(counts)["value"] == pytest.approx(
        agreement.scott_pi_table(np.array([[20, 5], [10, 15]]))["value"]
    )


# --- Krippendorff's alpha ----------------------------------------------------------------------


def test_krippendorff_2011_nominal_alpha_with_missing_values_is_0_743():
    result = agreement.krippendorff_alpha(krippendorff_counts(), metric="nominal")
    assert round(result["value"], 3) == 0.743
    assert result["n"] == 11  # unit 12 has a single value and is not pairable


def test_krippendorff_2011_ordinal_and_interval_alphas():
    assert round(agreement.krippendorff_alpha(krippendorff_counts(), metric="ordinal")["value"], 3) == 0.815
    interval = agreement.krippendorff_alpha(krippendorff_counts(), metric="interval", values=[1, 2, 3, 4, 5])
    assert round(interval["value"], 3) == 0.849


def test_interval_alpha_on_raw_scores_equals_the_count_form():
    units = [[v for v in row if v is not None] for row in KRIPPENDORFF_UNITS]
    assert agreement.krippendorff_alpha_scores(units)["value"] == pytest.approx(0.8491071428571428)
    # Shifting and scaling the values (to 0-1 scores) leaves the interval alpha unchanged.
    scaled = [[(v - 1) / 4 for v in unit] for unit in units]
    assert agreement.krippendorff_alpha_scores(scaled)["value"] == pytest.approx(0.8491071428571428)


def test_alpha_of_identical_values_is_undefined_not_one():
    result = agreement.krippendorff_alpha_scores([[0.5, 0.5], [0.5, 0.5]])
    assert result["value"] is None and result["undefined"] == agreement.NO_VARIATION


# --- Gwet's AC1 --------------------------------------------------------------------------------


def test_gwet_ac1_matches_the_handbook_example_with_missing_ratings():
    result = agreement.gwet_ac1(krippendorff_counts(), 5)
    assert result["value"] == pytest.approx(0.77544, abs=5e-6)
    assert round(result["observed"], 4) == 0.8182
    assert round(result["expected"], 4) == 0.1903
    assert result["categories"] == 5


def test_gwet_ac1_resists_the_kappa_paradox_by_hand():
    # Gwet (2008)'s high-agreement case: 118 both +, 5 (+,-), 2 (-,+), 0 both -; n = 125.
    # pa = 118/125 = .944. Kappa: margins .984/.96 -> pe = .94528 -> kappa = -.0234.
    # AC1, q = 2: pi+ = (.984 + .96)/2 = .972; pe = 2 x .972 x .028 / (2 - 1) = .054432;
    # AC1 = (.944 - .054432) / (1 - .054432) = .94078.
    units = [[0, 0]] * 118 + [[0, 1]] * 5 + [[1, 0]] * 2
    counts = counts_of(units, [0, 1])
    assert agreement.gwet_ac1(counts, 2)["value"] == pytest.approx(0.889568 / 0.945568)
    assert agreement.cohen_kappa_table(np.array([[118, 5], [2, 0]]))["value"] == pytest.approx(-0.00128 / 0.05472)


def test_ac1_depends_on_the_stated_number_of_categories():
    # With q = 9 the seven unused labels add nothing to sum pi(1 - pi) but divide it by 8, not 1.
    units = [[0, 0]] * 118 + [[0, 1]] * 5 + [[1, 0]] * 2
    nine = np.zeros((125, 9), dtype=int)
    nine[:, :2] = counts_of(units, [0, 1])
    result = agreement.gwet_ac1(nine, agreement.STEP_LABEL_CATEGORIES)
    assert result["categories"] == 9
    assert result["expected"] == pytest.approx(0.054432 / 8)
    assert result["value"] == pytest.approx((0.944 - 0.054432 / 8) / (1 - 0.054432 / 8))


# --- undefined values ------------------------------------------------------------------------


def test_one_label_everywhere_makes_kappa_undefined_with_the_raw_agreement():
    counts = np.array([[2, 0, 0]] * 6)
    for result in (agreement.fleiss_kappa(counts), agreement.krippendorff_alpha(counts)):
        assert result["value"] is None and result["ci95"] is None
        assert result["undefined"] == agreement.ONE_CATEGORY
        assert result["observed"] == 1.0
    cohen = agreement.cohen_kappa_table(np.array([[6, 0], [0, 0]]))
    assert cohen["value"] is None and cohen["observed"] == 1.0
    # AC1's chance agreement is 0 here, so it is defined (and 1).
    assert agreement.gwet_ac1(counts, 3)["value"] == 1.0


def test_single_ratings_give_no_pairs():
    counts = np.array([[1, 0], [0, 1]])
    for result in (agreement.fleiss_kappa(counts), agreement.krippendorff_alpha(counts), agreement.gwet_ac1(counts, 2)):
        assert result["value"] is None and result["undefined"] == agreement.NO_PAIRS
    assert agreement.raw_agreement(counts)["value"] is None
    assert agreement.cohen_kappa_table(np.zeros((2, 2)))["undefined"] == agreement.NO_PAIRS


def test_few_units_give_a_value_without_an_interval():
    counts = np.array([[2, 0], [0, 2], [1, 1]])
    result = agreement.fleiss_kappa(counts)
    assert result["value"] is not None and result["se"] is None and result["ci95"] is None


# --- raw agreement, per label, weighted kappa ------------------------------------------------


def test_raw_agreement_is_a_wilson_proportion_of_unanimous_units():
    result = agreement.raw_agreement(krippendorff_counts())
    # Units 1, 3, 4, 5, 7, 9, 10, 11 are unanimous among the 11 pairable ones.
    assert (result["successes"], result["n"]) == (8, 11)
    low, high = result["ci95"]
    assert 0 < low < 8 / 11 < high < 1
    assert result["pairwise"] == pytest.approx(0.8181818, abs=1e-6)  # Gwet's pa


def test_category_kappa_is_the_kappa_of_the_collapsed_data():
    counts = krippendorff_counts()
    per_label = agreement.fleiss_category_kappas(counts)
    collapsed = np.stack([counts[:, 1], counts.sum(axis=1) - counts[:, 1]], axis=1)
    assert per_label[1]["value"] == pytest.approx(agreement.fleiss_kappa(collapsed)["value"])


def test_quadratic_weighted_kappa_with_two_categories_is_cohens():
    table = np.array([[20, 5], [10, 15]])
    assert agreement.weighted_kappa_table(table)["value"] == pytest.approx(0.4)


def test_quadratic_weighted_kappa_by_hand():
    # Table [[2, 1, 0], [0, 2, 1], [0, 0, 2]], n = 8; weights (i - j)^2.
    # Observed disagreement: (1 + 1) x 1 / 8 = .25. Rows 3/8, 3/8, 2/8; columns 2/8, 3/8, 3/8.
    # Expected: sum r_i c_j (i - j)^2 = [3x3x1 + 3x3x4 + 3x2x1 + 3x3x1 + 2x2x4 + 2x3x1] / 64 = 82/64.
    table = np.array([[2, 1, 0], [0, 2, 1], [0, 0, 2]])
    assert agreement.weighted_kappa_table(table)["value"] == pytest.approx(1 - 0.25 / (82 / 64))


# --- against a reference ---------------------------------------------------------------------


def test_accuracy_per_reference_label_micro_and_macro_with_missing_as_wrong():
    gold = np.array([0, 0, 0, 0, 1, 1, 2])
    judge = np.array([0, 0, 0, -1, 1, 0, 2])
    result = agreement.accuracy_by_reference(gold, judge, 3)
    assert (result["overall"]["successes"], result["overall"]["n"]) == (5, 7)
    assert [p["value"] for p in result["per_category"]] == [0.75, 0.5, 1.0]
    assert result["macro"] == pytest.approx((0.75 + 0.5 + 1.0) / 3)
    assert (result["coverage"]["successes"], result["coverage"]["n"]) == (6, 7)
    assert result["per_category"][2]["ci95"] is not None


def test_macro_f1_by_hand():
    gold = np.array([0, 0, 0, 0, 1, 1, 2])
    judge = np.array([0, 0, 0, -1, 1, 0, 2])
    # Category 0: tp 3, gold 4, predicted 4 -> 6/8. Category 1: tp 1, gold 2, predicted 1 -> 2/3. Category 2: 1.
    result = agreement.macro_f1(gold, judge, 3)
    assert result["value"] == pytest.approx((0.75 + 2 / 3 + 1) / 3)


def test_first_wrong_step_agreement_and_processbench_f1():
    correct = 0
    # Item 0: gold first error at step 2, judge at 2 (agree). Item 1: gold error at 1, judge none.
    # Item 2: gold all correct, judge all correct (agree). Item 3: all correct, judge flags step 3.
    item = np.array([0, 0, 0, 1, 1, 2, 2, 3, 3, 3])
    gold = np.array([0, 5, 5, 3, 0, 0, 0, 0, 0, 0])
    judge = np.array([0, 7, 0, 0, 0, 0, 0, 0, 0, 1])
    result = agreement.first_wrong_step(gold, judge, item, correct)
    assert (result["agreement"]["successes"], result["agreement"]["n"]) == (2, 4)
    assert result["erroneous"]["value"] == 0.5 and result["correct"]["value"] == 0.5
    assert result["f1"] == pytest.approx(0.5)


# --- everything on one set of ratings -------------------------------------------------------


def test_label_statistics_pools_pairs_and_reports_each_pair():
    # Three raters on four units; unit 3 rated by one only.
    unit = np.array([0, 0, 0, 1, 1, 2, 2, 2, 3])
    rater = np.array([0, 1, 2, 0, 1, 0, 1, 2, 2])
    code = np.array([0, 0, 1, 1, 1, 0, 0, 0, 1])
    result = agreement.label_statistics(
        unit, rater, code, n_units=4, rater_names=["a", "b", "c"], categories=["CS", "CE"], ac1_categories=2, correct=0
    )
    assert result["units"] == {"total": 4, "rated": 4, "single_rating": 1, "pairable": 3, "ratings": 9}
    # Pairs: unit 0 (a,b)=(0,0) (a,c)=(0,1) (b,c)=(0,1); unit 1 (a,b)=(1,1); unit 2 three (0,0).
    assert result["confusion"] == [[4, 2], [0, 1]]
    pairs = {tuple(p["raters"]): p["units"] for p in result["pairs"]}
    assert pairs == {("a", "b"): 3, ("a", "c"): 2, ("b", "c"): 2}
    assert result["raters"][2]["never_used"] == []
    assert result["gwet_ac1"]["categories"] == 2
    assert result["binary"]["categories"] == ["correct", "error"]
    assert result["fleiss_kappa"]["value"] == pytest.approx(
        agreement.fleiss_kappa(agreement.count_matrix(unit, code, 4, 2))["value"]
    )
