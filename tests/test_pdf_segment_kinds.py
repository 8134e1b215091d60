"""Kinds of paper the importer was not tuned to, built here as PDFs (PyMuPDF's built-in Chinese font) or as
lines: what it cuts, and what it says where it is unsure. Each asserts on the kind, not on a file."""

from __future__ import annotations

import pymupdf
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import Flag, Question
from annotation.pdf import import_document, register_pdf_upload
from annotation.pdf.layout import Line
from annotation.pdf.segment import cn_value, segment
from tests.test_pdf_robust import analysis_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


def lines(*texts: str, page: int = 1) -> list[Line]:
    return [Line(text, (40, i * 20, 300, i * 20 + 12), page, (page, 0, 0, i * 20)) for i, text in enumerate(texts)]


def paper(*pages: list[tuple[float, str]], size: float = 11) -> bytes:
    """A one-column A4 paper: each page a list of (x, text) lines, 22 pt apart."""
    doc = pymupdf.open()
    for rows in pages:
        page = doc.new_page(width=595, height=842)
        for i, (x, text) in enumerate(rows):
            page.insert_text((x, 100 + 22 * i), text, fontname="china-s", fontsize=size)
    return doc.tobytes()


def codes(notes: list[dict]) -> list[str]:
    return [n["code"] for n in notes]


# --- never silent -----------------------------------------------------------------------


def test_a_paper_of_text_with_no_question_is_said():
    prose = ["某同学在实验室里观察到小车沿斜面下滑的过程，并记录了各个时刻小车的位置和速度。" for _ in range(6)]
    parsed = segment(lines("物理实验报告", *prose))
    assert parsed.questions == []
    assert parsed.notes == [{"code": "no_questions", "params": {"chars": 6 * len(prose[0]) + len("物理实验报告")}}]


def test_a_page_with_numbered_lines_and_no_question_cut_is_said_with_its_neighbours_flagged():
    first = lines("一、解答题", "1．求甲的速度。", "2．求乙的速度。", page=1)
    # Page 2 was read out of order (OCR): numbers that do not follow on are cut nowhere.
    second = lines("9．丙的质量为多少？", "12．丁的质量为多少？", page=2)
    third = lines("3．求戊的加速度。", page=3)
    parsed = segment(first + second + third)
    assert [q.number for q in parsed.questions] == [1, 2, 3]
    assert {"code": "page_uncut", "params": {"page": 2, "numbers": 2}} in parsed.notes
    reasons = parsed.report["reasons"]
    assert {"code": "page_uncut", "params": {"page": 2, "numbers": 2}} in reasons["2"] and reasons["3"]


def test_a_stated_count_not_met_is_a_note_on_the_first_and_last_question_of_the_section():
    parsed = segment(lines("二、解答题（共5小题）", "1．求甲。", "2．求乙。"))
    said = {"code": "section_count", "params": {"heading": "二、解答题（共5小题）", "stated": 5, "found": 2}}
    assert said in parsed.notes and said in parsed.report["reasons"]["1"] and said in parsed.report["reasons"]["2"]


def test_an_answer_with_no_question_flags_the_questions_on_either_side():
    parsed = segment(
        lines("一、选择题", "1．甲（  ）", "A．1 B．2", "3．丙（  ）", "A．1 B．2", "参考答案", "1．A 2．B 3．A")
    )
    said = {"code": "answer_unmatched", "params": {"number": 2}}
    assert said in parsed.notes
    assert said in parsed.report["reasons"]["1"] and said in parsed.report["reasons"]["3"]
    assert [q.answer for q in parsed.questions] == ["A", "A"]


