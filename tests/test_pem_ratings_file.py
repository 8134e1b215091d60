"""Researchers' ratings files: reading them (every bad line reported, nothing guessed)
and the statistics they give."""

import json

import pytest

from pem.ratings import RatingsError, agreement_from_file, clean, read_ratings

KRIPPENDORFF = {  # Krippendorff (2011) example C, observers A-D over units 1-12 (None: missing)
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}


def krippendorff_rows(kind="score"):
    return [
        {"item": f"u{u + 1}", "rater": rater, kind: value if kind == "score" else str(value)}
        for rater, values in KRIPPENDORFF.items()
        for u, value in enumerate(values)
        if value is not None
    ]


def jsonl(rows) -> str:
    return "\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n"


def problems(data, **options) -> list[str]:
    with pytest.raises(RatingsError) as caught:
        read_ratings(data, **options)
    return caught.value.errors


# --- reading ---------------------------------------------------------------------------------


def test_it_reads_chinese_english_and_full_width_label_names():
    text = (
        "item,rater,label\n"
        "q1,ann,CS\n"
        "q1,bob,ＣＳ\n"  # full-width letters
        "q2,ann, 运算处理错误 \n"  # Chinese name with stray spaces
        "q2,bob,calculation error\n"  # English name, any case
        "q3,ann,Knowledge_Application_Error\n"
        "q3,bob,kae\u3000\n"  # ideographic space
    )
    ratings = read_ratings(text, filename="r.csv")
    assert [value for _, _, value in ratings.rows] == ["CS", "CS", "CE", "CE", "KAE", "KAE"]
    assert ratings.kind == "label" and ratings.format == "csv"
    assert ratings.raters == ["ann", "bob"] and ratings.items == ["q1", "q2", "q3"]


def test_it_reports_unknown_labels_with_their_line_and_guesses_nothing():
    errors = problems("item,rater,label\nq1,ann,CS\nq1,bob,Calc error\nq2,ann,计算错误\n", filename="r.csv")
    assert errors == ["line 3: unknown step label 'Calc error'", "line 4: unknown step label '计算错误'"]


def test_it_reports_missing_cells_duplicates_and_unknown_items_in_one_pass():
    text = (
        "item,rater,label\n"
        "q1,ann,CS\n"
        "q1,,CS\n"  # no rater
        ",bob,CS\n"  # no item
        "q1,bob,\n"  # no label
        "q1,ann,CE\n"  # second row for (q1, ann)
        "q9,ann,CS\n"  # not a known item
    )
    errors = problems(text, filename="r.csv", known_items=["q1", "q2"])
    assert errors == [
        "line 3: the rater is empty",
        "line 4: the item is empty",
        "line 5: the label (or score) is empty",
        "line 6: item 'q1' already has a rating by 'ann' (line 2)",
        "line 7: unknown item 'q9'",
    ]


def test_it_reads_jsonl_scores_and_refuses_bad_numbers_and_bad_json():
    good = read_ratings(jsonl([{"item": "u1", "rater": "a", "score": 0.5}, {"item": "u1", "rater": "b", "score": "1"}]))
    assert good.kind == "score" and good.format == "jsonl" and [v for *_, v in good.rows] == [0.5, 1.0]
    bad = (
        '{"item": "u1", "rater": "a", "score": "high"}\n{not json}\n[1, 2]\n'
        '{"item": "u2", "rater": "a", "score": NaN}\n'
    )
    assert problems(bad) == [
        "line 1: score 'high' is not a number",
        "line 2: not valid JSON (Expecting property name enclosed in double quotes)",
        "line 3: expected a JSON object",
        "line 4: score nan is not a number",
    ]


def test_it_refuses_a_mix_of_labels_and_scores_and_rows_with_both():
    text = jsonl([
        {"item": "u1", "rater": "a", "label": "CS"},
        {"item": "u1", "rater": "b", "score": 1},
        {"item": "u2", "rater": "a", "label": "CS", "score": 1},
    ])  # fmt: skip
    assert problems(text) == ["line 2: a score in a file of labels", "line 3: give a label or a score, not both"]


def test_it_refuses_a_file_without_the_needed_columns_or_ratings():
    assert problems("who,what\nq1,CS\n", filename="r.csv") == [
        "line 1: the header needs columns item, rater and label or score"
    ]
    assert problems("item,rater,label\n", filename="r.csv") == ["the file has no ratings"]
    assert problems(b"\xff\xfeitem", filename="r.csv") == ["the file is not UTF-8 text (byte 0)"]


def test_it_accepts_a_byte_order_mark_and_header_case():
    ratings = read_ratings("\ufeffItem, Rater ,LABEL\nq1,a,CS\n".encode(), filename="r.csv")
    assert ratings.rows == [("q1", "a", "CS")]


def test_it_matches_a_given_category_list_only():
    ratings = read_ratings("item,rater,label\nq1,a,Yes\nq1,b,ｎｏ\n", filename="r.csv", categories=["yes", "no"])
    assert [v for *_, v in ratings.rows] == ["yes", "no"] and ratings.categories == ["yes", "no"]
    errors = problems("item,rater,label\nq1,a,maybe\n", filename="r.csv", categories=["yes", "no"])
    assert errors == ["line 2: unknown label 'maybe' (expected one of yes, no)"]


