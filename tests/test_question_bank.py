import pytest

from annotation import services
from annotation.images import BadImage
from annotation.models import Flag, Question, QuestionEdit
from annotation.services import EditConflict, FigureData, LifecycleError, QuestionDataError
from k12vista.pagination import keyset_page
from tests.annotation_factories import figure_png, make_question, question_data

pytestmark = pytest.mark.django_db


def open_flags(question):
    return set(question.flags.filter(resolved_at__isnull=True).values_list("code", flat=True))


def test_it_creates_a_question_with_stage_figures_and_history(annotator):
    question = make_question(annotator, grade=11)
    assert question.stage == "high"
    assert question.version == 1
    assert question.figures.get().width == 400
    assert list(question.knowledge_points.values_list("name", flat=True)) == ["平方根"]
    assert question.edits.get().field == "*"
    assert open_flags(question) == set()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"subject": "music"}, "unknown subject"),
        ({"qtype": "essay"}, "unknown question type"),
        ({"grade": 13}, "grade"),
        ({"answers": [1]}, "answers"),
        ({"difficulty": 1.5}, "difficulty"),
    ],
)
def test_it_refuses_invalid_data_and_saves_nothing(overrides, message, english):
    with pytest.raises(QuestionDataError, match=message):
        make_question(**overrides)
    assert not Question.objects.exists()


def test_it_refuses_a_figure_that_is_not_an_image(english):
    with pytest.raises(BadImage, match="not a usable image"):
        make_question(figures=[FigureData(content=b"GIF89a but not really")])
    assert not Question.objects.exists()


def test_it_stores_figures_at_the_standard_size(settings):
    settings.FIGURE_STANDARD_SIDE_PX = 256
    question = make_question(figures=[FigureData(content=figure_png((1600, 900)))])
    figure = question.figures.get()
    assert (figure.width, figure.height) == (256, 144)


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"answers": []}, "missing_answer"),
        ({"answers": [""]}, "missing_answer"),
        ({"options": [{"label": "A", "text": "1"}]}, "option_count"),
        ({"text": "  "}, "empty_text"),
        ({"text": "求 $\\frac{1}{$ 的值"}, "latex_error"),
        ({"text": "求 $x^2 的值"}, "latex_error"),
        ({"figures": [], "text": "如图所示，$AB=2$，则 $x$ 等于"}, "figure_missing"),
        ({"text": "电阻 $R=2\\Omega$，求$ 电流"}, "garbled_text"),
        ({"text": "𝑥𝑥 的值为 ___"}, "garbled_text"),
        ({"qtype": "fill_in_blank", "text": "$1+1=$___，$2+2=$___", "answers": ["2"], "options": []}, "blank_mismatch"),
    ],
)
def test_it_flags_structural_problems(overrides, code):
    question = make_question(**overrides)
    assert code in open_flags(question)


def test_it_accepts_well_formed_fill_in_blank_and_chemistry():
    question = make_question(
        qtype="fill_in_blank", options=[], text="水的化学式是 ___，$\\ce{2H2 + O2 -> 2H2O}$ 中氢气的系数是 ___",
        answers=["$\\ce{H2O}$", "2"],
    )  # fmt: skip
    assert open_flags(question) == set()


def test_it_flags_blurred_and_small_figures(settings, english):
    settings.FIGURE_MIN_SIDE_PX = 100
    blurred = make_question(figures=[FigureData(content=figure_png(sharp=False))])
    small = make_question(figures=[FigureData(content=figure_png((80, 60)))])
    assert "blurred_figure" in open_flags(blurred)
    assert "low_resolution" in open_flags(small)
    flag = blurred.flags.get(code="blurred_figure")
    assert "threshold" in flag.message


@pytest.mark.parametrize(
    "text",
    ["已知 $x^2=4$，且 $x>0$，则 $x$ 等于", "画出函数 $y=x^2$ 的图像", "作图题：用直尺作角平分线"],
)
def test_a_question_that_refers_to_no_figure_is_not_flagged_for_lacking_one(text):
    assert "figure_missing" not in open_flags(make_question(figures=[], text=text))