def test_notes_are_flags_worded_in_the_readers_language(annotator, researcher, login):
    content = paper(
        [(60, "一、解答题（共3小题）"), (60, "1．求甲的速度是多少？"), (60, "2．求乙的速度是多少？")],
    )
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("short.pdf", content), user=annotator)
    summary = import_document(document=document, user=annotator)
    assert codes(summary.notes) == ["section_count"]
    assert summary.warnings == ["The section “一、解答题（共3小题）” states 3 questions; 2 were found."]
    flag = Flag.objects.filter(code=Flag.Code.IMPORT_GAP).first()
    assert flag is not None and flag.detail["notes"] == summary.notes
    client = login(researcher)
    page = client.get(f"/annotate/questions/{flag.question.hash_id}/").content.decode()
    assert "“一、解答题（共3小题）”一节注明 3 道题，实际找到 2 道。" in page and "were found" not in page
    client.post("/i18n/setlang/", {"language": "en"})
    page = client.get(f"/annotate/questions/{flag.question.hash_id}/").content.decode()
    assert "states 3 questions; 2 were found." in page


# --- numbering ---------------------------------------------------------------------------


def test_questions_said_to_be_missing_do_not_make_the_next_number_a_step():
    parsed = segment(lines("一、解答题", "1．求甲的速度。", "（缺第2-4题）", "5．求戊的速度。", "6．求己的速度。"))
    assert [q.number for q in parsed.questions] == [1, 5, 6]
    assert parsed.notes == [{"code": "stated_missing", "params": {"first": 2, "last": 4}}]


def test_a_jump_the_numbering_goes_on_from_is_a_new_question_with_a_lower_confidence():
    parsed = segment(lines("一、解答题", "1．求甲的速度。", "6．求己的速度。", "7．求庚的速度。", "8．求辛。"))
    assert [q.number for q in parsed.questions] == [1, 6, 7, 8]
    assert {"code": "skipped", "params": {"missing": "2-5", "next": 6}} in parsed.notes
    assert parsed.report["confidence"]["6"] < parsed.report["confidence"]["7"] == 1.0
    # A number the numbering does not go on from stays text (a step inside the question).
    parsed = segment(lines("一、解答题", "1．求甲的速度。", "2．求乙。", "9．这是第二题里的一行"))
    assert [q.number for q in parsed.questions] == [1, 2]


def test_a_paper_numbered_only_by_section_numerals_has_a_question_each_with_its_solution():
    content = paper(
        [
            (60, "一、已知函数f(x)=x+1，求f(2)的值。"),
            (60, "解：f(2)=2+1=3。"),
            (60, "二、已知数列的首项为1，公差为2，求第5项。"),
            (60, "解：第5项为1+4×2=9。"),
            (60, "三、证明：对任意实数x，都有x+|x|≥0。"),
            (60, "解：因为|x|≥-x，所以x+|x|≥0。"),
        ]
    )
    parsed = analysis_of(content).parsed
    assert [q.label for q in parsed.questions] == ["一", "二", "三"]
    assert [q.solution for q in parsed.questions] == ["f(2)=2+1=3。", "第5项为1+4×2=9。", "因为|x|≥-x，所以x+|x|≥0。"]
    assert parsed.questions[0].text == "已知函数f(x)=x+1，求f(2)的值。"
    assert cn_value("十二") == 12 and cn_value("二十") == 20 and cn_value("二十三") == 23


def test_a_numeral_heading_whose_questions_are_numbered_on_is_a_section():
    parsed = segment(lines("一、填空", "1．甲____", "2．乙____", "二、(10分)", "3．求丙的速度。"))
    assert [q.label for q in parsed.questions] == ["1", "2", "3"]


def test_question_numbers_printed_in_badges_on_their_own_line():
    # The badge sits at the left edge, its question's text on the next line.
    content = paper(
        [
            (60, "一、选择题"),
            (60, "1"),
            (60, "下列说法正确的是（  ）"),
            (60, "A．甲 B．乙 C．丙 D．丁"),
            (60, "2"),
            (60, "下列说法错误的是（  ）"),
            (60, "A．甲 B．乙 C．丙 D．丁"),
            (60, "3"),
            (60, "关于物体的运动，下列说法正确的是（  ）"),
            (60, "A．甲 B．乙 C．丙 D．丁"),
        ]
    )
    parsed = analysis_of(content).parsed
    assert [q.number for q in parsed.questions] == [1, 2, 3]
    assert [q.option_count for q in parsed.questions] == [4, 4, 4]
    assert parsed.questions[1].text == "下列说法错误的是（  ）"