def test_clean_normalises_full_width_and_trims():
    assert clean("\u3000ＫＡＥ ") == "KAE" and clean(None) == ""


# --- statistics -----------------------------------------------------------------------------


def test_scores_on_the_krippendorff_example_give_the_published_alphas():
    rows = krippendorff_rows("score")
    assert round(agreement_from_file(jsonl(rows))["statistics"]["krippendorff_alpha"]["value"], 3) == 0.849
    nominal = agreement_from_file(jsonl(rows), scale="nominal")
    assert nominal["categories"] == ["1", "2", "3", "4", "5"]
    assert round(nominal["statistics"]["krippendorff_alpha"]["value"], 3) == 0.743
    assert round(nominal["statistics"]["gwet_ac1"]["value"], 5) == 0.77544  # q = the 5 values
    ordinal = agreement_from_file(jsonl(rows), scale="ordinal")
    assert round(ordinal["statistics"]["krippendorff_alpha"]["value"], 3) == 0.815


def test_labels_with_a_category_list_use_that_many_categories_for_ac1():
    rows = krippendorff_rows("label")
    report = agreement_from_file(jsonl(rows), categories=["1", "2", "3", "4", "5"])
    stats = report["statistics"]
    assert round(stats["krippendorff_alpha"]["value"], 3) == 0.743
    assert stats["gwet_ac1"]["categories"] == 5
    assert "binary" not in stats  # the correct/error collapse only applies to the step labels
    assert "items with a single rating, which count for no agreement statistic (1): u12" in report["notes"]


def test_step_labels_state_nine_categories_and_collapse_to_correct_vs_error():
    text = "item,rater,label\n" + "".join(
        f"s{i},a,{a}\ns{i},b,{b}\n"
        for i, (a, b) in enumerate([("CS", "CS"), ("CE", "KAE"), ("CS", "CE"), ("HE", "HE")])
    )
    stats = agreement_from_file(text, filename="r.csv")["statistics"]
    assert stats["gwet_ac1"]["categories"] == 9
    assert stats["binary"]["gwet_ac1"]["categories"] == 2
    # Collapsed: (c,c) (e,e) (c,e) (e,e): 3 of 4 agree.
    assert (stats["binary"]["raw_agreement"]["successes"], stats["binary"]["raw_agreement"]["n"]) == (3, 4)
    assert [row["label"] for row in stats["per_label"]][:2] == ["CS", "ICE"]


def test_all_labels_identical_gives_undefined_kappa_and_the_raw_agreement():
    text = "item,rater,label\n" + "".join(f"s{i},a,CS\ns{i},b,CS\n" for i in range(5))
    report = agreement_from_file(text, filename="r.csv")
    kappa = report["statistics"]["cohen_kappa"]
    assert kappa["value"] is None and kappa["undefined"] and kappa["observed"] == 1.0
    assert report["statistics"]["raw_agreement"]["value"] == 1.0
    assert "rater 'a' never used: ICE, QM, LRK, KAE, LRE, HE, CE, IAE" in report["notes"]
    json.dumps(report, allow_nan=False)  # no NaN sneaks into the JSON


def test_a_single_rater_gives_no_statistic_but_a_clear_report():
    report = agreement_from_file("item,rater,label\ns1,a,CS\ns2,a,CE\n", filename="r.csv")
    assert report["statistics"]["fleiss_kappa"]["value"] is None
    assert report["statistics"]["units"]["single_rating"] == 2
    json.dumps(report, allow_nan=False)


def test_a_reference_rater_is_compared_with_each_other_rater():
    text = "item,rater,label\n" + "".join(
        f"s{i},gold,{g}\ns{i},judge,{j}\n"
        for i, (g, j) in enumerate([("CS", "CS"), ("CS", "CE"), ("CE", "CE"), ("KAE", "CE")])
    )
    report = agreement_from_file(text, filename="r.csv", reference="gold")
    (judge,) = report["against_reference"]["raters"]
    assert judge["rater"] == "judge" and judge["units"] == 4
    assert (judge["accuracy"]["successes"], judge["accuracy"]["n"]) == (2, 4)
    assert judge["accuracy_by_reference"]["CS"]["value"] == 0.5
    assert judge["accuracy_by_reference"]["KAE"]["value"] == 0.0
    assert judge["accuracy_by_reference"]["ICE"]["value"] is None


def test_score_files_compare_raters_with_a_reference():
    rows = [{"item": f"r{i}", "rater": "expert", "score": e} for i, e in enumerate([0, 0.5, 1, 1])]
    rows += [{"item": f"r{i}", "rater": "judge", "score": j} for i, j in enumerate([0, 0.5, 1, 0.5])]
    report = agreement_from_file(jsonl(rows), reference="expert")
    (judge,) = report["against_reference"]["raters"]
    assert judge["units"] == 4 and judge["mean_absolute_difference"] == pytest.approx(0.125)
    assert judge["binary_kappa"]["value"] == pytest.approx(1.0)  # all on the same side of 0.5
    assert judge["weighted_kappa"]["value"] is not None


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="unknown scale"):
        agreement_from_file("item,rater,label\ns1,a,CS\n", filename="r.csv", scale="ratio")
    with pytest.raises(ValueError, match="reference rater 'nobody'"):
        agreement_from_file("item,rater,label\ns1,a,CS\n", filename="r.csv", reference="nobody")