@pytest.mark.parametrize("text", ["如图，$AB=2$", "右图中电流表的示数", "图1所示电路", "由图（a）可知", "甲图中"])
def test_a_question_that_refers_to_a_figure_it_lacks_is_flagged(text):
    flags = open_flags(make_question(figures=[], text=text))
    assert "figure_missing" in flags and "figure_missing" not in open_flags(make_question(text=text))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("两点 ${}^{上两点}$ 间距离", "superscript"),
        ("$v=3千米$ 每时", "Chinese inside math"),
        ("电压为 𝑈𝑈", "doubled"),
        ("读数 \ufffd\ufffd 伏", "U+FFFD"),
        ("$x+1=2", "unbalanced"),
    ],
)
def test_it_flags_garbled_text(text, found, english):
    question = make_question(text=text)
    flag = question.flags.get(code="garbled_text")
    assert found in flag.message and flag.detail["where"] == "text"


def test_math_with_chinese_in_text_commands_is_not_garbled():
    question = make_question(text="质量 $m=2\\,\\text{千克}$，$\\ce{H2O}$ 的系数，价格 \\$5")
    assert "garbled_text" not in open_flags(question)


def test_quality_flags_read_the_source_pixels_not_the_enlarged_figure(settings, english):
    """A 40x30 px image enlarged to 400x300 for the page is still 40x30 px of detail."""
    settings.FIGURE_MIN_SIDE_PX = 100
    enlarged = make_question(figures=[FigureData(content=figure_png((400, 300)), source_size=(40, 30))])
    assert "low_resolution" in open_flags(enlarged)
    assert "40×30 px in the source" in enlarged.flags.get(code="low_resolution").message
    drawn = make_question(figures=[FigureData(content=figure_png((400, 300)), origin="drawing")])
    assert "low_resolution" not in open_flags(drawn)
    figure = enlarged.figures.get()
    assert (figure.width, figure.height, figure.source_width, figure.source_height) == (400, 300, 40, 30)


def test_a_formula_image_is_no_figure_and_its_placeholder_is_flagged(settings):
    settings.FIGURE_MIN_SIDE_PX = 100
    formula = FigureData(content=figure_png((60, 24)), kind="formula", source_size=(60, 24))
    question = make_question(
        text="如图，小球的速度 [[formula:1]] 不变", figures=[FigureData(content=figure_png()), formula]
    )
    flags = open_flags(question)
    assert "formula_image" in flags and "low_resolution" not in flags and "figure_missing" not in flags
    only_formula = make_question(
        text="由图1可知 [[formula:0]]", figures=[FigureData(content=figure_png(), kind="formula")]
    )
    assert "figure_missing" in open_flags(only_formula)
    # Typed as LaTeX, the flag goes.
    services.edit_question(
        question=question, user=None, expected_version=1, changes={"text": "如图，小球的速度 $v_0$ 不变"}
    )
    assert "formula_image" not in open_flags(question)


def test_a_rule_refresh_keeps_the_flags_the_import_wrote():
    from annotation import checks
    from annotation.models import Flag

    question = make_question()
    Flag.objects.create(question=question, code=Flag.Code.IMPORT_GAP, message="question 3 was not found")
    checks.refresh_rule_flags(question)
    services.edit_question(question=question, user=None, expected_version=1, changes={"answers": ["C"]})
    assert "import_gap" in open_flags(question)


def test_it_records_every_changed_field_in_the_history(annotator):
    question = make_question()
    services.edit_question(
        question=question, user=annotator, expected_version=1,
        changes={"text": "新题干 $y=1$", "answers": ["C"], "grade": 8, "knowledge_points": ["函数", "平方根"]},
    )  # fmt: skip
    question.refresh_from_db()
    assert question.version == 2 and question.stage == "middle"
    edits = {e.field: (e.old, e.new, e.user) for e in QuestionEdit.objects.filter(version=2)}
    assert edits["text"][1] == "新题干 $y=1$" and edits["text"][2] == annotator
    assert edits["answers"] == (["B"], ["C"], annotator)
    assert edits["grade"][:2] == (9, 8)
    assert edits["knowledge_points"][:2] == (["平方根"], ["函数", "平方根"])


def test_it_refuses_the_later_of_two_concurrent_saves(annotator, other_annotator):
    question = make_question()
    services.edit_question(question=question, user=annotator, expected_version=1, changes={"answers": ["C"]})
    with pytest.raises(EditConflict) as conflict:
        services.edit_question(question=question, user=other_annotator, expected_version=1, changes={"text": "x"})
    assert conflict.value.changed == {"answers": (["B"], ["C"])}
    question.refresh_from_db()
    assert question.answers == ["C"] and question.text.startswith("已知")  # nothing overwritten
    assert question.version == 2