def test_a_number_alone_inside_a_question_is_no_badge():
    rows = [
        Line("一、解答题", (40, 0, 300, 12), 1, (1, 0, 0, 0)),
        Line("1．已知x的值为", (40, 20, 300, 32), 1, (1, 0, 0, 20)),
    ]
    rows += [Line("2", (150, 40, 160, 52), 1, (1, 0, 0, 40)), Line("求y的值。", (40, 60, 300, 72), 1, (1, 0, 0, 60))]
    parsed = segment(rows)
    assert [q.number for q in parsed.questions] == [1]


def test_an_old_paper_without_options_or_blanks_is_no_regulation():
    """Outlined text keeps no underline: the blanks are spaces. Asked questions and scores show an exam."""
    parsed = segment(
        lines("1．一个物体从高处落下，求它落地时的速度。", "2．(10分)电路中电流多大？", "3．两个电阻串联，求总电阻：")
    )
    assert [q.number for q in parsed.questions] == [1, 2, 3] and parsed.notes == []


# --- answer keys ---------------------------------------------------------------------------


def test_an_answer_key_several_to_a_line_is_matched_back_by_number():
    paper_lines = ["一、选择题"]
    for number in range(1, 9):
        paper_lines += [f"{number}．第{number}题（  ）", "A．1 B．2 C．3 D．4"]
    paper_lines += ["参考答案", "1.B 2.A 3.C 4.D 5.A", "6.B 7.A 8.C"]
    parsed = segment(lines(*paper_lines))
    assert [q.answer for q in parsed.questions] == list("BACDABAC")


def test_an_answer_key_in_a_table_is_matched_back_by_number():
    paper_lines = ["一、选择题"]
    for number in range(1, 5):
        paper_lines += [f"{number}．第{number}题（  ）", "A．1 B．2 C．3 D．4"]
    row_by_row = segment(lines(*paper_lines, "参考答案", "题号 1 2 3 4", "答案 B A D C"))
    cell_by_cell = segment(lines(*paper_lines, "参考答案", "题号", "1", "2", "3", "4", "答案", "B", "A", "D", "C"))
    assert [q.answer for q in row_by_row.questions] == list("BADC")
    assert [q.answer for q in cell_by_cell.questions] == list("BADC")


def test_an_answer_key_in_a_pdf_table_several_to_a_line():
    questions = []
    for number in range(1, 7):
        questions += [(60, f"{number}．关于第{number}个物体，下列说法正确的是（  ）"), (80, "A．甲 B．乙 C．丙 D．丁")]
    content = paper([(60, "一、选择题"), *questions], [(60, "参考答案"), (60, "1．C 2．D 3．A 4．B 5．A 6．D")])
    parsed = analysis_of(content).parsed
    assert [q.answer for q in parsed.questions] == list("CDABAD")
    assert all(q.qtype == "multiple_choice" for q in parsed.questions)


@pytest.mark.parametrize("layout", ["one a line", "two a line", "four a line"])
def test_four_options_make_a_choice_question_whatever_their_layout(layout):
    options = {"one a line": ["A．甲", "B．乙", "C．丙", "D．丁"], "two a line": ["A．甲 B．乙", "C．丙 D．丁"],
               "four a line": ["A．甲 B．乙 C．丙 D．丁"]}[layout]  # fmt: skip
    parsed = segment(lines("1．关于物体的运动，下列说法正确的是", *options, "2．求物体的加速度。"))
    assert parsed.questions[0].qtype == "multiple_choice" and parsed.questions[0].option_count == 4
    assert parsed.questions[1].qtype == "free_response"


