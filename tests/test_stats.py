import pytest

from k12vista.stats import proportion, wilson_interval


def test_wilson_matches_newcombe_worked_examples():
    # Newcombe (1998) Table I, method 3: 81/263 -> 0.2553 to 0.3662; 15/148 -> 0.0624 to 0.1605.
    low, high = wilson_interval(81, 263)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    low, high = wilson_interval(15, 148)
    assert (round(low, 4), round(high, 4)) == (0.0624, 0.1605)


def test_wilson_at_the_ends_stays_inside_zero_one():
    # Newcombe: 0/20 -> 0 to 0.1611; 1/29 -> 0.0061 to 0.1718.
    low, high = wilson_interval(0, 20)
    assert low == 0 and round(high, 4) == 0.1611
    low, high = wilson_interval(20, 20)
    assert round(low, 4) == 0.8389 and high == 1
    low, high = wilson_interval(1, 29)
    assert (round(low, 4), round(high, 4)) == (0.0061, 0.1718)


def test_nothing_to_estimate_is_none_not_zero():
    assert wilson_interval(0, 0) is None
    assert proportion(0, 0) == {"successes": 0, "n": 0, "value": None, "ci95": None}
    with pytest.raises(ValueError):
        wilson_interval(5, 4)
