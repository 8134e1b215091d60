"""How a paper numbers its questions, and the page geometry that keeps the numbers in order: each test builds
the kind of paper (as lines, or as a PDF with PyMuPDF's built-in fonts) and asserts what is cut from it."""

from __future__ import annotations

import pymupdf

from annotation.pdf import reading
from annotation.pdf.layout import Line, find_gutters
from annotation.pdf.segment import segment
from tests.test_pdf_robust import analysis_of
from tests.test_pdf_segment_kinds import lines

CHOICES = "A．甲 B．乙 C．丙 D．丁"


def test_questions_numbered_in_brackets_running_on_are_questions_and_their_key_is_matched_back():
    parsed = segment(
        lines(
            "注意事项：",
            "1．答卷前，考生务必将自己的姓名填写在答题卡上。",
            "2．考试结束后，将本试卷和答题卡一并交回。",
            *[row for n in range(7, 12) for row in (f"（{n}）下列关于第{n}种物质的说法正确的是（）", CHOICES)],
            "参考答案",
            "7．A 8．B 9．C 10．D 11．A",
        )
    )
    assert [q.number for q in parsed.questions] == [7, 8, 9, 10, 11]
    assert [q.option_count for q in parsed.questions] == [4] * 5
    assert [q.answer for q in parsed.questions] == ["A", "B", "C", "D", "A"]
    assert parsed.questions[0].text == "下列关于第7种物质的说法正确的是（）"


def test_bracketed_numbers_inside_a_numbered_item_stay_its_parts():
    """Sub-questions (1)-(5) between question 1 and question 2, an outline's points (1)-(6) between its
    items 1． and 2．: the bracketed run is enclosed by the dot numbers, so it numbers parts, not questions."""
    parts = [f"（{n}）求第{n}个量的值；" for n in range(1, 6)]
    parsed = segment(lines("一、解答题", "1．已知某物体做匀加速直线运动。", *parts, "2．求该物体的位移。"))
    assert [q.number for q in parsed.questions] == [1, 2]
    assert parsed.questions[0].text.count("(") == 5
    points = [f"（{n}）第{n}个考点的内容要求" for n in range(1, 7)]
    outline = segment(lines("五、考试内容", "1．数与式", *points, "2．方程与不等式", *points, "3．函数"))
    assert not any(q.number > 3 for q in outline.questions)


def test_a_question_numbered_past_the_notices_points_ends_the_notice():
    parsed = segment(
        lines(
            "注意事项：",
            "1．答卷前，考生务必将自己的姓名填写在答题卡上。",
            "2．考试结束后，将本试卷和答题卡一并交回。",
            "6．下列说法正确的是（）",
            CHOICES,
            "7．下列说法错误的是（）",
            CHOICES,
        )
    )
    assert [q.number for q in parsed.questions] == [6, 7]


def test_a_paper_numbered_by_numerals_with_its_solutions_in_an_answer_section():
    parsed = segment(
        lines(
            "一、已知函数f(x)=x+1，则f(2)的值为多少，请写出过程。",
            "二、已知数列的首项为1，公差为2，则第5项为多少，请写出过程。",
            "三、已知x为实数，比较x+|x|与0的大小，请写出过程。",
            "参考答案",
            "一、解：f(2)=2+1=3。",
            "二、解：第5项为1+4×2=9。",
            "三、解：因为|x|≥-x，所以x+|x|≥0。",
        )
    )
    assert [q.label for q in parsed.questions] == ["一", "二", "三"]
    assert all(q.solution for q in parsed.questions)


def test_a_paper_numbered_by_numerals_after_a_notice_whose_items_ask_without_solutions():
    parsed = segment(
        lines(
            "注意事项：",
            "1．答卷前，考生务必将自己的姓名填写在答题卡上。",
            "2．考试结束后，将本试卷和答题卡一并交回。",
            "一、已知集合A={1,2}，则A的子集的个数为，请写出判断的过程。",
            "二、一物体静止在水平地面上，拉力对它做的功为，请写出判断的过程。",
            "三、某农场的鼠大量繁殖吸引鹰前来捕食，下列叙述错误的是，请写出判断的过程。",
        )
    )
    assert [q.label for q in parsed.questions] == ["一", "二", "三"]


def test_a_number_in_the_worked_solution_of_a_numeral_paper_starts_no_question():
    parsed = segment(
        lines(
            "一、执行如图的程序框图，输出的S为多少，请写出判断的过程。",
            "【详解】解：第一次循环S=1，第二次循环S=2，",
            "3 .故选：B。",
            "二、一物体静止在水平地面上，求拉力做的功，请写出判断的过程。",
            "【详解】解：由动能定理得W=2J。",
        )
    )
    assert [q.label for q in parsed.questions] == ["一", "二"]
    assert "故选" in parsed.questions[0].solution