def test_the_import_keeps_the_confidence_of_each_cut_on_its_report():
    content = paper([(60, "一、解答题"), (60, "1．求甲的速度是多少？"), (60, "5．求戊的速度是多少？"),
                     (60, "6．求己的速度是多少？")])  # fmt: skip
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("jump.pdf", content))
    summary = import_document(document=document)
    assert Question.objects.count() == 3
    assert summary.report["confidence"] == {"1": 0.5, "5": 0.5, "6": 1.0}


# --- shared stems ----------------------------------------------------------------------------


def test_a_shared_passage_goes_with_every_question_it_introduces():
    material = "材料：某地区在过去十年中大力发展新能源汽车产业，产量逐年提高。"
    parsed = segment(
        lines(
            "一、选择题",
            "22．下列说法正确的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "阅读下列材料，回答23-25题。",
            material,
            "23．材料说明了什么（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "24．该地区产量的变化（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "25．下列推断合理的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "26．下列说法错误的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
        )
    )
    by_number = {q.number: q for q in parsed.questions}
    assert list(by_number) == [22, 23, 24, 25, 26]
    for number in (23, 24, 25):
        assert by_number[number].shared == f"阅读下列材料，回答23-25题。{material}"
        assert by_number[number].text.startswith(by_number[number].shared + "\n")
        assert by_number[number].option_count == 4
    assert material not in by_number[22].text and material not in by_number[26].text
    assert by_number[22].option_count == 4 and by_number[22].options[-1]["text"] == "丁"
    assert {"code": "shared_stem", "params": {"first": 23, "last": 25}} in parsed.notes
    assert parsed.report["leftover"] == []


def test_an_experiment_introducing_questions_without_a_range_is_leftover_text_said_not_lost():
    experiment = (
        "某同学用如图所示的装置研究小车的运动，打点计时器所接交流电的频率为50Hz，纸带上每5个点取一个计数点。" * 5
    )
    parsed = segment(
        lines("一、选择题", "1．下列说法正确的是（  ）", "A．甲 B．乙", "二、实验题", experiment, "2．求小车的加速度。")
    )
    assert [n["code"] for n in parsed.notes] == ["leftover"]
    assert parsed.report["suspects"] == ["1", "2"]


def test_a_number_beside_a_piecewise_function_stays_on_its_own_line():
    """The row above a piecewise function's brace overlaps the question number's box more than the rest
    of its line does: runs on one baseline are one line first, so the number starts the line (and its
    question) and the brace's rows stay in it, not in a line read before it (the question before)."""
    from annotation.pdf.layout import Span, group_lines, line_text

    spans = [
        Span("9", (36.0, 325.4, 41.2, 339.4), 336.2, 10.4),
        Span("．已知g(x)=", (41.4, 327.3, 150.0, 337.7), 336.2, 10.4),
        Span("f(x), x≥0", (168.8, 319.5, 218.9, 332.5), 329.4, 10.4),  # the brace's first row
        Span("−f(−x), x<0", (168.8, 332.5, 218.9, 345.5), 342.4, 10.4),  # and its second
        Span("，求x的取值范围", (229.0, 327.3, 377.6, 337.7), 336.2, 10.4),
    ]
    texts = [line_text(line) for line in group_lines(spans)]
    assert texts[0] == "9．已知g(x)= f(x), x≥0 ，求x的取值范围"


# --- figures by their caption ------------------------------------------------------------------


