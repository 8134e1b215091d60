"""Conformance: the reference protocol reads every judge reply of the corpus
(tests/reference_replies.py) as the reference's own directly_eval / step_by_step_eval
do, run from ../shared/reference on the same text (their eval runs only there)."""

import math

import pytest

from inference.parsing import literal
from inference.parsing import reference as reader
from tests import reference_replies
from tests.reference_code import needs_reference, reference_judge

RECORD = {"format_answer": {"ground_truth": ["A"], "format_solution": "步骤1：…"}}


@pytest.fixture(scope="module")
def judge():
    return reference_judge()


def test_the_corpus_is_large_and_varied():
    direct, steps = reference_replies.direct_corpus(), reference_replies.step_corpus()
    assert len(direct) + len(steps) >= 300
    assert len(set(direct)) == len(direct) and len(set(steps)) > 0.95 * len(steps)


@needs_reference
def test_direct_replies_score_and_fail_as_the_reference(judge):
    outcomes = {"scored": 0, "failed": 0}
    for reply in reference_replies.direct_corpus():
        judged, score = judge.directly_eval(reply, RECORD)
        result = reader.read_direct_judgment(reply, RECORD)
        assert result.usable == (judged != ""), (reply, result.error)
        if result.usable:
            assert result.value["score"] == score and type(score) is float, reply
            assert result.value["judged"] == reader._plain(judged)
            outcomes["scored"] += 1
        else:
            assert result.error
            outcomes["failed"] += 1
    # The corpus tells both outcomes apart, many times each.
    assert outcomes["scored"] > 60 and outcomes["failed"] > 150


@needs_reference
def test_step_replies_score_fail_and_label_as_the_reference(judge):
    outcomes = {"scored": 0, "failed": 0, "partial": 0}
    for reply in reference_replies.step_corpus():
        judged, score = judge.step_by_step_eval(reply)
        result = reader.read_step_judgment(reply)
        assert result.usable == (judged != ""), (reply, result.error)
        if not result.usable:
            outcomes["failed"] += 1
            continue
        outcomes["scored"] += 1
        assert math.isclose(result.value["score"], score, rel_tol=0, abs_tol=0), reply
        # Each labelled step is the reference's item, in order, with its Chinese name.
        labelled = result.value["labels"]
        assert labelled == [item[1] for item in judged[: len(labelled)]]
        if len(labelled) < len(judged):
            outcomes["partial"] += 1
            assert result.notes
    assert outcomes["scored"] > 100 and outcomes["failed"] > 100 and outcomes["partial"] >= 5


def test_a_reply_that_would_run_code_is_refused_not_run(tmp_path):
    marker = tmp_path / "ran"
    reply = f"[__import__('pathlib').Path({str(marker)!r}).touch()]"
    assert not reader.read_step_judgment(reply).usable
    assert not reader.read_direct_judgment(f"<evaluation>[[],[],{reply}]</evaluation>").usable
    assert not marker.exists()


def test_sizes_are_capped():
    with pytest.raises(literal.LiteralError):
        literal.evaluate("9**9**9")
    with pytest.raises(literal.LiteralError):
        literal.evaluate("[0]*10**9")
    assert literal.evaluate("[1/2, -3, 2**10, 'a'+'b', (1,)*2]") == [0.5, -3, 1024, "ab", (1, 1)]


def test_the_record_must_carry_its_ground_truth_as_in_the_reference():
    reply = '<evaluation>[["A"],["A"],[1]]</evaluation>'
    assert reader.read_direct_judgment(reply, RECORD).value["score"] == 1.0
    assert not reader.read_direct_judgment(reply, {"question": "x"}).usable
