import pytest

from k12vista.vocabulary import (
    LABEL_CODES,
    RELEASE_TAGS,
    STEP_LABELS,
    QuestionType,
    Stage,
    Subject,
    label_from_name,
    parse_release_tag,
    question_type_from_name,
    release_tag,
    stage_of_grade,
)


@pytest.mark.parametrize(
    ("grade", "stage"),
    [(1, Stage.PRIMARY), (6, Stage.PRIMARY), (7, Stage.MIDDLE), (9, Stage.MIDDLE), (10, Stage.HIGH), (12, Stage.HIGH)],
)
def test_it_maps_grades_to_stages(grade, stage):
    assert stage_of_grade(grade) == stage


@pytest.mark.parametrize("grade", [0, 13, -1])
def test_it_rejects_grades_outside_k12(grade):
    with pytest.raises(ValueError, match="grade"):
        stage_of_grade(grade)


def test_it_round_trips_the_eleven_release_tags():
    assert len(RELEASE_TAGS) == 11
    for tag in RELEASE_TAGS:
        subject, stage = parse_release_tag(tag)
        assert release_tag(subject, {Stage.PRIMARY: 3, Stage.MIDDLE: 8, Stage.HIGH: 11}[stage]) == tag
    assert parse_release_tag("physics-g12") == (Subject.PHYSICS, Stage.HIGH)


@pytest.mark.parametrize("tag", ["music-g9", "math", "math-gX", "math-g13"])
def test_it_names_a_bad_release_tag(tag):
    with pytest.raises(ValueError, match=tag):
        parse_release_tag(tag)


def test_it_reads_question_types_in_chinese():
    assert question_type_from_name("选择题") == QuestionType.MULTIPLE_CHOICE
    assert question_type_from_name("填空题") == QuestionType.FILL_IN_BLANK
    assert question_type_from_name(" 问答题 ") == QuestionType.FREE_RESPONSE
    with pytest.raises(ValueError, match="判断题"):
        question_type_from_name("判断题")


def test_it_has_nine_labels_in_the_papers_order():
    assert LABEL_CODES == ("CS", "ICE", "QM", "LRK", "KAE", "LRE", "HE", "CE", "IAE")
    assert [label.is_error for label in STEP_LABELS].count(False) == 1


@pytest.mark.parametrize(
    "name", ["CE", "ce", "Calculation error", "calculation  ERROR", "运算处理错误", "calculation_error"]
)
def test_it_finds_a_label_by_any_of_its_names(name):
    assert label_from_name(name).code == "CE"


def test_it_refuses_an_unknown_label():
    with pytest.raises(ValueError, match="unknown step label 'Typo error'"):
        label_from_name("Typo error")
