"""The PDF importer on real exam papers (../shared/realdata/exams, skipped where absent) and on the
structures those papers showed, written as lines or synthetic PDFs."""

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation import services
from annotation.models import Flag, Question
from annotation.pdf import import_document, register_pdf_upload
from annotation.pdf.layout import Line, Span, find_gutters
from annotation.pdf.segment import segment
from bench import real_papers
from tests import fixtures_pdf
from tests.ci import needs

REAL = real_papers.default_folder()
needs_real = needs((REAL / "expected.json").exists(), "../shared/realdata is not here")


def _expected() -> list[dict]:
    return json.loads((REAL / "expected.json").read_text(encoding="utf-8")) if (REAL / "expected.json").exists() else []


# Text-layer papers only: they score in about a second each. The scans and outline papers need OCR
# (minutes on a shared machine) and are scored by `python -m bench.real_papers` (docs/benchmarks.md).
TEXT_PAPERS = [
    p["file"]
    for p in _expected()
    if not {"scan", "outlines", "mixed"} & set(p["pdf_kind"]) and "negative control (not an exam)" not in p["pdf_kind"]
]
NEGATIVE = [p["file"] for p in _expected() if "negative control (not an exam)" in p["pdf_kind"]]


@needs_real
@pytest.mark.parametrize("name", TEXT_PAPERS)
def test_a_real_text_layer_paper_reads_as_a_person_reads_it(name):
    expected = next(p for p in _expected() if p["file"] == name)
    score = real_papers.score_paper(REAL / name, expected)
    assert not score.error
    assert score.precision >= 0.9 and score.recall >= 0.9, (score.missing, score.extra)
    assert score.share(score.type_ok) >= 0.7
    assert score.share(score.solution_ok) >= 0.9
    # Options in a row, in a table, as pictures, lettered (A) or with a lost dot.
    assert score.share(score.options_ok, score.options_total) in (None, 1.0), score.misses
    # Every question not found is announced.
    assert len(score.missing) <= len([w for w in score.warnings if "not found" in w.lower()])


OCR_PAPERS = [p["file"] for p in _expected() if {"scan", "outlines", "mixed"} & set(p["pdf_kind"])]


@needs_real
@pytest.mark.slow
@pytest.mark.parametrize("name", OCR_PAPERS)
def test_a_real_scanned_or_outlined_paper_reads_as_a_person_reads_it(name):
    """Through OCR: two columns, numbers restarting per section, option letters OCR misreads, and
    answer sections (with or without a heading) matched back to the questions by number."""
    expected = next(p for p in _expected() if p["file"] == name)
    score = real_papers.score_paper(REAL / name, expected)
    assert not score.error
    assert score.precision >= 0.9 and score.recall >= 0.9, (score.missing, score.extra)
    assert score.share(score.options_ok, score.options_total) in (None, 1.0), score.misses
    assert score.share(score.solution_ok) >= 0.9, score.misses


@needs_real
@pytest.mark.parametrize("name", NEGATIVE)
def test_a_document_that_is_no_exam_gives_no_questions(name):
    expected = next(p for p in _expected() if p["file"] == name)
    score = real_papers.score_paper(REAL / name, expected)
    assert score.found == 0


@needs_real
@pytest.mark.parametrize("name", NEGATIVE)
def test_a_document_that_is_no_exam_says_so(name):
    """Never silent: a document of text from which no question is imported says why."""
    expected = next(p for p in _expected() if p["file"] == name)
    score = real_papers.score_paper(REAL / name, expected)
    assert any("not look like an exam" in w or "no question was found" in w for w in score.warnings)


def _analysis(name: str):
    from annotation.pdf import importer, reading

    with reading.open_pdf(REAL / name) as pdf:
        texts, regions = [], []
        for index, page in enumerate(pdf):
            text, _, found = importer.read_page(page, index + 1)
            texts.append(text)
            regions += found
        return importer.analyse(texts, regions)