def _a3_two_columns(header: list[tuple[float, str]]) -> bytes:
    """An A3 landscape page of two columns whose lines face each other, and a header line in the margin."""
    doc = pymupdf.open()
    page = doc.new_page(width=1191, height=842)
    for x, text in header:
        page.insert_text((x, 40), text, fontname="china-s", fontsize=10)
    for column, first in ((60, 1), (610, 6)):
        for i in range(5):
            y = 120 + 60 * i
            stem = f"{first + i}．下列关于第{first + i}题的说法正确的是（）"
            page.insert_text((column, y), stem, fontname="china-s", fontsize=11)
            page.insert_text((column + 20, y + 20), "A．甲  B．乙  C．丙  D．丁", fontname="china-s", fontsize=11)
    return doc.tobytes()


def test_a_gutter_crossed_by_one_off_centre_header_line_still_parts_the_columns():
    # The header crosses the gutter's right part: its emptiest stretch (left of the header) is no column edge.
    content = _a3_two_columns([(360, "育才中学二〇二四学年度高三年级第一次模拟考试")])
    parsed = analysis_of(content).parsed
    assert [q.number for q in parsed.questions] == list(range(1, 11))
    assert all(q.option_count == 4 for q in parsed.questions)


def test_figure_captions_beside_the_text_make_no_column():
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for i in range(12):
        page.insert_text((56, 120 + 20 * i), "已知某物体做匀加速直线运动，求加速度。", fontname="china-s", fontsize=11)
    for i, caption in enumerate(["第3题图", "图4", "第5题图", "题图"]):
        page.insert_text((470, 130 + 60 * i), caption, fontname="china-s", fontsize=9)
    with pymupdf.open("pdf", doc.tobytes()) as pdf:
        text = reading.text_layer(pdf.load_page(0), 1)
    assert find_gutters(text.spans, text.width) == []


def test_a_number_at_the_top_of_two_pages_is_a_question_and_a_headers_year_is_not():
    """Question lines at the same place on two pages ("16" "．下列说法…", "20" "．下列说法…") repeat as "#"
    and the same words: they start questions all the same. A year inside a header repeated on every page
    is the header's."""
    doc = pymupdf.open()
    for first in (16, 20):
        page = doc.new_page(width=595, height=842)
        page.insert_text((200, 40), "育才中学", fontname="china-s", fontsize=9)
        page.insert_text((236, 40), "2024", fontname="helv", fontsize=9)
        page.insert_text((257, 40), "学年度高三模拟考试", fontname="china-s", fontsize=9)
        for i in range(4):
            y = 70 + 120 * i
            page.insert_text((56, y), str(first + i), fontname="helv", fontsize=11)
            page.insert_text((68, y), "．下列说法正确的是（）", fontname="china-s", fontsize=11)
            page.insert_text((76, y + 20), "A．甲  B．乙  C．丙  D．丁", fontname="china-s", fontsize=11)
    parsed = analysis_of(doc.tobytes()).parsed
    assert [q.number for q in parsed.questions] == list(range(16, 24))
    assert [q.text for q in parsed.questions] == ["下列说法正确的是（）"] * 8


def test_a_caption_whose_number_is_set_in_another_font_is_the_figures_not_the_questions():
    """A caption "第" "4" "题图": Word and typesetters set its digits in a Latin font, three runs in all."""
    from tests import fixtures_pdf

    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 80), "3．一物体从斜面上滑下，求它的加速度。", fontname="china-s", fontsize=11)
    page.insert_text((60, 102), "4．如图所示，一辆汽车在平直公路上行驶，求它的速度。", fontname="china-s", fontsize=11)
    page.insert_image(pymupdf.Rect(80, 120, 200, 200), stream=fixtures_pdf.raster_figure_png())
    page.insert_text((115, 216), "第", fontname="china-s", fontsize=10)
    page.insert_text((125, 216), "4", fontname="helv", fontsize=10)
    page.insert_text((131, 216), "题图", fontname="china-s", fontsize=10)
    page.insert_text((60, 250), "5．一个小球从高处落下，求它落地的时间。", fontname="china-s", fontsize=11)
    analysis = analysis_of(doc.tobytes())
    questions = analysis.parsed.questions
    assert [q.number for q in questions] == [3, 4, 5]
    assert questions[1].text == "如图所示，一辆汽车在平直公路上行驶，求它的速度。"
    placed = {questions[i].number: [r.caption for r in regions] for i, regions in analysis.figures.items()}
    assert placed == {4: ["第4题图"]}


