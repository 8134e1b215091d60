"""The shared vocabulary every app speaks: subjects, grades and stages, question
types and the nine step labels (PIPELINE.md; the paper's appendix C.1).

Codes are what the database stores and files carry; names are what people read.
Chinese names are data (they appear in the reference release files), so they are
kept verbatim rather than routed through gettext; English names and definitions
are translatable.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from django.db import models
from django.utils import translation
from django.utils.translation import gettext_lazy as _

from k12vista.line_reasons import ReasonError, reason


class Subject(models.TextChoices):
    MATH = "math", _("Mathematics")
    PHYSICS = "physics", _("Physics")
    CHEMISTRY = "chemistry", _("Chemistry")
    BIOLOGY = "biology", _("Biology")
    GEOGRAPHY = "geography", _("Geography")


SUBJECT_ZH = {
    Subject.MATH: "数学",
    Subject.PHYSICS: "物理",
    Subject.CHEMISTRY: "化学",
    Subject.BIOLOGY: "生物",
    Subject.GEOGRAPHY: "地理",
}


class Stage(models.TextChoices):
    PRIMARY = "primary", _("Primary school (grades 1-6)")
    MIDDLE = "middle", _("Middle school (grades 7-9)")
    HIGH = "high", _("High school (grades 10-12)")


STAGE_ZH = {Stage.PRIMARY: "小学", Stage.MIDDLE: "初中", Stage.HIGH: "高中"}

GRADES = range(1, 13)

# The last grade of each stage; the reference release tags items by it
# (math-g6 is primary math, physics-g12 is high-school physics).
STAGE_LAST_GRADE = {Stage.PRIMARY: 6, Stage.MIDDLE: 9, Stage.HIGH: 12}


def stage_of_grade(grade: int) -> Stage:
    if not 1 <= grade <= 12:
        raise ValueError(f"grade must be 1-12, got {grade!r}")
    if grade <= 6:
        return Stage.PRIMARY
    if grade <= 9:
        return Stage.MIDDLE
    return Stage.HIGH


def release_tag(subject: str, grade: int) -> str:
    """The reference release's subject tag, such as ``math-g9``."""
    return f"{Subject(subject).value}-g{STAGE_LAST_GRADE[stage_of_grade(grade)]}"


def parse_release_tag(tag: str) -> tuple[Subject, Stage]:
    """``physics-g12`` -> (physics, high). Raises ValueError naming the tag."""
    subject, sep, grade = tag.strip().partition("-g")
    try:
        if not sep:
            raise ValueError
        return Subject(subject), stage_of_grade(int(grade))
    except ValueError:
        raise ReasonError(reason("unknown_subject_tag", value=repr(tag))) from None


# The eleven subject-stage cells of the reference release (primary is math only).
RELEASE_TAGS = [
    "math-g6",
    "math-g9",
    "math-g12",
    "physics-g9",
    "physics-g12",
    "chemistry-g9",
    "chemistry-g12",
    "biology-g9",
    "biology-g12",
    "geography-g9",
    "geography-g12",
]


class QuestionType(models.TextChoices):
    MULTIPLE_CHOICE = "multiple_choice", _("Multiple choice")
    FILL_IN_BLANK = "fill_in_blank", _("Fill in the blank")
    FREE_RESPONSE = "free_response", _("Free response")


QUESTION_TYPE_ZH = {
    QuestionType.MULTIPLE_CHOICE: "选择题",
    QuestionType.FILL_IN_BLANK: "填空题",
    QuestionType.FREE_RESPONSE: "问答题",
}


def question_type_from_name(name: str) -> QuestionType:
    """Accepts our code or the Chinese name the reference files use."""
    name = name.strip()
    for qtype, zh in QUESTION_TYPE_ZH.items():
        if name in (qtype.value, zh):
            return qtype
    raise ReasonError(reason("unknown_type", value=repr(name), choices=", ".join(QUESTION_TYPE_ZH.values())))