@needs_real
def test_a_question_number_beside_a_piecewise_function_starts_its_question():
    """Its first line holds a tall brace whose upper row overlaps the number's box (a Word paper)."""
    parsed = _analysis("math_2024_shanghai_spring.pdf").parsed
    by_number = {q.number: q for q in parsed.questions}
    assert list(by_number) == list(range(1, 22))
    assert by_number[9].text.startswith("已知") and "x≥0" not in by_number[8].text


# --- structures of real papers, as lines ------------------------------------------------


def _lines(*texts):
    return [Line(text, (0, i * 20, 100, i * 20 + 12), 1, (1, 0, 0, i * 20)) for i, text in enumerate(texts)]


def test_parenthesised_option_letters_are_options_in_a_row_or_one_a_line():
    parsed = segment(
        _lines(
            "二、选择题",
            "13．下列函数中最小正周期是 π 的是 ( )",
            "(A) y=sin x (B) y=cos x",
            "（C）y=tan x （D）y=1",
            "14．若 x>0，则（  ）",
            "(A) 1",
            "(B) 2",
            "(C) 3",
            "(D) 4",
        )
    )
    assert [len(q.options) for q in parsed.questions] == [4, 4]
    assert [o["label"] for o in parsed.questions[0].options] == list("ABCD")
    assert parsed.questions[0].options[2]["text"] == "y=tan x"


def test_numbered_points_of_the_notice_are_no_questions():
    parsed = segment(
        _lines(
            "注意事项：",
            "1．每题选出答案后，用铅笔将答题卡上对应题目的答案标号涂黑。",
            "2．本卷共 8 题，每题 5 分。",
            "一、单项选择题",
            "1．下列说法正确的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
        )
    )
    assert [(q.number, q.qtype) for q in parsed.questions] == [(1, "multiple_choice")]


def test_a_non_choice_section_and_score_prefixed_items_are_not_choice_questions():
    parsed = segment(
        _lines(
            "一、选择题",
            "1．下列说法正确的是（  ）",
            "A．甲 B．乙 C．丙 D．丁",
            "2．（12 分）某同学做实验，测得 g=______m/s²。",
            "二、非选择题",
            "3．如图，求小球的速度。",
        )
    )
    assert [q.qtype for q in parsed.questions] == ["multiple_choice", "fill_in_blank", "free_response"]


def test_numbers_restarting_per_section_are_labelled_by_section_and_get_their_answers():
    parsed = segment(
        _lines(
            "一、（16分）本题有2个小题，把答案写在题中横线上。",
            "1．光速是______。",
            "2．电子带______电。",
            "二、（6分）本题有2个小题，选出一个正确的答案。",
            "1．下列正确的是（  ）",
            "(A) 甲 (B) 乙 (C) 丙 (D) 丁",
            "2．下列错误的是（  ）",
            "(A) 甲 (B) 乙 (C) 丙 (D) 丁",
            "三、（6分）以初速 v 抛出一物体，试求：",
            "(1) 落地时间",
            "试题答案",
            "一、(1) 3×10⁸米/秒 (2) 负",
            "二、(1) [B] (2) [C]",
            "三、(1) t=2v/g",
        )
    )
    questions = parsed.questions
    assert [q.label for q in questions] == ["一.1", "一.2", "二.1", "二.2", "三"]
    assert [q.qtype for q in questions] == ["fill_in_blank"] * 2 + ["multiple_choice"] * 2 + ["free_response"]
    assert [q.answer for q in questions[2:4]] == ["[B]", "[C]"] and questions[1].answer == "负"
    assert questions[4].answer.startswith("(1) t=2v/g")


def test_an_answer_key_on_one_line_and_a_second_pass_of_solutions_go_to_the_questions():
    parsed = segment(
        _lines(
            "一、选择题",
            "14．甲（  ）",
            "A．1 B．2 C．3 D．4",
            "15．乙（  ）",
            "A．1 B．2 C．3 D．4",
            "参考答案",
            "14．D 15．AD",
            "【解析】部分",
            "14．D【解析】由牛顿定律得。",
            "15．AD【解析】见图。",
        )
    )
    first, second = parsed.questions
    assert (first.answer, second.answer) == ("D", "AD")
    assert "牛顿定律" in first.solution and "见图" in second.solution
    assert len(parsed.questions) == 2


