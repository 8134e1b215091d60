from pem.alignment import align, similarity

GOLD = [
    "由图可知 AB = 3, BC = 4",
    "根据勾股定理 AC = \\sqrt{AB^2 + BC^2}",
    "所以 AC = 5",
    "答案为 5",
]


def test_identical_split_is_identity():
    result = align(GOLD, list(GOLD))
    assert result.kind == "identical"
    assert result.labels_for_gold(["CS", "KAE", "CE", "CS"]) == ["CS", "KAE", "CE", "CS"]
    assert result.unmatched_judge == []


def test_merged_judge_step_covers_both_gold_steps():
    judge = [GOLD[0], GOLD[1] + "，" + GOLD[2], GOLD[3]]
    result = align(GOLD, judge)
    assert not result.same_count and result.kind == "realigned"
    assert [j for j, _, _ in result.gold] == [0, 1, 1, 2]
    assert [how for _, _, how in result.gold].count("merged") == 1
    assert result.labels_for_gold(["CS", "CE", "CS"]) == ["CS", "CE", "CE", "CS"]


def test_split_judge_step_keeps_extra_steps_reported():
    judge = [GOLD[0], "根据勾股定理", "AC = \\sqrt{AB^2 + BC^2}", GOLD[2], GOLD[3]]
    result = align(GOLD, judge)
    assert result.gold[0][0] == 0 and result.gold[2][0] == 3 and result.gold[3][0] == 4
    assert result.gold[1][0] in (1, 2)
    # The other half of the split is reported, not dropped.
    assert len(result.unmatched_judge) == 1
    assert [p for p in result.as_pairs() if p[3] == "extra"]


def test_order_is_kept_even_when_a_later_step_repeats_text():
    judge = [GOLD[3], GOLD[0], GOLD[1], GOLD[2]]
    result = align(GOLD, judge)
    judge_positions = [j for j, _, how in result.gold if how == "match"]
    assert judge_positions == sorted(judge_positions)


def test_missing_judge_steps_are_none_not_shifted():
    result = align(GOLD, [GOLD[0]])
    labels = result.labels_for_gold(["ICE"])
    assert labels[0] == "ICE" and labels[1:] == [None, None, None]
    assert result.kind == "partial"
    assert align(GOLD, []).labels_for_gold([]) == [None] * 4


def test_rewritten_text_with_same_count_falls_back_to_position_and_says_so():
    judge = ["first", "second", "third", "fourth"]
    result = align(GOLD, judge)
    assert [how for _, _, how in result.gold] == ["positional"] * 4
    assert result.kind == "realigned"


def test_similarity_ignores_spacing_and_measures_the_shorter_text():
    assert similarity("A C = 5", "AC=5") == 1.0
    assert similarity("AC=5", "所以AC=5，答案为5") == 1.0
    assert similarity("", "") == 1.0 and similarity("", "x") == 0.0
