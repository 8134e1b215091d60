"""The prompts a fresh studio starts with, in Chinese (PIPELINE.md: stage 1 OCR,
2 structure check, 4 solution rewrite, 7 step splitting and labelling, 9 answering
and judging; captions for text-only models).

Pure Python on purpose: the inference app copies these into PromptTemplate rows
(one version each), and scripts and tests read them without a database. The text
is ours; it follows the pipeline's descriptions, not the paper's figures.

Placeholders are ``${name}`` only, see ``_BracedTemplate``. A value is inserted
verbatim and never scanned again, so question text with LaTeX is always safe.
"""

from __future__ import annotations

import hashlib
import json
import string
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from k12vista.vocabulary import QUESTION_TYPE_ZH, STEP_LABELS, QuestionType


class PromptKind(StrEnum):
    # The same values as inference.models.PromptTemplate.Kind (a test holds them together).
    ANSWER_DIRECT = "answer_direct"
    ANSWER_STEP_BY_STEP = "answer_step_by_step"
    JUDGE_DIRECT = "judge_direct"
    JUDGE_STEPS = "judge_steps"
    SPLIT_STEPS = "split_steps"
    RESTRUCTURE_SOLUTION = "restructure_solution"
    CAPTION_IMAGE = "caption_image"
    OCR_PAGE = "ocr_page"
    SEGMENT_PAGE = "segment_page"
    CHECK_STRUCTURE = "check_structure"
    JUDGE_STEPS_TRAINED = "judge_steps_trained"  # written by the trainer that made the judge, no default
    JUDGE_GIVEN_STEPS = "judge_given_steps"  # registered from the reference repository, no default


# Kinds whose versions come from elsewhere (a trained judge's own prompt) and have no default here.
KINDS_WITHOUT_DEFAULT = frozenset({PromptKind.JUDGE_STEPS_TRAINED, PromptKind.JUDGE_GIVEN_STEPS})