@dataclass(frozen=True)
class StepLabel:
    code: str
    english: str
    chinese: str
    definition: str
    definition_zh: str

    @property
    def is_error(self) -> bool:
        return self.code != "CS"

    @property
    def name(self) -> str:
        """The name in the reader's language: Chinese unless English is chosen."""
        return self.english if (translation.get_language() or "").startswith("en") else self.chinese

    @property
    def explanation(self) -> str:
        """The definition in the reader's language."""
        return self.definition if (translation.get_language() or "").startswith("en") else self.definition_zh

    def __str__(self) -> str:
        return f"{self.code} {self.chinese} / {self.english}"


# Order matters: it is the order of keys 1-9 on the labelling screen and of the
# paper's Table 9 columns.
STEP_LABELS: tuple[StepLabel, ...] = (
    StepLabel(
        "CS",
        "Correct step",
        "步骤正确",
        "The step is correct and moves the solution forward.",
        "步骤正确，推动解答向前。",
    ),
    StepLabel(
        "ICE",
        "Image cognition error",
        "图像认知错误",
        "Misreads charts, graphs, objects, spatial relations or values in the figure "
        "(for example coordinate axes, geometric shapes, readings from a scale).",
        "对图表、图形、物体、空间关系或数值的识别错误（如坐标轴、几何形状、刻度读数）。",
    ),
    StepLabel(
        "QM",
        "Question misunderstanding",
        "题意理解错误",
        "Misreads the question's requirements, conditions or key information, or ignores a constraint.",
        "对题目要求、条件或关键信息理解错误，或忽略了限制条件。",
    ),
    StepLabel(
        "LRK",
        "Lack of relevant knowledge",
        "缺乏相关知识",
        "Lacks or fails to integrate the subject knowledge needed, or uses a wrong method.",
        "缺乏或未能整合所需的学科知识，或使用了错误的方法。",
    ),
    StepLabel(
        "KAE",
        "Knowledge application error",
        "知识应用错误",
        "Knows the concept but misapplies a principle, formula or theorem.",
        "掌握了概念，但错误地运用了原理、公式或定理。",
    ),
    StepLabel(
        "LRE",
        "Logical reasoning error",
        "逻辑过程错误",
        "Breaks the chain of reasoning: misused premises, insufficient evidence or a flawed argument.",
        "推理链条断裂：前提使用不当、证据不足或论证有误。",
    ),
    StepLabel(
        "HE",
        "Hallucination error",
        "幻觉错误",
        "States facts or conditions that are false, contradictory or unfounded.",
        "陈述了错误、矛盾或没有根据的事实或条件。",
    ),
    StepLabel("CE", "Calculation error", "运算处理错误", "An arithmetic or algebraic slip.", "算术或代数运算失误。"),
    StepLabel(
        "IAE",
        "Incomplete answer error",
        "回答不完整错误",
        "Gives no final answer, or leaves out parts of a multi-part answer.",
        "没有给出最终答案，或遗漏了多问题目中的部分答案。",
    ),
)

LABELS_BY_CODE = {label.code: label for label in STEP_LABELS}
LABEL_CODES = tuple(LABELS_BY_CODE)
CORRECT = "CS"

# Database choices; the display shows both names, as the labelling team reads both.
STEP_LABEL_CHOICES = [(label.code, f"{label.code} · {label.chinese} / {label.english}") for label in STEP_LABELS]

# Taxonomy revisions are recorded on every judgment so that labels made under an
# older definition can be told apart.
TAXONOMY_VERSION = "k12vista-9.v1"


def label_from_name(name: str) -> StepLabel:
    """Finds a label by code, English or Chinese name, case and spacing ignored.

    Model output and reference files use all three forms; anything else is an
    error the caller must report, never a silent default. Full-width letters
    and spaces (ＣＥ, 　) are read as their ASCII forms (NFKC), and spaces
    inside a Chinese name (步骤 正确) are ignored, since Chinese has none.
    """
    key = " ".join(unicodedata.normalize("NFKC", name).replace("_", " ").split()).casefold()
    for label in STEP_LABELS:
        if key in (label.code.casefold(), label.english.casefold()) or key.replace(" ", "") == label.chinese:
            return label
    raise ValueError(f"unknown step label {name!r}")
