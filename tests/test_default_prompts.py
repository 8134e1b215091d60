import ast
import hashlib
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from inference import default_prompts
from inference.default_prompts import (
    DEFAULT_PROMPTS,
    FINAL_ANSWER_PREFIX,
    KINDS_WITHOUT_DEFAULT,
    PLACEHOLDERS,
    STRUCTURE_PROBLEMS,
    MissingPlaceholderError,
    OutputKind,
    PromptKind,
    content_hash,
    default_prompt,
    figure_description,
    hash_prompt_text,
    placeholders,
    render,
)
from k12vista.vocabulary import LABEL_CODES, QUESTION_TYPE_ZH, STEP_LABELS, QuestionType

# What a question from the bank looks like: LaTeX with dollars and braces everywhere.
VALUES = {
    "question": "已知 $f(x)=x^{2}-2x$，求 $f(3)$ 的值。",
    "options": "A. $3$\nB. $-1$\nC. $\\frac{1}{2}$\nD. $15$",
    "reference_answer": "$3$",
    "reference_solution": "$f(3)=3^{2}-2\\times 3$\n$=9-6=3$",
    "model_answer": "步骤1：代入 $x=3$，得 $f(3)=3^{2}-2\\times3=3$。\n最终答案：$3$",
    "steps": '["$f(3)=9-6$", "$=3$"]',
    "caption": figure_description("抛物线 $y=x^{2}-2x$ 经过点 $(0,0)$ 和 $(2,0)$，顶点为 $(1,-1)$。"),
    "subject": "数学",
    "grade": "九年级",
    "raw_solution": "解：$f(3)=9-6=3$，故填 $3$。另见 ${}^{14}\\mathrm{C}$ 与 $$\\sum_{i=1}^{n} i$$。",
    "page_text": "一、选择题\n1．若 $x^{2}=4$，则 $x$ 的值是（  ）",
}

ANSWER_KINDS = {PromptKind.ANSWER_DIRECT, PromptKind.ANSWER_STEP_BY_STEP}
JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def by_kind(kind):
    return default_prompt(kind)


def json_example(prompt):
    blocks = JSON_BLOCK.findall(prompt.system + "\n" + prompt.user_template)
    assert len(blocks) == 1
    return json.loads(blocks[0])


def test_it_has_each_kind_and_type_exactly_once():
    keys = Counter((prompt.kind, prompt.question_type) for prompt in DEFAULT_PROMPTS)
    expected = {(kind, qtype) for kind in ANSWER_KINDS for qtype in QuestionType}
    expected |= {(kind, None) for kind in PromptKind if kind not in ANSWER_KINDS | KINDS_WITHOUT_DEFAULT}
    assert set(keys) == expected
    assert set(keys.values()) == {1}
    assert len(DEFAULT_PROMPTS) == 14
    assert len({prompt.name for prompt in DEFAULT_PROMPTS}) == 14


def test_it_uses_the_kinds_the_prompt_model_stores():
    from inference.models import PromptTemplate

    assert {kind.value for kind in PromptKind} == set(PromptTemplate.Kind.values)


def test_it_finds_a_default_by_kind_and_type():
    prompt = default_prompt("answer_direct", "fill_in_blank")
    assert prompt.question_type == QuestionType.FILL_IN_BLANK
    assert QUESTION_TYPE_ZH[QuestionType.FILL_IN_BLANK] in prompt.user_template
    # Kinds that do not depend on the type take any question's type.
    assert default_prompt("judge_steps", "free_response") is default_prompt("judge_steps")
    with pytest.raises(LookupError, match="answer_direct"):
        default_prompt("answer_direct")


@pytest.mark.parametrize("prompt", DEFAULT_PROMPTS, ids=lambda p: f"{p.kind}-{p.question_type}")
def test_it_uses_only_known_placeholders(prompt):
    assert placeholders(prompt) <= PLACEHOLDERS


@pytest.mark.parametrize("prompt", DEFAULT_PROMPTS, ids=lambda p: f"{p.kind}-{p.question_type}")
def test_it_renders_every_prompt_with_latex_values_untouched(prompt):
    system, user = render(prompt, **VALUES)

    def by_hand(text):
        for name in placeholders(prompt):
            text = text.replace("${" + name + "}", VALUES[name])
        return text

    # Nothing but the placeholders changed, and each value went in verbatim.
    assert (system, user) == (by_hand(prompt.system), by_hand(prompt.user_template))
    for name in placeholders(prompt):
        assert VALUES[name] in system + user
    assert "${" not in user.replace("${}^{14}", "")


