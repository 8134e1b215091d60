"""Never silent (issue 23 item 5): each thing the importer is unsure of is one warning on the import and a
flag on the questions next to it, worded in the reader's language (Chinese and English)."""

from __future__ import annotations

import re

import pytest
from django.utils import translation

from annotation.pdf.layout import Line
from annotation.pdf.notes import note_text
from annotation.pdf.segment import segment

LOST = "某同学用如图所示的装置研究小车的运动，打点计时器所接交流电的频率为 50 Hz。" * 6


def lines(*texts: str, page: int = 1) -> list[Line]:
    return [Line(text, (40, i * 20, 300, i * 20 + 12), page, (page, 0, 0, i * 20)) for i, text in enumerate(texts)]


CASES = {
    # a gap in the numbering: said once (not as a gap and again as a skip), both sides flagged
    "gap": (lines("一、解答题", "1．求甲的速度。", "2．求乙的速度。", "4．求丁的速度。"), ["2", "4"]),
    # an OCR page with numbering and nothing cut
    "page_uncut": (
        lines("一、解答题", "1．求甲的速度。", "2．求乙的速度。", page=1)
        + lines("9．丙的质量为多少？", "12．丁的质量为多少？", page=2)
        + lines("3．求戊的加速度。", page=3),
        ["2", "3"],
    ),
    "section_count": (lines("二、解答题（共5小题）", "1．求甲。", "2．求乙。"), ["1", "2"]),
    "answer_unmatched": (
        lines("一、选择题", "1．甲（  ）", "A．1 B．2", "3．丙（  ）", "A．1 B．2", "参考答案", "1．A 2．B 3．A"),
        ["1", "3"],
    ),
    "leftover": (
        lines(
            "一、选择题",
            "1．下列说法正确的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "二、实验题",
            LOST,
            "3．求小车的加速度。",
        ),
        ["1", "3"],
    ),  # fmt: skip
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_unsure_case_is_one_warning_flagging_its_neighbours_in_both_languages(code):
    parsed = segment(CASES[code][0])
    said = [n for n in parsed.notes if n["code"] == code]
    assert len(said) == 1, parsed.notes
    flagged = sorted(label for label, reasons in parsed.report["reasons"].items() if said[0] in reasons)
    assert flagged == CASES[code][1]
    with translation.override("zh-hans"):
        chinese = note_text(said[0])
    with translation.override("en"):
        english = note_text(said[0])
    assert re.search(r"[\u4e00-\u9fff]", chinese) and chinese != english and code not in (chinese, english)
    assert re.search(r"[A-Za-z]{3}", english)


def test_a_gap_is_said_once_not_also_as_a_skip():
    parsed = segment(CASES["gap"][0])
    assert [n["code"] for n in parsed.notes] == ["gap"] and parsed.report["gaps"] == ["3"]
    assert len(parsed.warnings) == 1


def test_a_long_jump_is_said_once_as_a_skip_flagging_both_sides():
    parsed = segment(lines("一、解答题", "1．求甲的速度。", "6．求己的速度。", "7．求庚的速度。", "8．求辛。"))
    assert [n["code"] for n in parsed.notes] == ["skipped"]
    assert parsed.notes[0]["params"] == {"missing": "2-5", "next": 6}
    assert parsed.report["suspects"] == ["1", "6"]


def test_text_and_no_question_is_a_warning_in_both_languages():
    parsed = segment(lines(*(["物理实验报告"] + [LOST] * 2)))
    assert parsed.questions == [] and [n["code"] for n in parsed.notes] == ["no_questions"]
    with translation.override("zh-hans"):
        assert re.search(r"[\u4e00-\u9fff]", note_text(parsed.notes[0]))