def test_option_a_about_the_set_a_is_an_option_and_points_a_b_are_a_stem():
    parsed = segment(lines("5．已知集合A={x|x>0}，B={x|x<1}，则（）", "A、A∩B=∅", "B、A∪B=R", "C、B⊆A", "D、A⊆B"))
    assert [o["text"] for o in parsed.questions[0].options] == ["A∩B=∅", "A∪B=R", "B⊆A", "A⊆B"]
    parsed = segment(
        lines("5．A、B两地相距10 km，甲从A地出发，需要的时间为（）", "A．1 h", "B．2 h", "C．3 h", "D．4 h")
    )
    assert parsed.questions[0].text.startswith("A、B两地") and parsed.questions[0].option_count == 4


def test_a_blank_after_statements_proven_in_its_text_is_a_fill_in():
    parsed = segment(lines("13．证明DNA是遗传物质的实验是________①豌豆杂交实验②果蝇杂交实验③肺炎双球菌转化实验"))
    assert parsed.questions[0].qtype == "fill_in_blank"
    parsed = segment(lines("13．已知三角形ABC中AB=AC，D为BC的中点，________", "求证：AD⊥BC。"))
    assert parsed.questions[0].qtype == "free_response"


def test_material_introducing_one_question_goes_with_it_not_with_the_question_before():
    parsed = segment(
        lines(
            "9．下列说法正确的是（）",
            CHOICES,
            "读图，完成第10题。",
            "图示区域内自南向北年降水量由约200 mm增至500 mm左右。",
            "10．甲地区农业发达，其成功之处在于（）",
            CHOICES,
        )
    )
    first, second = parsed.questions
    assert first.text == "下列说法正确的是（）"
    assert second.shared.startswith("读图，完成第10题。") and second.text.endswith("其成功之处在于（）")


def test_a_ruled_answer_key_of_short_cells_is_read_not_taken_for_a_figure():
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for i, text in enumerate(["7．下列说法正确的是（）", CHOICES, "8．下列说法错误的是（）", CHOICES, "参考答案"]):
        page.insert_text((60, 80 + 22 * i), text, fontname="china-s", fontsize=11)
    top, cell = 200, 34
    for row, (name, values) in enumerate((("题号", ["7", "8"]), ("答案", ["C", "A"]))):
        y = top + 20 * (row + 1) - 6
        page.insert_text((62, y), name, fontname="china-s", fontsize=11)
        for i, value in enumerate(values):
            page.insert_text((100 + i * cell + 12, y), value, fontname="helv", fontsize=11)
    for r in range(3):
        page.draw_line((58, top + 20 * r), (100 + 2 * cell, top + 20 * r), width=0.5)
    for x in (58, 100, 100 + cell, 100 + 2 * cell):
        page.draw_line((x, top), (x, top + 40), width=0.5)
    parsed = analysis_of(doc.tobytes()).parsed
    assert [(q.number, q.answer) for q in parsed.questions] == [(7, "C"), (8, "A")]


def test_a_number_inside_a_line_at_the_top_of_two_pages_is_kept():
    """Lines "阅读材料，完成第" "5" "题。" and "根据材料，完成第" "9" "题。" at the same place on two pages: the
    number repeats as "#", the line is this page's own text."""
    doc = pymupdf.open()
    for first, intro in ((5, "阅读材料，完成第"), (9, "根据材料，完成第")):
        page = doc.new_page(width=595, height=842)
        page.insert_text((56, 70), intro, fontname="china-s", fontsize=11)
        page.insert_text((144, 70), str(first), fontname="helv", fontsize=11)
        page.insert_text((151, 70), "题。", fontname="china-s", fontsize=11)
        page.insert_text(
            (56, 92), f"{'甲乙'[first > 5]}地区年降水量由约200 mm增至500 mm左右。", fontname="china-s", fontsize=11
        )
        for i in range(4):
            y = 120 + 60 * i
            page.insert_text((56, y), f"{first + i}．下列说法正确的是（）", fontname="china-s", fontsize=11)
            page.insert_text((76, y + 20), CHOICES, fontname="china-s", fontsize=11)
    parsed = analysis_of(doc.tobytes()).parsed
    assert [q.number for q in parsed.questions] == list(range(5, 13))
    shared = {q.number: q.shared for q in parsed.questions if q.shared}
    assert sorted(shared) == [5, 9] and shared[9].startswith("根据材料，完成第9题。")