def test_it_leaves_latex_dollars_in_template_text_alone():
    text = "求 $x^2$ 与 $$\\frac{1}{2}$$，${}^{14}\\mathrm{C}$，$question 与 ${X} 不是占位符：${question}"
    prompt = replace(by_kind("ocr_page"), system="$$a$$ 与 $b$", user_template=text)
    system, user = render(prompt, question="$y=\\sqrt{x}$")
    assert system == "$$a$$ 与 $b$"
    assert user == "求 $x^2$ 与 $$\\frac{1}{2}$$，${}^{14}\\mathrm{C}$，$question 与 ${X} 不是占位符：$y=\\sqrt{x}$"


def test_it_does_not_expand_placeholders_inside_values():
    prompt = default_prompt("split_steps")
    _, user = render(prompt, question="看 ${model_answer} 与 $a$", model_answer="${question}")
    assert "看 ${model_answer} 与 $a$" in user
    assert "【解答过程】\n${question}" in user


def test_it_names_each_missing_placeholder():
    prompt = default_prompt("judge_direct")
    values = {name: VALUES[name] for name in ("question", "options", "subject", "grade", "reference_answer")}
    with pytest.raises(MissingPlaceholderError, match=r"\$\{model_answer\}, \$\{reference_solution\}") as caught:
        render(prompt, **values)
    assert caught.value.names == ["model_answer", "reference_solution"]
    assert "直接作答评分" in str(caught.value)


def test_it_treats_none_as_missing_but_accepts_empty_text():
    prompt = default_prompt("answer_direct", "multiple_choice")
    with pytest.raises(MissingPlaceholderError, match="caption"):
        render(prompt, **{**VALUES, "caption": None})
    _, user = render(prompt, **{**VALUES, "caption": ""})
    # The instructions first, the question after them (prefix caching: bench/prefix_share.py).
    assert user.startswith("【作答要求】")
    assert "\n\n【题目】（数学，九年级，选择题）\n已知 $f(x)=x^{2}-2x$" in user


def test_it_ignores_values_a_prompt_does_not_use():
    prompt = default_prompt("ocr_page")
    assert placeholders(prompt) == frozenset()
    assert render(prompt, **VALUES) == (prompt.system, prompt.user_template)


def test_it_puts_a_caption_block_before_the_question_for_text_only_models():
    assert figure_description(None) == figure_description("  ") == ""
    _, user = render(default_prompt("answer_step_by_step", "free_response"), **VALUES)
    # After the fixed instructions, right before the question it describes.
    where = [user.index(text) for text in ("【作答要求】", "\n\n【图片内容】", "顶点为 $(1,-1)$", "【题目】")]
    assert where == sorted(where)


@pytest.mark.parametrize("qtype", list(QuestionType))
def test_it_asks_for_the_answer_only_in_direct_mode(qtype):
    prompt = default_prompt("answer_direct", qtype)
    assert "不要写分析、推理" in prompt.user_template
    assert "步骤1" not in prompt.user_template
    assert prompt.user_template.count(FINAL_ANSWER_PREFIX) == 1
    assert ("${options}" in prompt.user_template) == (qtype == QuestionType.MULTIPLE_CHOICE)
    assert prompt.output_kind == OutputKind.TEXT


@pytest.mark.parametrize("qtype", list(QuestionType))
def test_it_asks_for_numbered_steps_then_a_final_answer_in_step_mode(qtype):
    user = default_prompt("answer_step_by_step", qtype).user_template
    assert "步骤1：" in user
    assert "步骤2：" in user
    assert user.index("步骤1：") < user.rindex(FINAL_ANSWER_PREFIX)
    assert ("${options}" in user) == (qtype == QuestionType.MULTIPLE_CHOICE)


def test_it_lists_the_nine_labels_with_their_chinese_names():
    user = default_prompt("judge_steps").user_template
    for label in STEP_LABELS:
        assert f"- {label.code}（{label.chinese}）：{label.definition_zh}" in user
    listed = re.findall(r"^- ([A-Z]+)（", user, re.MULTILINE)
    assert listed == list(LABEL_CODES)


def test_it_takes_the_label_definitions_from_the_vocabulary_not_a_copy():
    source = Path(default_prompts.__file__).read_text(encoding="utf-8")
    for label in STEP_LABELS:
        assert label.definition_zh not in source
        assert label.chinese not in source