def test_figures_go_to_the_question_their_caption_or_label_names_before_position():
    from tests import fixtures_pdf

    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    rows = [
        "一、选择题",
        "1．如图1所示，小球静止在斜面上，下列说法正确的是（  ）",
        "A．甲 B．乙 C．丙 D．丁",
        "2．关于物体的运动，下列说法正确的是（  ）",
        "A．甲 B．乙 C．丙 D．丁",
    ]
    y = 80
    for text in rows:
        page.insert_text((60, y), text, fontname="china-s", fontsize=11)
        y += 22
    # Set after question 2's text (where there was room), captioned 图1: question 1's figure.
    page.insert_image(pymupdf.Rect(80, y, 200, y + 80), stream=fixtures_pdf.raster_figure_png())
    page.insert_text((125, y + 96), "图1", fontname="china-s", fontsize=10)
    y += 130
    for text in ["3．一物体从斜面上滑下，求它的加速度。", "4．一辆汽车在平直公路上行驶，求它的速度。"]:
        page.insert_text((60, y), text, fontname="china-s", fontsize=11)
        y += 22
    page.insert_image(pymupdf.Rect(80, y, 200, y + 80), stream=fixtures_pdf.raster_figure_png())
    page.insert_text((115, y + 96), "第3题图", fontname="china-s", fontsize=10)
    # And one with no caption: by position, the question being read where it stands (4).
    page.insert_image(pymupdf.Rect(300, y, 420, y + 80), stream=fixtures_pdf.raster_figure_png())
    analysis = analysis_of(doc.tobytes())
    numbers = [q.number for q in analysis.parsed.questions]
    assert numbers == [1, 2, 3, 4]
    placed = {numbers[i]: sorted(r.caption for r in regions) for i, regions in analysis.figures.items()}
    assert placed == {1: ["图1"], 3: ["第3题图"], 4: [""]}


def test_four_options_of_its_own_make_a_choice_question_in_a_section_of_another_type():
    parsed = segment(
        lines(
            "二、非选择题",
            "5．关于该实验，下列说法正确的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "6．某同学做实验。",
            "(1) 下列操作正确的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "(2) 求小车的加速度。",
        )
    )
    assert [q.qtype for q in parsed.questions] == ["multiple_choice", "free_response"]


def test_choices_numbered_like_sub_questions_in_a_choice_section_are_its_options():
    parsed = segment(
        lines(
            "二、选择题（每小题3分）",
            "1．小孩用10牛顿的力踢石块，使石块滑行了1米，则小孩对石块所做的功是：",
            "(1) 10焦耳；(2)2焦耳；(3)12焦耳；(4)条件不足，无法确定。",
            "2．对于一定质量的理想气体，正确的是：",
            "(1) 体积减小，压强一定增大；",
            "(2) 温度升高，压强一定增大；",
            "(3) 温度不变，压强一定不变；",
            "(4) 以上都不对。",
            "参考答案",
            "1．〔4〕 2．〔1〕",
        )
    )
    first, second = parsed.questions
    assert [o["label"] for o in first.options] == list("ABCD") and first.options[0]["text"] == "10焦耳"
    assert first.text == "小孩用10牛顿的力踢石块，使石块滑行了1米，则小孩对石块所做的功是："
    assert second.option_count == 4 and second.options[3]["text"] == "以上都不对"
    assert [first.answer, second.answer] == ["D", "A"]


def test_answers_printed_under_the_title_again_are_an_answer_section():
    parsed = segment(
        lines(
            "一、填空题（10分）",
            "1．穿过线圈的什么发生变化时，线圈中产生感应电动势？",
            "2．单摆从最大位移处向平衡位置运动时，速度怎样变化？",
            "二、（6分）本题有1个小题，把答案写在题中横线上。",
            "3．一物体从高处落下，求它落地时的速度。",
            "1978年普通高等学校招生全国统一考试",
            "1. 磁通量；磁通量的变化率.",
            "2. 大；小.",
            "3. 20m/s.",
        )
    )
    assert [q.number for q in parsed.questions] == [1, 2, 3]
    assert [q.answer for q in parsed.questions] == ["磁通量；磁通量的变化率.", "大；小.", "20m/s."]


def test_a_report_numbered_by_numerals_without_solutions_is_said_once_as_no_exam():
    headings = [f"{numeral}、关于第{numeral}部分的考试内容和要求的说明" for numeral in "一二三四"]
    parsed = segment(lines(*headings, *["本部分要求学生理解基本概念，掌握基本方法，能够运用所学知识分析问题。"] * 4))
    assert parsed.questions == [] and [n["code"] for n in parsed.notes] == ["not_exam"]