def test_a_paper_printed_again_with_its_solutions_keeps_one_question_each():
    parsed = segment(
        _lines(
            "一、选择题",
            "1．下列物质属于纯净物的是（  ）",
            "A．空气 B．水 C．盐水 D．牛奶",
            "2．3.2019 年是元素周期表发表 150 周年（  ）",
            "A．1 B．2 C．3 D．4",
            "1．下列物质属于纯净物的是（  ）",
            "A．空气 B．水 C．盐水 D．牛奶",
            "【答案】B",
            "【详解】水是纯净物。",
            "2．3.2019 年是元素周期表发表 150 周年（  ）",
            "【答案】C",
        )
    )
    assert [q.number for q in parsed.questions] == [1, 2]
    assert parsed.questions[0].answer == "B" and "纯净物" in parsed.questions[0].solution
    assert parsed.questions[1].answer == "C"


def test_numbered_clauses_of_a_regulation_are_no_questions():
    parsed = segment(
        _lines(
            "一、报名", "1．报名条件：遵守宪法和法律。", "2．报名结束后，考生须确认信息。", "3．考生应按时参加考试。"
        )
    )
    assert parsed.questions == [] and [n["code"] for n in parsed.notes] == ["not_exam"]


def test_the_consistency_report_names_gaps_stated_counts_and_the_questions_beside_them():
    parsed = segment(
        _lines(
            "一、选择题（共 4 小题）",
            "1．甲（  ）",
            "A．1 B．2",
            "2．乙（  ）",
            "A．1 B．2",
            "4．丁（  ）",
            "A．1 B．2",
        )
    )
    report = parsed.report
    assert report["numbers"] == ["1", "2", "4"] and report["gaps"] == ["3"]
    assert report["sections"][0]["stated"] == 4 and report["sections"][0]["found"] == 3
    assert report["suspects"] == ["1", "2", "4"]  # beside the gap, and the ends of the short section
    assert {"code": "section_count", "params": {"heading": "一、选择题（共 4 小题）", "stated": 4, "found": 3}} in (
        report["notes"]
    )
    assert any("states 4 questions; 3 were found" in w for w in report["warnings"])


def test_a_sparse_third_column_is_still_a_column():
    """Three columns of an A3 page whose third holds three short lines (the columns of the whole paper)."""
    spans = []
    for row in range(30):
        y = 60 + row * 15
        spans.append(Span("第一栏的一行文字" * 3, (50, y, 400, y + 10), y + 9, 10.5))
        spans.append(Span("第二栏的一行文字" * 3, (420, y, 775, y + 10), y + 9, 10.5))
    for row in range(3):
        y = 60 + row * 15
        spans += [
            Span("18.", (793, y, 806, y + 10), y + 9, 10.5),
            Span("已知", (811, y, 840, y + 10), y + 9, 10.5),
            Span("f(x)", (846, y, 880, y + 10), y + 9, 10.5),
        ]
    gutters = find_gutters(spans, 1190)
    assert len(gutters) == 2 and 400 < gutters[0] < 420 and 775 < gutters[1] < 793


# --- through the import ------------------------------------------------------------------


def _flaky_create(monkeypatch, failing_calls):
    real_create = services.create_question
    calls = {"n": 0}

    def flaky(*, data, **kwargs):
        calls["n"] += 1
        if calls["n"] in failing_calls:
            raise UnicodeEncodeError("utf-8", "\ud835", 0, 1, "surrogates not allowed")
        return real_create(data=data, **kwargs)

    monkeypatch.setattr("annotation.pdf.importer.create_question", flaky)
    return real_create


@pytest.mark.django_db
@pytest.mark.usefixtures("tmp_media")
def test_a_question_that_fails_is_saved_again_cleaned_with_the_fault_recorded_on_it(monkeypatch):
    _flaky_create(monkeypatch, {2})
    document = register_pdf_upload(
        uploaded_file_or_path=SimpleUploadedFile("exam.pdf", fixtures_pdf.two_column_exam().pdf)
    )
    summary = import_document(document=document)
    assert summary.questions == 8 and summary.failed == [] and [p["question"] for p in summary.partial] == ["2"]
    second = Question.objects.filter(source_document=document).order_by("id")[1]
    flag = second.flags.get(code=Flag.Code.IMPORT_ERROR)
    assert "UnicodeEncodeError" in flag.message and second.figures.count() == 0  # saved without its figure
    document.refresh_from_db()
    assert document.error == "" and document.import_report["partial"][0]["question"] == "2"