def test_badges_numbering_past_1_and_a_badge_at_the_top_of_the_next_column():
    """Numbers alone on their line, a little right of the text's edge (centred in a badge), from 7 on; 9's
    badge heads the second column while 8's text is still the last read, at the first column's edge."""
    rows: list[Line] = []
    for number, column, y in ((7, 0, 0), (8, 0, 200), (9, 1, 0)):
        x = 40 + 300 * column
        rows.append(Line(str(number), (x + 7, y, x + 13, y + 12), 1, (1, 0, column, y)))
        rows.append(Line("下列说法正确的是（）", (x, y + 16, x + 200, y + 28), 1, (1, 0, column, y + 16)))
        rows.append(Line(CHOICES, (x + 20, y + 36, x + 200, y + 48), 1, (1, 0, column, y + 36)))
    parsed = segment(rows)
    assert [q.number for q in parsed.questions] == [7, 8, 9]
    assert [q.option_count for q in parsed.questions] == [4, 4, 4]


def test_a_numeral_question_whose_words_end_in_ti_is_no_section_heading():
    """ "二、已知命题 p1：…" reads like "二、<…>题" but in a paper numbered by numerals it is the next question."""
    parsed = segment(
        lines(
            "一、已知函数f(x)=x+1，则f(2)的值是多少？请写出判断的过程。",
            "二、已知命题 p1：函数y=2x在R上为增函数，p2：函数y=-x在R上为增函数，则真命题是哪一个？",
            "三、某岛屿上生活着一种动物，关于该种群的叙述，错误的是哪一项？请写出判断的过程。",
        )
    )
    assert [q.label for q in parsed.questions] == ["一", "二", "三"]
    assert parsed.questions[1].text.startswith("已知命题")
    # A heading still heads its section where the paper numbers its questions 1．2．
    headed = segment(lines("一、选择题", "1．甲（）", CHOICES, "二、判断题", "2．乙（）"))
    assert [q.label for q in headed.questions] == ["1", "2"]


def test_a_decimal_starting_a_line_does_not_make_bracketed_question_numbers_an_items_parts():
    """A notice numbered 1．-3．, questions （1）-（6）, and a solution line that starts "4.2×10⁴ km": the
    decimal is no item 4 closing around the questions."""
    parsed = segment(
        lines(
            "注意事项：",
            "1．答卷前，考生务必将自己的姓名填写在答题卡上。",
            "2．回答选择题时，选出每小题答案后，用铅笔把答题卡上对应题目的答案标号涂黑。",
            "3．考试结束后，将本试卷和答题卡一并交回。",
            *[row for n in range(1, 7) for row in (f"（{n}）下列关于第{n}种物质的说法正确的是（）", CHOICES)],
            "参考答案",
            "（1）A （2）B （3）C （4）D （5）A",
            "（6）解：由万有引力提供向心力可得同步卫星的轨道半径",
            "4.2×10⁴ km，故选A。",
        )
    )
    assert [q.number for q in parsed.questions] == [1, 2, 3, 4, 5, 6]


def test_a_last_column_holding_one_line_is_a_column_under_a_centred_title_and_footer():
    """An A3 paper whose right column holds only the last question (its left column full), with a title
    and a footer centred across the gutter: the last question is not read into the left column's lines."""
    doc = pymupdf.open()
    page = doc.new_page(width=1191, height=842)
    page.insert_text((470, 40), "2025年普通高等学校招生全国统一考试", fontname="china-s", fontsize=14)
    page.insert_text((520, 64), "学科素养测试", fontname="china-s", fontsize=12)
    page.insert_text((571, 820), "第1页 共1页", fontname="china-s", fontsize=9)
    for i in range(7):
        y = 100 + 90 * i
        page.insert_text(
            (60, y),
            f"{i + 1}．下列关于第{i + 1}题所述物质的性质和用途的说法，正确的是（）",
            fontname="china-s",
            fontsize=11,
        )
        page.insert_text(
            (60, y + 20), "A．甲物质可以用作食品的干燥剂  B．乙物质可用于治疗胃酸过多", fontname="china-s", fontsize=11
        )
        page.insert_text(
            (60, y + 40), "C．丙物质可以用来制作导线材料  D．丁物质可以用作消毒杀菌剂", fontname="china-s", fontsize=11
        )
    page.insert_text(
        (610, 100),
        "8．已知集合A={x|x>2}，B={x|x<5}，则A∩B等于什么？请写出判断的过程。",
        fontname="china-s",
        fontsize=11,
    )
    parsed = analysis_of(doc.tobytes()).parsed
    assert [q.number for q in parsed.questions] == list(range(1, 9))
    assert parsed.questions[-1].text.startswith("已知集合")
    assert all("已知集合" not in q.text for q in parsed.questions[:-1])
