"""manage.py score_replies: the scoring job's reading and scoring of judge replies from a file,
one JSON line out per line in, and no database (these tests have none: a query would fail)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from inference import parsing
from tests import reference_replies
from tests.reference_code import needs_reference, reference_judge

RECORD = {"hash_id": "x", "type": "选择题", "question": "题<image>", "format_answer": {"ground_truth": ["B"],
          "format_solution": "步骤1：…"}}  # fmt: skip


def run(tmp_path, lines: list[bytes], *args: str) -> list[dict]:
    path = tmp_path / "replies.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = StringIO()
    call_command("score_replies", *args, str(path), stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def line(reply, record=RECORD) -> bytes:
    return json.dumps({"reply": reply, "record": record}, ensure_ascii=False).encode()


@needs_reference
def test_reference_direct_scores_equal_the_references(tmp_path):
    judge = reference_judge()
    replies = reference_replies.direct_corpus()
    printed = run(tmp_path, [line(r) for r in replies], "--protocol", "reference", "--mode", "direct")
    assert len(printed) == len(replies)
    for reply, out in zip(replies, printed, strict=True):
        judged, score = judge.directly_eval(reply, RECORD)
        if judged == "":
            assert out["score"] is None and out["error"], reply
        else:
            assert out == {"score": score, "error": None}, reply


@needs_reference
def test_reference_step_scores_and_labels_equal_the_references(tmp_path):
    judge = reference_judge()
    replies = reference_replies.step_corpus()
    printed = run(tmp_path, [line(r) for r in replies], "--protocol", "reference", "--mode", "step_by_step")
    for reply, out in zip(replies, printed, strict=True):
        judged, score = judge.step_by_step_eval(reply)
        if judged == "":
            assert (out["score"], out["labels"]) == (None, []) and out["error"], reply
        else:
            assert out["score"] == score and out["error"] is None
            assert out["labels"] == [item[1] for item in judged[: len(out["labels"])]]


def test_the_studio_protocol_reads_as_the_studio_parser(tmp_path):
    replies = [
        json.dumps({"reference_answers": ["B", "5"], "model_answers": ["B", "6"], "scores": [1, 0]}),
        '<evaluation>[["B"],["B"],[1]]</evaluation>',
        "no judgment here",
    ]
    printed = run(tmp_path, [line(r) for r in replies], "--mode", "direct")
    assert printed[0] == {"score": 0.5, "error": None}
    assert printed[1]["score"] == 1.0
    assert printed[2]["score"] is None and printed[2]["error"] == parsing.parse_direct_judgment(replies[2]).error
    steps = json.dumps({"steps": [{"step": "a", "label": "CS", "reason": ""}, {"step": "b", "label": "CE",
                                                                               "reason": "错"}]})  # fmt: skip
    assert run(tmp_path, [line(steps)], "--protocol", "studio", "--mode", "step_by_step") == [
        {"score": 0.5, "error": None, "labels": ["CS", "CE"]}
    ]


def test_bad_lines_are_reported_and_the_rest_goes_on(tmp_path):
    good = line('<evaluation>[["B"],["B"],[1]]</evaluation>')
    printed = run(
        tmp_path,
        [b"{not json", good, b"\xff\xfe", b"[1, 2]", b'{"record": {}}', line("<evaluation>[[],[],[1]]</evaluation>",
                                                                            record={"question": "q"}), good],
        "--protocol", "reference", "--mode", "direct",
    )  # fmt: skip
    assert [p["score"] for p in printed] == [None, 1.0, None, None, None, None, 1.0]
    assert "line 1" in printed[0]["error"] and "line 3" in printed[2]["error"] and "line 4" in printed[3]["error"]
    assert "ground_truth" in printed[5]["error"]


def test_a_missing_file_is_an_error_not_a_trace(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="cannot read"):
        call_command("score_replies", "--mode", "direct", str(tmp_path / "none.jsonl"), stdout=StringIO())