@pytest.mark.django_db
@pytest.mark.usefixtures("tmp_media")
def test_a_question_refused_twice_is_named_on_the_document_and_the_paper_goes_on(monkeypatch):
    real_create = _flaky_create(monkeypatch, {2, 3})  # question 2, and question 2 cleaned
    document = register_pdf_upload(
        uploaded_file_or_path=SimpleUploadedFile("exam.pdf", fixtures_pdf.two_column_exam().pdf)
    )
    summary = import_document(document=document)
    assert summary.questions == 7 and len(summary.failed) == 1
    assert "UnicodeEncodeError" in summary.failed[0]["reason"]
    document.refresh_from_db()
    assert document.error == "" and document.import_report["failed"] == summary.failed
    # A second run imports the one that failed and nothing twice.
    monkeypatch.setattr("annotation.pdf.importer.create_question", real_create)
    again = import_document(document=document)
    assert again.questions == 1 and again.existing == 7
    assert Question.objects.filter(source_document=document).count() == 8
    document.refresh_from_db()
    assert document.import_report["failed"] == []


@pytest.mark.django_db
@pytest.mark.usefixtures("tmp_media")
def test_questions_next_to_a_gap_are_flagged_and_the_report_is_kept():
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("gap.pdf", fixtures_pdf.gap_paper()))
    summary = import_document(document=document)
    assert summary.report["gaps"] == ["3"]
    assert {"code": "gap", "params": {"label": "3", "before": "2", "after": "4"}} in summary.notes
    assert any("Question 3 was not found" in w for w in summary.warnings)
    flagged = set(Flag.objects.filter(code=Flag.Code.IMPORT_GAP).values_list("question__text", flat=True))
    assert len(flagged) == 2 and all(text.startswith(("乙", "丁")) for text in flagged)


def test_the_default_folder_is_beside_the_clone_or_a_folder_above_it():
    assert isinstance(real_papers.default_folder(), Path)
    assert real_papers.default_folder().parts[-3:] == ("shared", "realdata", "exams")


def test_word_math_letters_are_plain_letters_and_their_doubled_glyphs_are_undone():
    from annotation.pdf.layout import normalize_text

    assert normalize_text("𝐺𝐺=𝑚𝑚𝑔𝑔，𝑥 ＞ 0①") == "G=mg，x ＞ 0①"


def test_a_small_raised_chinese_run_is_no_superscript():
    from annotation.pdf.layout import line_text

    main = Span("两点", (0, 10, 40, 22), 20, 10.5)
    raised = Span("上两点", (40, 8, 60, 16), 15, 6.0, flags=1)
    assert "^" not in line_text([main, raised])