def test_it_shows_the_direct_judge_its_output_keys():
    example = json_example(default_prompt("judge_direct"))
    assert list(example) == ["reference_answers", "model_answers", "scores"]
    assert len(example["reference_answers"]) == len(example["model_answers"]) == len(example["scores"])
    assert set(example["scores"]) <= {0, 1}


def test_it_shows_the_step_judge_its_output_keys():
    example = json_example(default_prompt("judge_steps"))
    assert list(example) == ["steps"]
    for step in example["steps"]:
        assert list(step) == ["step", "label", "reason"]
        assert step["label"] in LABEL_CODES
    # The example survives a JSON round trip with its LaTeX backslashes intact.
    assert "\\sqrt{4^{2}+3^{2}}" in example["steps"][1]["step"]


@pytest.mark.parametrize("kind", ["split_steps", "restructure_solution"])
def test_it_shows_step_lists_as_a_list_of_strings(kind):
    example = json_example(default_prompt(kind))
    assert list(example) == ["steps"]
    assert all(isinstance(step, str) for step in example["steps"])


def test_it_shows_the_structure_check_its_output_keys_and_codes():
    prompt = default_prompt("check_structure")
    example = json_example(prompt)
    assert list(example) == ["ok", "problems"]
    assert example["ok"] is False
    assert [list(problem) for problem in example["problems"]] == [["code", "message"]]
    for code in STRUCTURE_PROBLEMS:
        assert f"- {code}：" in prompt.user_template
    assert example["problems"][0]["code"] in STRUCTURE_PROBLEMS


@pytest.mark.parametrize("prompt", DEFAULT_PROMPTS, ids=lambda p: f"{p.kind}-{p.question_type}")
def test_it_shows_a_json_example_exactly_when_json_is_expected(prompt):
    blocks = JSON_BLOCK.findall(prompt.user_template)
    assert len(blocks) == (1 if prompt.output_kind == OutputKind.JSON else 0)


def test_it_asks_for_the_ocr_conventions():
    user = default_prompt("ocr_page").user_template
    for convention in ("$...$", "[图]", "___", "A. "):
        assert convention in user
    assert default_prompt("ocr_page").output_kind == OutputKind.MARKDOWN


def test_it_hashes_the_same_content_the_same_way():
    prompt = default_prompt("judge_steps")
    copy = replace(prompt, name="renamed")  # the name is a label, not content
    assert content_hash(prompt) == content_hash(copy) == content_hash(prompt)
    assert re.fullmatch(r"[0-9a-f]{64}", content_hash(prompt))
    # A database row stores plain strings; it must hash like the enum members.
    assert content_hash(prompt) == hash_prompt_text(
        kind="judge_steps", question_type="", system=prompt.system, user_template=prompt.user_template
    )


def test_it_pins_the_hash_algorithm():
    expected = hashlib.sha256(
        json.dumps(["answer_direct", "fill_in_blank", "系统 $x$", "题目 ${question}"], ensure_ascii=False).encode()
    ).hexdigest()
    got = hash_prompt_text(
        kind=PromptKind.ANSWER_DIRECT,
        question_type=QuestionType.FILL_IN_BLANK,
        system="系统 $x$",
        user_template="题目 ${question}",
    )
    assert got == expected == "1d8e728c3ade01d8c40d35404840536f4487b91207b19968e619315fd6fa7e51"


@pytest.mark.parametrize(
    "change",
    [
        {"system": "改过的系统提示"},
        {"user_template": "改过的 ${question}"},
        {"kind": PromptKind.JUDGE_DIRECT},
        {"question_type": QuestionType.FREE_RESPONSE},
    ],
    ids=lambda change: next(iter(change)),
)
def test_it_changes_the_hash_when_the_content_changes(change):
    prompt = default_prompt("answer_direct", "multiple_choice")
    assert content_hash(replace(prompt, **change)) != content_hash(prompt)
    # One added character is enough.
    assert content_hash(replace(prompt, user_template=prompt.user_template + "。")) != content_hash(prompt)


def test_it_gives_every_default_its_own_hash():
    assert len({content_hash(prompt) for prompt in DEFAULT_PROMPTS}) == len(DEFAULT_PROMPTS)


def test_it_imports_only_the_standard_library_and_the_vocabulary():
    tree = ast.parse(Path(default_prompts.__file__).read_text(encoding="utf-8"))
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    allowed = {"__future__", "collections.abc", "dataclasses", "enum", "typing", "k12vista.vocabulary"}
    assert modules <= allowed | {"hashlib", "json", "string", "textwrap"}