def test_it_saves_nothing_when_nothing_changed(annotator):
    question = make_question()
    services.edit_question(question=question, user=annotator, expected_version=1, changes={"answers": ["B"]})
    question.refresh_from_db()
    assert question.version == 1 and question.edits.count() == 1


def test_it_rechecks_structure_after_an_edit(annotator):
    question = make_question()
    services.edit_question(question=question, user=annotator, expected_version=1, changes={"answers": []})
    assert "missing_answer" in open_flags(question)
    services.edit_question(question=question, user=annotator, expected_version=2, changes={"answers": ["A"]})
    assert open_flags(question) == set()


def test_it_keeps_model_flags_when_rules_are_rechecked(annotator):
    from annotation.checks import add_model_flag

    question = make_question()
    add_model_flag(question=question, message="图中角度与题干不符", run_ref="inference.run:7")
    services.edit_question(question=question, user=annotator, expected_version=1, changes={"answers": ["A"]})
    assert question.flags.get().origin == Flag.Origin.MODEL


def test_it_moves_a_question_through_its_lifecycle(annotator):
    question = make_question()
    question.accept_ocr(by=annotator, expected_version=1)
    question.submit_steps(by=annotator)
    assert question.status == Question.Status.SOLUTION_CORRECTED
    assert list(question.edits.filter(field="status").values_list("new", flat=True)) == [
        "ocr_reviewed", "solution_corrected",
    ]  # fmt: skip
    with pytest.raises(LifecycleError, match=f"question {question.hash_id} is solution_corrected, not imported"):
        question.accept_ocr(by=annotator)


def test_a_lot_takes_a_step_once_and_only_from_where_it_starts(annotator):
    ready, behind = make_question(), make_question()
    ready.accept_ocr(by=annotator)
    ready.submit_steps(by=annotator)
    lot = Question.objects.filter(pk__in=[ready.pk, behind.pk])
    assert lot.audit(by=annotator, note="audit #1: lot math accept") == 1
    assert lot.audit(by=annotator, note="audit #1: lot math accept") == 0
    assert lot.release(by=annotator, note="release v1") == 1
    assert dict(Question.objects.values_list("pk", "status")) == {ready.pk: "released", behind.pk: "imported"}
    assert list(ready.edits.filter(field="status").values_list("note", "version")) == [
        ("accept_ocr", 2), ("submit_steps", 3), ("audit: audit #1: lot math accept", 4), ("release: release v1", 5),
    ]  # fmt: skip


def test_it_refuses_to_accept_a_question_someone_changed_meanwhile(annotator, other_annotator):
    question = make_question()
    services.edit_question(question=question, user=other_annotator, expected_version=1, changes={"answers": ["D"]})
    with pytest.raises(EditConflict):
        question.accept_ocr(by=annotator, expected_version=1)
    assert question.status == Question.Status.IMPORTED


def test_it_rejects_only_with_a_reason(annotator):
    question = make_question()
    with pytest.raises(QuestionDataError):
        services.reject(question=question, reason=" ", user=annotator)
    services.reject(question=question, reason="图片缺失，无法作答", user=annotator)
    assert question.status == Question.Status.REJECTED and question.reject_reason == "图片缺失，无法作答"


def test_it_diffs_steps_against_the_proposal():
    diff = services.step_diff(["a", "b", "c"], ["a", "B", "c", "d"])
    assert diff == [("same", "a"), ("removed", "b"), ("added", "B"), ("same", "c"), ("added", "d")]


def test_it_pages_by_key(rf):
    ids = [make_question(figures=[]).pk for _ in range(5)]
    first, next_query = keyset_page(Question.objects.all(), rf.get("/?subject=math"), size=2)
    assert [q.pk for q in first] == ids[:2] and next_query == f"subject=math&after={ids[1]}"
    second, _ = keyset_page(Question.objects.all(), rf.get(f"/?{next_query}"), size=2)
    assert [q.pk for q in second] == ids[2:4]
    last, none = keyset_page(Question.objects.all(), rf.get(f"/?after={ids[3]}"), size=2)
    assert [q.pk for q in last] == ids[4:] and none is None
    # A forged cursor starts again from the first page instead of failing.
    for forged in ("abc", str(2**70), "-1"):
        assert [q.pk for q in keyset_page(Question.objects.all(), rf.get(f"/?after={forged}"), size=2)[0]] == ids[:2]


def test_it_computes_the_same_content_hash_for_the_same_content():
    data = question_data()
    question = services.create_question(data=data)
    assert question.content_hash == services.hash_content(services.content_of(data))
    assert question.content_hash == services.hash_content(services.content_of(question))