@pytest.mark.django_db
@pytest.mark.usefixtures("tmp_media")
def test_a_crashed_import_says_why_and_a_retry_reuses_the_ocr(settings, monkeypatch):
    from tests.test_pdf_import import FakeOCR

    settings.OCR_BACKEND = "tests.test_pdf_import.FakeOCR"
    FakeOCR.calls = 0
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("scan.pdf", fixtures_pdf.scanned_page()))

    def crash(**kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr("annotation.pdf.importer._save_questions", crash)
    with pytest.raises(RuntimeError):
        import_document(document=document)
    document.refresh_from_db()
    assert "the disk is full" in document.error and FakeOCR.calls == 1
    monkeypatch.undo()
    summary = import_document(document=document)
    document.refresh_from_db()
    assert summary.questions == 1 and document.error == ""
    assert FakeOCR.calls == 1  # the page OCR'd by the crashed run was reused, not read again
    assert document.pages.get().ocr_lines[0]["spans"]


# --- option kinds, answer sections without a heading, lines in the margin -----------------


@pytest.mark.django_db
@pytest.mark.usefixtures("tmp_media")
def test_picture_table_and_misprinted_options_and_a_headingless_answer_section_are_read():
    document = register_pdf_upload(
        uploaded_file_or_path=SimpleUploadedFile("options.pdf", fixtures_pdf.picture_options_paper())
    )
    summary = import_document(document=document)
    questions = list(Question.objects.filter(source_document=document).order_by("id"))
    # The answers that start again at 1 are matched back, never imported as questions 6-10.
    assert summary.questions == 5 and not summary.failed
    assert [[o["label"] for o in q.options] for q in questions] == [list("ABCD")] * 5
    pictures, lost_dot, table, margin, parts = questions
    assert [o["text"] for o in pictures.options] == ["", "", "", ""]  # the letters under four pictures
    assert lost_dot.options[0]["text"] == "质量越大惯性越大"
    assert "FeCl2" in table.text and table.options[0]["text"] == "A"
    # The number "4" in the top margin and the stem run inside a too-tall figure box are text.
    assert margin.text.startswith("如图") and "的倾角 30 度" in margin.text
    assert [q.qtype for q in questions] == ["multiple_choice"] * 4 + ["free_response"]
    assert [q.answers for q in questions[:4]] == [["B"], ["A"], ["A"], ["B"]]
    assert all(q.raw_solution for q in questions[:4]) and "v=gt" in parts.answers[-1]


def test_ocr_misread_option_letters_are_options():
    parsed = segment(
        _lines(
            "二、选择题",
            "1．下列说法正确的是（  ）",
            "(4) 甲说法 (B) 乙说法 (C) 丙说法 (D) 丁说法",
            "2．下列说法正确的是（  ）",
            "(4) 在质量和温度不变的情况下，压强与体积成",
            "反比；",
            "(B) 乙说法",
            "(C) 丙说法 (D) 丁说法",
            "3．下列叙述正确的是",
            "A 由a 点可求得溶度积",
            "B. 乙 C. 丙 D. 丁",
            "试题答案",
            "二、(1) [4] (2) [4; D] (3) [C]",
        )
    )
    assert [[o["label"] for o in q.options] for q in parsed.questions] == [list("ABCD")] * 3
    assert parsed.questions[1].options[0]["text"] == "在质量和温度不变的情况下，压强与体积成反比；"
    assert parsed.questions[1].text == "下列说法正确的是（  ）"
    assert parsed.questions[2].options[0]["text"] == "由a 点可求得溶度积"
    assert [q.answer for q in parsed.questions] == ["[A]", "[A; D]", "[C]"]


def test_option_letters_alone_on_a_line_are_picture_options_and_a_lost_letter_is_kept_and_said():
    parsed = segment(
        _lines(
            "17．正确代表氢原子能级的是 ()",
            "A B",
            "C D",
            "18．哪个图是正确的？（  ）",
            "（B）",
            "（C） （D）",
            "19．拉力大小分别为（  ）",
            "A. G和G B. 2G和G",
            "√2/2 G D. G和2G",
            "20．如图，A、B 两点间的距离为",
            "A B",
        )
    )
    first, second, third, fourth = parsed.questions
    assert [o["label"] for o in first.options] == list("ABCD") and first.qtype == "multiple_choice"
    assert [o["label"] for o in second.options] == list("ABCD") and second.options[0]["text"] == ""
    assert [o["label"] for o in third.options] == list("ABCD") and third.options[1]["text"] == "2G和G√2/2 G"
    assert fourth.options == [] and fourth.qtype != "multiple_choice"  # a figure's points, no choice asked
    assert {"code": "option_unread", "params": {"label": "18", "option": "A"}} in parsed.notes
    assert {"code": "option_unread", "params": {"label": "19", "option": "C"}} in parsed.notes


def test_a_sub_questions_options_make_no_choice_question_and_a_second_set_stays_in_its_stem():
    parsed = segment(
        _lines(
            "30．（18 分）一质点沿斜边滑下。",
            "（1）在质点的运动中不发生变化的是（  ）",
            "A．动能 B．机械能",
            "C．电势能 D．总能量",
            "（2）质点的运动是（  ）",
            "A．匀加速运动 B．匀减速运动",
            "C．先加速后减速 D．变加速运动",
            "（3）求质点滑到底端时的速度。",
            "31．下面正确的说法是（  ）",
            "①β射线粒子和电子是两种不同的粒子",
            "②红外线的波长比X射线的波长长",
            "A．①② B．①③ C．②④ D．①④",
        )
    )
    parts, statements = parsed.questions
    assert parts.qtype == "free_response" and [o["text"] for o in parts.options][:2] == ["动能", "机械能"]
    assert "(2) 质点的运动是" in parts.text and "A．匀加速运动" in parts.text and "(3) 求质点" in parts.text
    assert len(parts.options) == 4
    assert statements.qtype == "multiple_choice" and len(statements.options) == 4  # ①② are statements


def test_answers_numbered_like_their_section_and_answers_that_run_on_a_line_are_matched():
    parsed = segment(
        _lines(
            "一、（16分）本题有2个小题，把答案写在题中横线上。",
            "1．光速是______。",
            "2．电子带______电。",
            "四、（18分）本题有2个小题。",
            "1．测出电源的电动势和内阻。",
            "（1）画出电路图；（2）写出读数；（3）求内阻。",
            "2．查串联电路的故障，试述操作步骤。",
            "五、（10分）如图，一质点在电场中运动，试求：",
            "（1）加速度；（2）速度。",
            "试题答案",
            "一、（1）3×10⁸米/秒。 (2)负。",
            "四、1. 测电源电动势",
            "(1) 电源、电键和电阻箱串联",
            "(2) 110 (3) 1.320",
            "2. 查串联电路的故障",
            "参考答案如下：",
            "①伏特表量程选用 15V 档",
            "五、第1小题：",
            "(1) a=qE/m",
            "(2) v=at",
        )
    )
    answers = {q.label: q.answer for q in parsed.questions}
    assert answers["一.1"].startswith("3×10") and answers["一.2"] == "负。"
    assert "(3) 1.320" in answers["四.1"] and "①伏特表" in answers["四.2"]
    assert answers["五"].startswith("第1小题") and "v=at" in answers["五"]
    assert len(parsed.questions) == 5


def test_a_number_set_against_text_in_the_top_margin_is_no_page_number():
    from annotation.pdf.layout import PageText, strip_running_text

    page = PageText(
        1,
        595,
        842,
        [
            Span("21", (56, 57, 67, 71), 69, 10.4),
            Span("．如图，在匀强磁场中", (67, 59, 287, 70), 69, 10.4),
            Span("3", (290, 810, 296, 820), 818, 9),  # the page number of the footer
            *[Span(f"第{i}行正文", (56, 100 + i * 20, 300, 112 + i * 20), 110 + i * 20, 10.4) for i in range(10)],
        ],
    )
    kept = [s.text for s in strip_running_text([page])[0].spans]
    assert kept[:2] == ["21", "．如图，在匀强磁场中"] and "3" not in kept


def test_a_glyph_box_several_lines_tall_is_cut_to_its_line_and_tiny_residue_is_dropped():
    import pymupdf

    from annotation.pdf import reading

    tall = {"bbox": (176.4, 350.5, 182.2, 408.8), "size": 10.4, "origin": (176.4, 384.0)}
    x0, y0, x1, y1 = reading._line_box(tall)
    assert y1 - y0 < 14 and y0 < 384 < y1
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((60, 100), "下列说法正确的是", fontname="china-s", fontsize=10.5)
    page.insert_text((200, 100), "AEA", fontname="helv", fontsize=1.1)  # Word's formula residue
    assert [s.text for s in reading.text_layer(page, 1).spans] == ["下列说法正确的是"]


def test_symbol_font_private_use_characters_are_the_symbols_they_draw():
    from annotation.pdf.layout import normalize_text

    assert normalize_text("0.1 mol\uf0d7L\uf02d1，c(M)\uf0a310\uf02d5，\uf044H") == "0.1 mol·L−1，c(M)≤10−5，ΔH"
