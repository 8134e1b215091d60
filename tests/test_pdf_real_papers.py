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
    # Every question not found is announced.
    assert len(score.missing) <= len([w for w in score.warnings if "not found" in w])


@needs_real
@pytest.mark.parametrize("name", NEGATIVE)
def test_a_document_that_is_no_exam_gives_no_questions(name):
    expected = next(p for p in _expected() if p["file"] == name)
    score = real_papers.score_paper(REAL / name, expected)
    assert score.found == 0


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
    assert parsed.questions == [] and "does not look like an exam" in parsed.warnings[0]


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
    assert any("states 4 questions, 3 were found" in w for w in report["warnings"])


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


@pytest.fixture
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.mark.django_db
@pytest.mark.usefixtures("_media")
def test_one_question_that_fails_is_recorded_and_the_paper_goes_on(monkeypatch):
    real_create = services.create_question
    calls = {"n": 0}

    def flaky(*, data, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise UnicodeEncodeError("utf-8", "\ud835", 0, 1, "surrogates not allowed")
        return real_create(data=data, **kwargs)

    monkeypatch.setattr("annotation.pdf.importer.create_question", flaky)
    document = register_pdf_upload(
        uploaded_file_or_path=SimpleUploadedFile("exam.pdf", fixtures_pdf.two_column_exam().pdf)
    )
    summary = import_document(document=document)
    assert summary.questions == 7 and len(summary.failed) == 1
    assert "UnicodeEncodeError" in summary.failed[0]["reason"]
    document.refresh_from_db()
    assert document.error == ""
    # A second run imports the one that failed and nothing twice.
    monkeypatch.setattr("annotation.pdf.importer.create_question", real_create)
    again = import_document(document=document)
    assert again.questions == 1 and again.existing == 7
    assert Question.objects.filter(source_document=document).count() == 8


@pytest.mark.django_db
@pytest.mark.usefixtures("_media")
def test_questions_next_to_a_gap_are_flagged_and_the_report_is_kept():
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("gap.pdf", fixtures_pdf.gap_paper()))
    summary = import_document(document=document)
    assert summary.report["gaps"] == ["3"]
    assert any("question 3 was not found" in w for w in summary.warnings)
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
@pytest.mark.usefixtures("_media")
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