class OutputKind(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


# Every name a default template may use; what each one holds:
PLACEHOLDERS = frozenset(
    {
        "question",  # the question text, LaTeX in $...$
        "options",  # multiple choice: one option a line, "A. ..."
        "question_with_options",  # the text, then its options one a line (a chain of thought's question)
        "reference_answer",  # the sub-answers, in order
        "reference_answer_lines",  # the sub-answers one a line (a chain of thought's reference answer)
        "reference_solution",  # the reference solution, one step a line
        "model_answer",  # a model's raw output
        "steps",  # reserved for step lists; no default template uses it yet
        "caption",  # figure_description(...) for text-only models, "" otherwise
        "subject",  # Chinese subject name, 数学
        "grade",  # Chinese grade or stage, 九年级 / 初中
        "raw_solution",  # a solution as imported, before restructuring
        "page_text",  # a PDF page's text layer as extracted, "" for a scan (segment_page)
    }
)

# Answer formats the parsers of model output rely on.
FINAL_ANSWER_PREFIX = "最终答案："
STEP_PREFIX = "步骤"  # followed by the number and "：", 步骤1：
BLANK_SEPARATOR = "；"  # between the answers of a fill-in-blank question

# Problems the structure check may report (stage 2); code -> what it means.
STRUCTURE_PROBLEMS: dict[str, str] = {
    "missing_answer": "缺少答案，或答案为空、与题目无关",
    "garbled_text": "题干、选项或答案中有乱码、残缺字符或无法解析的 LaTeX",
    "incomplete_question": "题干不完整，缺少作答所需的条件或设问",
    "incomplete_options": "选择题的选项不是四个，或选项缺失、重复、内容残缺",
    "incomplete_metadata": "学科或年级缺失，或与题目内容明显不符",
    "other": "其他使题目无法正常使用的问题",
}


# _BracedTemplate's pattern, as text (string.Template's __init_subclass__ compiles it). The flags and the
# pattern are given as string.Template's documentation shows, an int and a str; its stubs expect them compiled.
_BRACED_ONLY = r"""
    \$(?:
        \{(?P<braced>[a-z_][a-z0-9_]*)\}
      | (?P<escaped>(?!))
      | (?P<named>(?!))
      | (?P<invalid>(?!))
    )
    """


class _BracedTemplate(string.Template):
    """``${name}`` and nothing else is a placeholder.

    LaTeX puts ``$`` before almost anything (``$x^2$``, ``$$\\frac{1}{2}$$``,
    ``${}^{14}\\mathrm{C}$``), and both LaTeX and the JSON examples in these
    prompts are full of braces. ``str.format`` would need every literal brace
    doubled; plain ``string.Template`` would read ``$x`` as a placeholder and
    ``$$`` as an escaped dollar. This pattern matches only a dollar, a brace and a
    lower-case identifier; the other groups ``string.Template`` insists on are
    there but can never match, so any other ``$`` is left exactly as written.
    """

    flags = 0  # type: ignore[assignment]  # lower case only: ${X} is left alone
    pattern = _BRACED_ONLY  # type: ignore[assignment]


class MissingPlaceholderError(ValueError):
    """A template needs values that the caller did not pass."""

    def __init__(self, prompt_name: str, names: list[str]):
        self.prompt_name = prompt_name
        self.names = names
        listed = ", ".join("${" + name + "}" for name in names)
        super().__init__(f"prompt {prompt_name!r} needs a value for {listed}")


class TemplateText(Protocol):
    """What ``render`` needs: a DefaultPrompt or a PromptTemplate row."""

    @property
    def name(self) -> str: ...
    @property
    def system(self) -> str: ...
    @property
    def user_template(self) -> str: ...


@dataclass(frozen=True)
class DefaultPrompt:
    kind: PromptKind
    question_type: QuestionType | None  # None for kinds that do not depend on it
    name: str
    system: str
    user_template: str
    output_kind: OutputKind


def placeholders(prompt: TemplateText) -> frozenset[str]:
    """The names the prompt's system and user text use."""
    found: set[str] = set()
    for text in (prompt.system, prompt.user_template):
        found.update(_BracedTemplate(text).get_identifiers())
    return frozenset(found)


def render(prompt: TemplateText, **values: object) -> tuple[str, str]:
    """Returns (system, user) with every ``${name}`` replaced.

    Values the prompt does not use are ignored, so a caller can pass the same set
    for every kind. A missing value, or None, raises MissingPlaceholderError
    naming each one: an empty section in a prompt is a silent change to the
    experiment. Pass "" where emptiness is meant (no options, no caption).
    """
    given = {name: str(value) for name, value in values.items() if value is not None}
    missing = sorted(placeholders(prompt) - given.keys())
    if missing:
        raise MissingPlaceholderError(prompt.name, missing)
    return (
        _BracedTemplate(prompt.system).substitute(given),
        _BracedTemplate(prompt.user_template).substitute(given),
    )


def hash_prompt_text(*, kind: str, question_type: str | None, system: str, user_template: str) -> str:
    """sha256 over what changes a prompt's behaviour; the name is left out."""
    # JSON of a list keeps the fields apart: no choice of separator can collide.
    fields = [_plain(kind), _plain(question_type or ""), system, user_template]
    payload = json.dumps(fields, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _plain(code: str) -> str:
    # An enum member hashes as its stored value, like the database row would.
    return str(getattr(code, "value", code))


def content_hash(prompt: DefaultPrompt) -> str:
    return hash_prompt_text(
        kind=prompt.kind,
        question_type=prompt.question_type,
        system=prompt.system,
        user_template=prompt.user_template,
    )


def figure_description(caption: str | None) -> str:
    """The ``${caption}`` value of an answer prompt: a headed block for text-only
    models, or "" when the model sees the image itself."""
    if not caption or not caption.strip():
        return ""
    return f"【图片内容】（题目配图的文字描述）\n{caption.strip()}\n\n"


def default_prompt(kind: str, question_type: str | None = None) -> DefaultPrompt:
    """The default for a kind; answering kinds also need the question type, the
    others ignore it (so a caller may pass a question's type to any kind)."""
    prompt_kind = PromptKind(kind)
    qtype = QuestionType(question_type) if question_type else None
    prompt = _BY_KEY.get((prompt_kind, qtype)) or _BY_KEY.get((prompt_kind, None))
    if prompt is None:
        raise LookupError(f"no default prompt for kind {kind!r} and question type {question_type!r}")
    return prompt


# The template texts. Lines stay short because ruff counts a Chinese character
# as two columns.


def _text(block: str) -> str:
    return textwrap.dedent(block).strip()


def _json_example(example: Mapping[str, object]) -> str:
    # Generated from a dict so that the example is valid JSON by construction.
    return "```json\n" + json.dumps(example, ensure_ascii=False, indent=2) + "\n```"


_JSON_RULES = _text(
    r"""
    只输出一个 JSON 对象，不要输出解释、标题或其他任何文字。
    JSON 字符串中的 LaTeX 反斜杠必须写成两个，例如 "\\frac{1}{2}"；
    字符串内的双引号写成 \"。
    """
)

_ANSWER_SYSTEM = _text(
    """
    你是一位经验丰富的中国中小学理科教师，熟悉数学、物理、化学、生物和地理的考试题目。
    题目可能配有图片，图中的数据、标注和位置关系都是解题条件，请仔细观察后再作答。
    数学表达式请用 LaTeX 书写，行内公式用 $...$ 包裹。
    """
)


@dataclass(frozen=True)
class _AnswerFormat:
    """How one question type states its final answer."""

    body: str  # where the question sits, with options for multiple choice
    rule: str  # what the final answer holds
    example: str  # the final answer's exact form


_ANSWER_FORMATS = {
    QuestionType.MULTIPLE_CHOICE: _AnswerFormat(
        body="${question}\n\n【选项】\n${options}",
        # A letter placeholder, not a real letter: an example "B" nudges models towards B.
        rule="本题只有一个正确选项。最终答案中的 X 换成所选选项的字母（A、B、C 或 D），不写选项内容。",
        example=f"{FINAL_ANSWER_PREFIX}X",
    ),
    QuestionType.FILL_IN_BLANK: _AnswerFormat(
        body="${question}",
        rule=(
            f"按空在题中出现的顺序依次写出每个空的答案，相邻两空之间用中文分号“{BLANK_SEPARATOR}”隔开；\n"
            "只填答案本身，不要重复题干，数值请带上题目要求的单位。"
        ),
        example=f"{FINAL_ANSWER_PREFIX}第1空的答案{BLANK_SEPARATOR}第2空的答案",
    ),
    QuestionType.FREE_RESPONSE: _AnswerFormat(
        body="${question}",
        rule=(
            "题目有多个小问时，按小问顺序每行写一个小问的结论，行首写小问序号；\n"
            "只有一问时直接写结论。结论要完整，数值请带上单位。"
        ),
        example=f"{FINAL_ANSWER_PREFIX}\n（1）第1小问的结论\n（2）第2小问的结论",
    ),
}


def _answer_heading(question_type: QuestionType) -> str:
    return f"${{caption}}【题目】（${{subject}}，${{grade}}，{QUESTION_TYPE_ZH[question_type]}）"


def _answer_direct(question_type: QuestionType) -> DefaultPrompt:
    form = _ANSWER_FORMATS[question_type]
    # The fixed instructions first, the question's own parts last: a run's requests share a long prefix.
    user = "\n".join(
        [
            "【作答要求】",
            "请直接给出答案：不要写分析、推理、公式推导或计算过程，也不要解释理由。",
            form.rule,
            "请严格按下面的格式输出，除此之外不要输出任何内容：",
            form.example,
            "",
            _answer_heading(question_type),
            form.body,
        ]
    )
    return DefaultPrompt(
        kind=PromptKind.ANSWER_DIRECT,
        question_type=question_type,
        name=f"直接作答·{QUESTION_TYPE_ZH[question_type]}",
        system=_ANSWER_SYSTEM,
        user_template=user,
        output_kind=OutputKind.TEXT,
    )


def _answer_step_by_step(question_type: QuestionType) -> DefaultPrompt:
    form = _ANSWER_FORMATS[question_type]
    user = "\n".join(
        [
            "【作答要求】",
            "请一步一步地推理求解，把解题过程写成编号的步骤，每个步骤单独起一行：",
            f"{STEP_PREFIX}1：……",
            f"{STEP_PREFIX}2：……",
            "每一步只完成一件事，例如读出图中的某个数据、写出所用的公式或定理、代入计算、得出某一小问的结论。",
            "所有步骤写完后，在最后另起一行给出最终答案。",
            form.rule,
            "最终答案的格式：",
            form.example,
            "",
            _answer_heading(question_type),
            form.body,
        ]
    )
    return DefaultPrompt(
        kind=PromptKind.ANSWER_STEP_BY_STEP,
        question_type=question_type,
        name=f"分步作答·{QUESTION_TYPE_ZH[question_type]}",
        system=_ANSWER_SYSTEM,
        user_template=user,
        output_kind=OutputKind.TEXT,
    )


_JUDGE_DIRECT = DefaultPrompt(
    kind=PromptKind.JUDGE_DIRECT,
    question_type=None,
    name="直接作答评分",
    system=_text(
        """
        你是一位认真细致的阅卷老师。你的工作是把学生的答案与标准答案逐项比对并打分，
        不需要重新解题，也不评价学生的书写或过程。
        """
    ),
    user_template="\n".join(
        [
            _text(
                """
                本题的题目、标准答案、参考解析和学生的回答在最后给出。请按顺序完成：
                1. 读懂题目，确定它一共要求几个答案：每个空、每个小问各算一个，选择题算一个。
                2. 从标准答案中按顺序提取这些答案，写入 reference_answers。
                3. 在学生的回答中找到与每个答案对应的最终结论，按相同顺序写入 model_answers；
                   学生没有回答的位置写空字符串 ""。
                4. 逐个比较：意义一致记 1 分，否则记 0 分，写入 scores。
                   写法不同但等价（如 0.5 与 $\\frac{1}{2}$、化简前后相同、单位换算正确）算一致；
                   选择题只看所选选项是否正确；缺少题目要求的单位或只答对一部分记 0 分。
                三个列表的长度必须相同，并且一一对应。

                【输出格式】
                """
            ),
            _JSON_RULES,
            "示例（两个答案，学生答对第一个）：",
            _json_example(
                {
                    "reference_answers": ["$x=3$", "增大"],
                    "model_answers": ["$x=3$", "减小"],
                    "scores": [1, 0],
                }
            ),
            "",  # the item's own parts last: a scoring run's requests share everything above
            _text(
                """
                【题目】（${subject}，${grade}）
                ${question}
                ${options}

                【标准答案】
                ${reference_answer}

                【参考解析】
                ${reference_solution}

                【学生回答】
                ${model_answer}
                """
            ),
        ]
    ),
    output_kind=OutputKind.JSON,
)


def _label_block() -> str:
    # Built from the vocabulary so that the prompt and the database never disagree.
    return "\n".join(f"- {label.code}（{label.chinese}）：{label.definition_zh}" for label in STEP_LABELS)


_JUDGE_STEPS = DefaultPrompt(
    kind=PromptKind.JUDGE_STEPS,
    question_type=None,
    name="分步评价",
    system=_text(
        """
        你是一位解题过程评价专家，负责逐步检查学生的解题过程，判断每一步是否正确，
        并指出错误步骤的错误类型。评价以题目、配图、标准答案和参考解析为依据。
        """
    ),
    user_template="\n".join(
        [
            _text(
                """
                本题的题目、标准答案、参考解析，以及学生的解答过程在最后给出。请完成两件事：
                一、把学生的解答拆分成若干步骤。每一步是一个相对独立的推理或计算环节，
                    得出某一小问结论的那一步单独成为一步。步骤内容照抄学生原文，不改写、不补充、不纠错。
                二、为每一步给出一个判定标签（只写下面的代码），并用一两句话说明理由；
                    判为错误时，理由要指出具体错在哪里。

                【判定标签】
                """
            ),
            _label_block(),
            "",
            _text(
                """
                【判定规则】
                - 每一步只给一个标签；一步里有多处错误时，选择最主要的那一种。
                - 学生没有给出最终答案，或漏答了某个小问时，把最后一步标为 IAE，并在理由中说明缺了什么。
                - 不要因为与参考解析的方法不同就判错，只要推理与结果正确即为 CS。

                【输出格式】
                """
            ),
            _JSON_RULES,
            "steps 按学生解答的顺序排列，示例：",
            _json_example(
                {
                    "steps": [
                        {
                            "step": "由图可知 $AB=4$，$BC=3$，且 $\\angle B=90^{\\circ}$。",
                            "label": "CS",
                            "reason": "正确读出了图中的边长和直角。",
                        },
                        {
                            "step": "由勾股定理，$AC=\\sqrt{4^{2}+3^{2}}=7$。",
                            "label": "CE",
                            "reason": "公式使用正确，但 $\\sqrt{25}=5$，计算结果错误。",
                        },
                    ]
                }
            ),
            "",
            _text(
                """
                【题目】（${subject}，${grade}）
                ${question}

                【标准答案】
                ${reference_answer}

                【参考解析】
                ${reference_solution}

                【学生的解答过程】
                ${model_answer}
                """
            ),
        ]
    ),
    output_kind=OutputKind.JSON,
)


_SPLIT_STEPS = DefaultPrompt(
    kind=PromptKind.SPLIT_STEPS,
    question_type=None,
    name="解答过程拆分",
    system=_text(
        """
        你负责把一段解题过程整理成有序的步骤列表，供后续逐步评价使用。
        你只做拆分，不判断对错，也不修改内容。
        """
    ),
    user_template="\n".join(
        [
            _text(
                """
                请把下面的解答过程拆分成步骤：
                - 每一步是一个逻辑上相对独立的环节，例如读取条件、列式、计算、得出结论；
                  得出某一小问结论的那一步单独成为一步。
                - 步骤内容使用原文，不改写、不总结、不纠正其中的错误，也不添加原文没有的内容。
                - 原文的所有内容都要出现在某一步中，顺序保持不变；与解题无关的客套话可以省略。

                【输出格式】
                """
            ),
            _JSON_RULES,
            "示例：",
            _json_example(
                {
                    "steps": [
                        "已知 $f(x)=x^{2}-2x$，把 $x=3$ 代入。",
                        "$f(3)=3^{2}-2\\times 3=3$。",
                        "所以 $f(3)$ 的值为 $3$。",
                    ]
                }
            ),
            "",
            _text(
                """
                【题目】
                ${question}

                【解答过程】
                ${model_answer}
                """
            ),
        ]
    ),
    output_kind=OutputKind.JSON,
)


_RESTRUCTURE_SOLUTION = DefaultPrompt(
    kind=PromptKind.RESTRUCTURE_SOLUTION,
    question_type=None,
    name="参考解析分步整理",
    system=_text(
        """
        你是一位负责整理题库解析的教研老师。你要把原始解析改写成条理清楚的分步解答，
        内容必须与原始解析一致。
        """
    ),
    user_template="\n".join(
        [
            _text(
                """
                请把最后给出的原始解析整理成编号清楚、按顺序排列的解题步骤：
                - 保留原始解析中的全部条件、公式、数据和结论，不增加新的方法或知识，不改变答案。
                - 每一步只写一个推理或计算环节，语句通顺完整；最后一步给出题目的最终结论。
                - 原始解析中有乱码或排版问题时只修正格式；公式统一用 LaTeX，行内公式用 $...$ 包裹。
                - 列表中每个元素是一步，按顺序排列，开头不要写“步骤1：”之类的编号。

                【输出格式】
                """
            ),
            _JSON_RULES,
            "示例：",
            _json_example(
                {
                    "steps": [
                        "由题意，$f(x)=x^{2}-2x$。",
                        "将 $x=3$ 代入，得 $f(3)=9-6=3$。",
                        "所以 $f(3)=3$。",
                    ]
                }
            ),
            "",
            _text(
                """
                【题目】（${subject}，${grade}）
                ${question}

                【答案】
                ${reference_answer}

                【原始解析】
                ${raw_solution}
                """
            ),
        ]
    ),
    output_kind=OutputKind.JSON,
)


_CAPTION_IMAGE = DefaultPrompt(
    kind=PromptKind.CAPTION_IMAGE,
    question_type=None,
    name="题图文字描述",
    system=_text(
        """
        你负责把试题配图转写成文字，供看不到图片的模型解题使用。
        描述要准确、完整、客观，只写图中确实有的内容。
        """
    ),
    user_template=_text(
        """
        请描述本题的配图，题目在最后给出。

        【描述要求】
        1. 先说明图的类型，例如几何图形、函数图像、统计图表、实验装置图、电路图、地图、生物结构示意图。
        2. 写出图中所有的数字、字母、符号、文字标注和单位，说明它们标在什么位置。
        3. 有坐标轴时，写出轴的名称、单位、刻度和范围，以及曲线经过的关键点、交点和走势。
        4. 写出图形之间的关系，例如平行、垂直、相切、相交，点在哪条线上，物体之间如何连接或放置。
        5. 表格请用 Markdown 表格完整转写；地图请写出图例、方向、经纬度等信息。
        6. 看不清的内容写“（无法辨认）”，不要猜测。
        7. 不要解题，不要推断题目的答案，也不要写图中没有的结论。

        直接输出描述文字，公式用 LaTeX 并以 $...$ 包裹。

        【题目】（${subject}，${grade}）
        ${question}
        """
    ),
    output_kind=OutputKind.TEXT,
)


_OCR_PAGE = DefaultPrompt(
    kind=PromptKind.OCR_PAGE,
    question_type=None,
    name="试卷页面识别",
    system=_text(
        """
        你是一位试卷录入员，负责把试卷页面的图片逐字转写成 Markdown 文本。
        你只转写，不解题，不补充，也不修改原文。
        """
    ),
    user_template=_text(
        """
        请把这页试卷转写为 Markdown，要求如下：
        1. 按阅读顺序逐字转写，保留原文的题号（如“1.”“（2）”）和大题标题。
        2. 所有数学、物理、化学公式和符号都用 LaTeX 书写：行内公式用 $...$，单独成行的公式用 $$...$$。
        3. 选择题的每个选项单独一行，写成“A. 选项内容”的形式，不要遗漏任何选项。
        4. 填空题的横线或括号空位统一写成 ___，不要填入任何内容。
        5. 题目中的图片、插图在其所在位置写 [图]，不要描述图片内容；表格用 Markdown 表格转写。
        6. 页眉、页脚、页码和装订线上的文字不要转写；看不清的字写 [?]。
        7. 只输出转写后的 Markdown，不要加说明，也不要用代码块包裹。
        """
    ),
    output_kind=OutputKind.MARKDOWN,
)


_SEGMENT_PAGE = DefaultPrompt(
    kind=PromptKind.SEGMENT_PAGE,
    question_type=None,
    name="试卷页面切题",
    system=_text(
        """
        你是一位试卷录入员，负责从试卷页面的图片中找出每一道题，并给出它在页面上的位置。
        你只录入，不解题，不补充，也不修改原文。
        """
    ),
    user_template="\n".join(
        [
            _text(
                """
                请找出这页试卷上的每一道题（按题号），要求如下：
                1. number 为试卷上印的题号（整数）；只写这一页上印出的题，不要补写缺失的题号。
                2. box 为这道题（题干、选项、图）在页面上所占区域 [x0, y0, x1, y1]，
                   以页面宽、高的千分之一为单位（左上角为 0，右下角为 1000）。
                3. type 为 multiple_choice（选择题）、fill_in_blank（填空题）或 free_response（解答题等）。
                4. text 为题干原文（不含题号和选项），公式用 LaTeX 并以 $...$ 包裹，填空处写 ___。
                5. options 为选项（label 为 A、B、C…，text 为选项内容），非选择题为空列表。
                6. answer、solution 为页面上印出的答案和解析，没有则为空字符串，不要自己解题。
                7. 页眉、页脚、页码、大题标题和注意事项都不是题。

                下面是这页的文字层（扫描页为空），可用来核对文字，但位置以图片为准：
                ${page_text}

                【输出格式】
                """
            ),
            _JSON_RULES,
            "示例：",
            _json_example(
                {
                    "questions": [
                        {
                            "number": 1,
                            "box": [80, 120, 480, 260],
                            "type": "multiple_choice",
                            "text": "下列各数中，最大的数是（  ）",
                            "options": [{"label": "A", "text": "$-1$"}, {"label": "B", "text": "$0$"}],
                            "answer": "",
                            "solution": "",
                        }
                    ]
                }
            ),
        ]
    ),
    output_kind=OutputKind.JSON,
)


_CHECK_STRUCTURE = DefaultPrompt(
    kind=PromptKind.CHECK_STRUCTURE,
    question_type=None,
    name="题目结构检查",
    system=_text(
        """
        你是一位题库质检员，负责检查题目数据是否完整、可用。
        你只检查结构问题，不判断答案的对错，也不解题。
        """
    ),
    user_template="\n".join(
        [
            _text(
                """
                请检查下面这道题的数据。

                【学科】${subject}
                【年级】${grade}
                【题目】
                ${question}

                【选项】（非选择题此处为空）
                ${options}

                【答案】
                ${reference_answer}

                【解析】
                ${reference_solution}

                【需要检查的问题】（code：含义）
                """
            ),
            "\n".join(f"- {code}：{meaning}" for code, meaning in STRUCTURE_PROBLEMS.items()),
            "",
            _text(
                """
                【输出格式】
                没有问题时 ok 为 true，problems 为空列表；发现问题时 ok 为 false，
                每个问题写一项，code 只能取上面列出的代码，message 用一句中文说明具体情况。
                """
            ),
            _JSON_RULES,
            "示例（发现一个问题）：",
            _json_example(
                {
                    "ok": False,
                    "problems": [{"code": "incomplete_options", "message": "题目是选择题，但只有 A、B、C 三个选项。"}],
                }
            ),
        ]
    ),
    output_kind=OutputKind.JSON,
)


DEFAULT_PROMPTS: tuple[DefaultPrompt, ...] = (
    *(_answer_direct(question_type) for question_type in QuestionType),
    *(_answer_step_by_step(question_type) for question_type in QuestionType),
    _JUDGE_DIRECT,
    _JUDGE_STEPS,
    _SPLIT_STEPS,
    _RESTRUCTURE_SOLUTION,
    _CAPTION_IMAGE,
    _OCR_PAGE,
    _SEGMENT_PAGE,
    _CHECK_STRUCTURE,
)

_BY_KEY = {(prompt.kind, prompt.question_type): prompt for prompt in DEFAULT_PROMPTS}