def test_a_spaced_answer_heading_and_keys_restating_the_sections_go_to_that_sections_questions():
    """An old scanned paper: numbers restart per section (一.1-3, 二.1-2), choices numbered (1)-(4), and
    at the end "答 案" (spaced out), the answers by section, several to a line ("二、1. (4)。 2. (2)。")."""
    choice = "二、（6分）本题有2个小题，每小题选出一个正确的答案，把它的号码填写在题后的方括号内。"
    content = paper(
        [
            (60, "一、（12分）本题有3个小题，把答案填写在题中横线上。"),
            (60, "1．电阻两端的电压是6伏特，通过的电流是2安培，电阻是____欧姆。"),
            (60, "2．照明用的交流电电压为220伏特，这是指电压的____值。"),
            (60, "3．一个质点简谐振动的振幅是0.10米，频率是____赫兹。"),
            (60, choice),
            (60, "1．一个小孩用10牛顿的力踢石块，使石块滑行了1米，则小孩对石块所做的功是："),
            (60, "(1)10焦耳；(2)2焦耳；(3)12焦耳；(4)条件不足，无法确定。"),
            (60, "2．对于一定质量的理想气体，正确的是："),
            (60, "(1)体积减小，压强一定增大；(2)温度升高，压强一定增大；"),
            (60, "(3)温度不变，压强一定不变；(4)密度不变，压强一定不变。"),
        ],
        [(60, "答 案"), (60, "一、1. 3。 2. 有效。 3. 2.5。"), (60, "二、1. (4)。 2. (2)。")],
    )
    parsed = analysis_of(content).parsed
    assert [q.label for q in parsed.questions] == ["一.1", "一.2", "一.3", "二.1", "二.2"]
    assert [q.answer for q in parsed.questions] == ["3。", "有效。", "2.5。", "D", "B"]
    assert [q.option_count for q in parsed.questions] == [0, 0, 0, 4, 4]


def test_a_sections_answer_with_no_question_read_goes_to_no_other_sections_question():
    parsed = segment(
        lines(
            "一、（8分）本题有2个小题，把答案填写在题中横线上。",
            "在真空中有两个点电荷，距离变为2r，则它们之间的作用力是____F。",
            "2．照明用的交流电电压为220伏特，这是指电压的____值。",
            "二、（6分）每小题选出一个正确的答案。",
            "1．小孩对石块所做的功是：",
            "(1)10焦耳；(2)2焦耳；(3)12焦耳；(4)条件不足，无法确定。",
            "2．对于一定质量的理想气体，正确的是：",
            "(1)甲；(2)乙；(3)丙；(4)丁。",
            "参考答案",
            "一、1. 1/4。 2. 有效。",
            "二、1. (4)。 2. (2)。",
        )
    )
    assert [q.label for q in parsed.questions] == ["一.2", "二.1", "二.2"]
    assert [q.answer for q in parsed.questions] == ["有效。", "D", "B"]
    assert "answer_unmatched" in codes(parsed.notes)


def test_a_question_asking_which_of_a_figures_drawings_has_as_many_unlabelled_options_as_its_section():
    parsed = segment(
        lines(
            "三、（9分）把每小题中所有正确的答案全部选出来，并把它们的号码填写在方括号内。",
            "1．粗糙的水平地面上有一木箱，则：",
            "(1)甲；(2)乙；(3)丙；(4)丁。",
            "2．电子垂直进入匀强磁场中，则：",
            "(1)甲；(2)乙；(3)丙；(4)丁。",
            "3．如图3所示，盒子上有两个插孔，图4画有内部电路结构的盒子中，哪几个是可能的？",
            "4．下列叙述中，符合物理学史事实的有：",
            "答案",
            "三、1. {2,3)。 2. (2,4)。 3. (1,4)。",
        )
    )
    first, second, pictures, fourth = parsed.questions
    assert [o["label"] for o in pictures.options] == list("ABCD") and {o["text"] for o in pictures.options} == {""}
    assert [first.answer, second.answer, pictures.answer] == ["BC", "BD", "AD"]
    assert fourth.options == []  # no figure asked of: no options made up
    assert codes(parsed.notes).count("option_unread") == 4
