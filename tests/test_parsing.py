"""The structured-output parser: what judge models really send back, in
Chinese, and the guarantee that nothing in it is ever run or silently dropped."""

import ast
import builtins
import json
import random
import time
from pathlib import Path

import pytest

from inference import parsing
from inference.parsing import (
    KINDS,
    SCHEMAS,
    ParseResult,
    ParseStatus,
    label_code,
    parse,
    parse_direct_judgment,
    parse_restructured_solution,
    parse_step_judgment,
    parse_step_split,
    parse_structure_check,
    response_format,
)
from k12vista.vocabulary import LABEL_CODES, LABELS_BY_CODE

STEPS = [
    {"step": "由图可知，AB=3，BC=4，∠B=90°", "label": "CS", "reason": "读图正确"},
    {"step": "由勾股定理得 AC=\\sqrt{3^2+4^2}=\\sqrt{24}", "label": "CE", "reason": "3²+4²=25，不是24"},
    {"step": "所以 AC 约为 4.9", "label": "CE", "reason": "沿用了上一步的错误结果"},
]
DIRECT = {
    "reference_answers": ["肌肉", "瓣膜", "肺循环", "C"],
    "model_answers": ["结缔", "瓣膜", "肺循环", "空"],
    "scores": [0, 1, 1, 0],
}


def assert_failed(result: ParseResult, *fragments: str) -> None:
    assert result.status == ParseStatus.FAILED
    assert result.value is None
    for fragment in fragments:
        assert fragment in result.error


# --- Schemas ---------------------------------------------------------------


def walk_objects(schema):
    if schema.get("type") == "object":
        yield schema
        for value in schema["properties"].values():
            yield from walk_objects(value)
    if schema.get("type") == "array":
        yield from walk_objects(schema["items"])


@pytest.mark.parametrize("kind", KINDS)
def test_it_builds_a_strict_response_format_for_each_kind(kind):
    fmt = response_format(kind)
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == kind
    assert fmt["json_schema"]["strict"] is True
    # OpenAI strict mode: every object closed and every property required.
    for obj in walk_objects(fmt["json_schema"]["schema"]):
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])


def test_it_offers_exactly_the_nine_label_codes():
    steps = SCHEMAS["step_judgment"]["properties"]["steps"]["items"]
    assert steps["properties"]["label"]["enum"] == list(LABEL_CODES)


def test_it_gives_each_caller_its_own_copy_of_a_schema():
    response_format("step_split")["json_schema"]["schema"]["properties"].clear()
    assert "steps" in response_format("step_split")["json_schema"]["schema"]["properties"]


def test_it_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown output kind"):
        response_format("essay")
    with pytest.raises(ValueError, match="unknown output kind"):
        parse("essay", "{}")


def test_it_returns_values_that_the_schemas_accept():
    jsonschema = pytest.importorskip("jsonschema")
    samples = {
        "direct_judgment": parse_direct_judgment(json.dumps(DIRECT)),
        "step_judgment": parse_step_judgment("[['步骤一', '步骤正确', ''], ['步骤二', 'ce', '算错']]"),
        "step_split": parse_step_split("['第一步', '第二步']"),
        "restructured_solution": parse_restructured_solution('{"steps": ["Step1: 观察晶胞结构"]}'),
        "structure_check": parse_structure_check(
            '{"ok": "false", "problems": [{"code": "no_answer", "message": "缺少答案"}]}'
        ),
    }
    for kind, result in samples.items():
        assert result.usable, result.error
        jsonschema.validate(result.value, SCHEMAS[kind])


# --- Step judgments: clean and wrapped -------------------------------------


def test_it_accepts_clean_json_as_ok():
    result = parse_step_judgment(json.dumps({"steps": STEPS}, ensure_ascii=False))
    assert result.status == ParseStatus.OK
    assert result.value == {"steps": STEPS}
    assert result.notes == []


def test_it_finds_fenced_json_among_prose():
    text = (
        "好的，下面是我对学生解题过程的评估。\n\n```json\n"
        + json.dumps({"steps": STEPS}, ensure_ascii=False, indent=2)
        + "\n```\n\n以上就是评估结果，共3步，其中2步有误。"
    )
    result = parse_step_judgment(text)
    assert result.status == ParseStatus.OK
    assert result.value == {"steps": STEPS}


def test_it_finds_json_after_a_thinking_section():
    text = "思考过程：学生先读图，再用勾股定理，计算出错。\n最终输出：\n" + json.dumps(
        {"steps": STEPS}, ensure_ascii=False
    )
    assert parse_step_judgment(text).value == {"steps": STEPS}


def test_it_prefers_the_answer_to_fragments_quoted_in_the_reasoning():
    text = (
        '分析：标签只能取 ["CS", "CE"] 等九类之一，学生答案为 [3, 4]。\n'
        + json.dumps({"steps": STEPS}, ensure_ascii=False)
        + "\n注：第[2]步有误。"
    )
    assert parse_step_judgment(text).value == {"steps": STEPS}


def test_it_reads_only_what_follows_a_reasoning_models_think_block():
    text = '<think>先写个草稿 [["草稿", "CS", ""]]，不对，重新评估。</think>\n' + json.dumps({"steps": STEPS})
    assert parse_step_judgment(text).value == {"steps": STEPS}


def test_it_reads_past_an_unclosed_bracket_in_the_reasoning():
    text = "f(x) 在区间 [1, 2 上单调递增，故学生第二步正确。\n" + json.dumps({"steps": STEPS}, ensure_ascii=False)
    result = parse_step_judgment(text)
    assert result.status == "ok"  # statuses compare equal to their plain strings
    assert result.value == {"steps": STEPS}


def test_it_says_when_there_is_no_structure_at_all():
    assert_failed(parse_step_judgment("学生的解题过程基本正确，只有第二步计算有误。"), "no JSON object or list found")


# --- Step judgments: the reference formats ---------------------------------


def test_it_reads_the_reference_triples_with_single_quotes():
    # The reference prompt's own example, as a judge copies its layout.
    text = """[
['题目给出了中药板蓝根颗粒的说明书,要求根据说明书的内容回答几个问题。',  '步骤正确',  '步骤描述清晰明确，未出现错误'],
['注意事项和作用类别等项目',  '逻辑过程错误',  '未明确评价项目的顺序和论证支持 ,应循序推理。'],
['但说明有效期应2012年之前使用',  '运算处理错误',  '日期推算错误。']
]"""
    result = parse_step_judgment(text)
    assert result.status == ParseStatus.REPAIRED
    assert [step["label"] for step in result.value["steps"]] == ["CS", "LRE", "CE"]
    # Full-width commas inside the text stay as written (the reference replaced them).
    assert result.value["steps"][0]["reason"] == "步骤描述清晰明确，未出现错误"
    assert parsing.NOTE_QUOTES in result.notes


def test_it_reads_three_lists_in_an_evaluation_block():
    text = (
        "<evaluation>[['由图可知AB=3', '由勾股定理得AC=5'], ['步骤正确', '运算处理错误'], "
        "['读图正确', '计算错误']]</evaluation>"
    )
    result = parse_step_judgment(text)
    assert result.status == ParseStatus.REPAIRED
    assert result.value["steps"][1] == {"step": "由勾股定理得AC=5", "label": "CE", "reason": "计算错误"}
    assert any("three lists" in note for note in result.notes)


def test_it_tells_three_triples_from_three_columns_by_the_labels():
    triples = [["第一步", "CS", "对"], ["第二步", "CE", "错"], ["第三步", "IAE", "缺答案"]]
    columns = [list(column) for column in zip(*triples, strict=True)]
    assert parse_step_judgment(json.dumps(triples)).value == parse_step_judgment(json.dumps(columns)).value
    assert [s["label"] for s in parse_step_judgment(json.dumps(columns)).value["steps"]] == ["CS", "CE", "IAE"]


def test_it_unwraps_the_extra_list_level_the_reference_allows():
    result = parse_step_judgment("[[['设AC=x', '步骤正确', '设元合理']]]")
    assert result.value == {"steps": [{"step": "设AC=x", "label": "CS", "reason": "设元合理"}]}
    assert "unwrapped an extra list level" in result.notes


def test_it_reads_full_width_commas_and_brackets():
    text = "［［'由图知∠B=90°'，'步骤正确'，'读图正确'］，【'3+4=8'，'运算处理错误'，'3+4应为7'】］"
    result = parse_step_judgment(text)
    assert result.status == ParseStatus.REPAIRED
    assert [s["label"] for s in result.value["steps"]] == ["CS", "CE"]
    assert parsing.NOTE_FULLWIDTH in result.notes


def test_it_reads_a_full_width_colon_and_curly_quotes():
    text = "{“steps”：[{“step”：“列方程 2x+1=5”，“label”：“CS”，“reason”：“方程正确”}]}"
    result = parse_step_judgment(text)
    assert result.value == {"steps": [{"step": "列方程 2x+1=5", "label": "CS", "reason": "方程正确"}]}


def test_it_ignores_trailing_commas():
    result = parse_step_judgment('{"steps": [{"step": "x=2", "label": "CS", "reason": "",},],}')
    assert result.value["steps"] == [{"step": "x=2", "label": "CS", "reason": ""}]
    assert parsing.NOTE_TRAILING in result.notes


def test_it_reads_python_literals_and_tuples():
    result = parse_step_judgment("[('x=2', 'CS', None)]")
    assert result.value["steps"] == [{"step": "x=2", "label": "CS", "reason": ""}]
    assert parsing.NOTE_PYTHON in result.notes
    assert parsing.NOTE_TUPLE in result.notes


def test_it_keeps_unescaped_quotes_inside_chinese_text():
    text = '[["学生把"肌肉"写成了"结缔"", "知识应用错误", "混淆了"组织"的类型"]]'
    result = parse_step_judgment(text)
    assert result.value["steps"][0]["step"] == '学生把"肌肉"写成了"结缔"'
    assert result.value["steps"][0]["reason"] == '混淆了"组织"的类型'
    assert parsing.NOTE_INNER_QUOTE in result.notes


def test_it_keeps_latex_that_a_judge_did_not_escape():
    text = (
        r'{"steps": [{"step": "AC=\sqrt{25}=5，\frac{1}{2}\times 10 = 5，\beta \neq 0", "label": "CS", "reason": ""}]}'
    )
    result = parse_step_judgment(text)
    assert result.status == ParseStatus.REPAIRED
    assert result.value["steps"][0]["step"] == r"AC=\sqrt{25}=5，\frac{1}{2}\times 10 = 5，\beta \neq 0"
    assert parsing.NOTE_LATEX in result.notes


def test_it_repairs_latex_that_strict_json_would_turn_into_control_characters():
    # Valid JSON, but \f and \t would silently become a form feed and a tab.
    text = r'{"steps": [{"step": "\frac{1}{2}\times 4 = 2", "label": "CS", "reason": ""}]}'
    result = parse_step_judgment(text)
    assert result.value["steps"][0]["step"] == r"\frac{1}{2}\times 4 = 2"
    assert result.status == ParseStatus.REPAIRED


def test_it_keeps_properly_escaped_latex_and_line_breaks_as_ok():
    step = "由 \\frac{a}{b}=2\n得 a=2b"
    result = parse_step_judgment(json.dumps({"steps": [{"step": step, "label": "CS", "reason": ""}]}))
    assert result.status == ParseStatus.OK
    assert result.value["steps"][0]["step"] == step


# --- Labels ----------------------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        "CE",
        "ce",
        " Ce ",
        "运算处理错误",
        "Calculation error",
        "calculation_error",
        "【CE】",
        "[CE]",
        "CE：运算处理错误",
    ],
)
def test_it_reads_a_label_written_any_accepted_way(written):
    assert label_code(written) == "CE"
    result = parse_step_judgment(json.dumps([["3+4=8", written, "3+4应为7"]], ensure_ascii=False))
    assert result.value["steps"][0]["label"] == "CE"


def test_it_reads_a_chinese_name_with_its_code_in_brackets():
    assert label_code("题意理解错误（QM）") == "QM"
    assert label_code("Image cognition error (ICE)") == "ICE"


def test_it_fails_on_an_unknown_label_and_names_it():
    result = parse_step_judgment("[['设AC=x', '步骤正确', ''], ['3+4=8', '计算错误', '算错了']]")
    assert_failed(result, "step 2", "'计算错误'")


def test_it_does_not_accept_the_vague_label_the_prompt_forbids():
    assert_failed(parse_step_judgment("[['3+4=8', '步骤错误', '算错了']]"), "'步骤错误'")


def test_it_refuses_a_decorated_label_whose_parts_disagree():
    with pytest.raises(ValueError, match="unknown step label"):
        label_code("CE：步骤正确")
    with pytest.raises(ValueError, match="unknown step label"):
        label_code("步骤错误：运算处理错误")


def test_it_refuses_a_label_that_is_not_text():
    assert_failed(parse_step_judgment('[["x=2", 7, "理由"]]'), "step 1", "unknown step label 7")


def test_it_reports_an_error_label_without_a_reason_but_keeps_the_step():
    steps = [{"step": "x=2", "label": "CS", "reason": ""}, {"step": "y=5", "label": "HE", "reason": "  "}]
    result = parse_step_judgment(json.dumps({"steps": steps}))
    assert result.status == ParseStatus.OK
    assert result.value == {"steps": steps}
    assert result.notes == ["step 2 is labelled HE but gives no reason"]


# --- Step judgments: failures ----------------------------------------------


def test_it_fails_when_the_three_lists_differ_in_length():
    text = "<evaluation>[['第一步', '第二步', '第三步'], ['步骤正确', '运算处理错误'], ['对', '错', '错']]</evaluation>"
    assert_failed(parse_step_judgment(text), "steps has 3", "labels has 2", "reasons has 3")


def test_it_fails_on_a_triple_without_its_reason():
    text = "[['第一步', '步骤正确', '对'], ['第二步', '运算处理错误'], ['第三步', '步骤正确', '对']]"
    assert_failed(parse_step_judgment(text), "step 2 has 2 fields")


def test_it_fails_on_a_step_object_missing_a_field():
    assert_failed(parse_step_judgment('{"steps": [{"step": "x=2", "label": "CS"}]}'), "step 1 is missing 'reason'")


def test_it_fails_on_a_judgment_with_no_steps():
    assert_failed(parse_step_judgment('{"steps": []}'), "no steps")


def test_it_fails_on_a_step_without_text():
    assert_failed(parse_step_judgment('[["  ", "CS", ""]]'), "step 1 has no text")


def test_it_fails_on_a_response_cut_at_max_tokens():
    full = json.dumps({"steps": STEPS}, ensure_ascii=False)
    for cut in (len(full) // 3, len(full) // 2, len(full) - 2):
        assert_failed(parse_step_judgment(full[:cut]), "cut off", "max_tokens")


def test_it_fails_on_an_evaluation_block_that_never_closes():
    assert_failed(parse_direct_judgment('<evaluation>[["肌肉","瓣膜"],["结缔","瓣'), "<evaluation>", "cut off")


@pytest.mark.parametrize("text", ["", "   \n\t", None])
def test_it_fails_on_an_empty_response(text):
    assert_failed(parse_step_judgment(text), "empty response")


def test_it_fails_on_a_response_that_is_not_text():
    assert_failed(parse_step_split(b'{"steps": ["x"]}'), "bytes, not text")


def test_it_fails_on_a_response_over_the_size_limit():
    assert_failed(parse_step_split("[" + '"步骤",' * parsing.MAX_CHARS + "]"), "over the")


def test_it_fails_on_deeply_nested_junk_without_blowing_the_stack():
    started = time.monotonic()
    for junk in ("[" * 50_000 + "]" * 50_000, "[" * 50_000, '{"a":' * 20_000 + "1" + "}" * 20_000, "[1," * 30_000):
        result = parse_step_judgment(junk)
        assert result.status == ParseStatus.FAILED
        assert result.error
    assert time.monotonic() - started < 10


def test_it_fails_on_nesting_just_past_the_limit():
    depth = parsing.MAX_DEPTH + 1
    assert_failed(parse_step_split("[" * depth + '"x"' + "]" * depth), "nested more than")


def test_it_does_not_fall_back_to_a_fragment_when_the_answer_is_invalid():
    # The real answer has an unknown label; the quoted fragment would validate.
    text = '示例：[["x=1", "CS", ""]]\n' + json.dumps([["3+4=8", "计算错误", "算错"], ["所以AC=5", "CS", "对"]])
    assert_failed(parse_step_judgment(text), "'计算错误'")


# --- Nothing is ever run ---------------------------------------------------

PAYLOAD = "[['x=2', 'CS', __import__('builtins').k12vista_sentinel('pwned')]]"


def test_it_never_runs_code_in_the_response(monkeypatch):
    calls = []
    monkeypatch.setattr(builtins, "k12vista_sentinel", calls.append, raising=False)
    # The sentinel is live: the reference code's eval would have called it.
    eval(PAYLOAD)  # noqa: S307 - our own constant, to prove the sentinel works
    assert calls == ["pwned"]
    calls.clear()
    for text in (PAYLOAD, f"<evaluation>{PAYLOAD}</evaluation>", f"```python\n{PAYLOAD}\n```"):
        result = parse_step_judgment(text)
        assert_failed(result, "unexpected name '__import__'", "nothing is evaluated")
    assert calls == []


def test_it_does_not_run_os_commands_hidden_in_a_judgment(tmp_path):
    sentinel = tmp_path / "pwned"
    text = f"[['x=2', '步骤正确', __import__('os').system('touch {sentinel}')]]"
    for parser in (parse_step_judgment, parse_step_split, parse_direct_judgment, parse_structure_check):
        assert parser(text).status == ParseStatus.FAILED
    assert not sentinel.exists()


def test_it_keeps_code_that_is_only_quoted_as_plain_text():
    text = json.dumps([["执行 __import__('os').system('ls')", "HE", "学生编造了不存在的函数"]], ensure_ascii=False)
    assert parse_step_judgment(text).value["steps"][0]["step"] == "执行 __import__('os').system('ls')"


def test_it_parses_without_eval_exec_or_compile(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the parser must not evaluate text")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    monkeypatch.setattr(ast, "literal_eval", forbidden)
    assert parse_step_judgment("[['x=2', '步骤正确', '', ], ]").usable
    assert parse_direct_judgment(f"<evaluation>{json.dumps(list(DIRECT.values()))}</evaluation>").usable


def test_it_imports_nothing_but_the_standard_library_pydantic_and_the_vocabulary():
    modules = set()
    for path in Path(parsing.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                modules.add(node.module)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"eval", "exec", "compile"}:
                pytest.fail(f"{node.func.id} called in {path.name}")
    own = {"inference.parsing.formats", "inference.parsing.reader", "inference.parsing.results",
           "inference.parsing.literal"}  # fmt: skip
    # ast parses the reference protocol's literals (parsing.literal), operator computes their arithmetic.
    stdlib = {"__future__", "ast", "copy", "enum", "json", "operator", "re", "collections.abc", "dataclasses", "typing"}
    assert modules <= stdlib | own | {"pydantic", "k12vista.vocabulary"}


# --- Direct judgments ------------------------------------------------------


def test_it_accepts_a_clean_direct_judgment():
    result = parse_direct_judgment(json.dumps(DIRECT, ensure_ascii=False))
    assert result.status == ParseStatus.OK
    assert result.value == DIRECT


def test_it_reads_the_reference_evaluation_format():
    text = (
        "###提取参考答案列表:\n['肌肉','瓣膜','肺循环','C']\n###提取学生回答列表:\n['结缔','瓣膜','肺循环','空']\n"
        '<evaluation>[["肌肉","瓣膜","肺循环","C"],["结缔","瓣膜","肺循环","空"],[0,1,1,0]]</evaluation>'
    )
    result = parse_direct_judgment(text)
    assert result.status == ParseStatus.REPAIRED
    assert result.value == DIRECT


def test_it_reads_the_last_evaluation_block_when_the_example_is_echoed():
    text = (
        '格式如下:<evaluation>[["参考答案1","参考答案2"],["学生答案1","学生答案2"],[0,1]]</evaluation>\n'
        '我的评估：<evaluation>[["B", "18.9%", "0.8Kg"], ["B", "7.1%", "空"], [1, 0, 0]]</evaluation>'
    )
    assert parse_direct_judgment(text).value == {
        "reference_answers": ["B", "18.9%", "0.8Kg"],
        "model_answers": ["B", "7.1%", "空"],
        "scores": [1, 0, 0],
    }


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ('["正确", "错误"]', [1, 0]),
        ("[true, false]", [1, 0]),
        ("[True, False]", [1, 0]),
        ('["1", "0"]', [1, 0]),
        ("[1.0, 0.0]", [1, 0]),
    ],
)
def test_it_reads_scores_written_as_words_or_booleans(written, expected):
    result = parse_direct_judgment(f'<evaluation>[["A", "B"], ["A", "C"], {written}]</evaluation>')
    assert result.status == ParseStatus.REPAIRED
    assert result.value["scores"] == expected


@pytest.mark.parametrize("score", ["2", "0.5", '"部分正确"', "null"])
def test_it_fails_on_a_score_that_is_not_zero_or_one(score):
    result = parse_direct_judgment(f'<evaluation>[["A", "B"], ["A", "C"], [1, {score}]]</evaluation>')
    assert_failed(result, "score 2", "expected 0 or 1")


def test_it_fails_when_the_direct_lists_differ_in_length_and_says_how():
    text = '<evaluation>[["肌肉","瓣膜","肺循环","C"],["结缔","瓣膜","肺循环"],[0,1,1,0]]</evaluation>'
    assert_failed(parse_direct_judgment(text), "reference_answers has 4", "model_answers has 3", "scores has 4")


def test_it_fails_on_a_direct_judgment_with_no_sub_answers():
    assert_failed(
        parse_direct_judgment('{"reference_answers": [], "model_answers": [], "scores": []}'), "no sub-answers"
    )


def test_it_reads_numeric_answers_as_text():
    result = parse_direct_judgment("<evaluation>[[18.9, 2], ['18.9', '3'], [1, 0]]</evaluation>")
    assert result.value["reference_answers"] == ["18.9", "2"]
    assert "read numbers as text" in result.notes


def test_it_fails_on_a_direct_judgment_of_the_wrong_shape():
    assert_failed(parse_direct_judgment("<evaluation>[[1, 0, 1]]</evaluation>"), "expected an object")
    assert_failed(parse_direct_judgment('{"scores": [1]}'), "missing 'reference_answers', 'model_answers'")


def test_it_fails_on_a_repeated_key_rather_than_keeping_one():
    for text in ('{"steps": ["第一步"], "steps": ["第二步"]}', "{'steps': ['第一步'], 'steps': ['第二步']}"):
        assert_failed(parse_step_split(text), "key 'steps' appears twice")


def test_it_notes_keys_it_ignored():
    result = parse_direct_judgment(json.dumps({**DIRECT, "total": 0.5}))
    assert result.status == ParseStatus.REPAIRED
    assert result.notes == ["ignored unexpected keys: total"]


# --- Step splits and restructured solutions --------------------------------


def test_it_reads_a_step_split():
    steps = ["由图可知AB=3，BC=4", "由勾股定理得AC=5", "所以答案为5"]
    result = parse_step_split(json.dumps({"steps": steps}, ensure_ascii=False))
    assert result.status == ParseStatus.OK
    assert result.value == {"steps": steps}


def test_it_reads_a_bare_list_of_steps():
    result = parse_restructured_solution("```\n['Step1: 观察晶胞结构', 'Step2: 与甲烷结构相同']\n```")
    assert result.status == ParseStatus.REPAIRED
    assert result.value == {"steps": ["Step1: 观察晶胞结构", "Step2: 与甲烷结构相同"]}


def test_it_fails_on_an_empty_step_rather_than_dropping_it():
    assert_failed(parse_step_split('{"steps": ["第一步", "", "第三步"]}'), "step 2 is empty")


def test_it_fails_on_a_step_that_is_not_text():
    assert_failed(parse_step_split('{"steps": ["第一步", ["嵌套"]]}'), "step 2 must be text")


# --- Structure checks ------------------------------------------------------


def test_it_reads_a_passing_structure_check():
    result = parse_structure_check('{"ok": true, "problems": []}')
    assert result.status == ParseStatus.OK
    assert result.value == {"ok": True, "problems": []}


def test_it_reads_a_failing_structure_check():
    problems = [{"code": "missing_answer", "message": "缺少标准答案"}, {"code": "garbled", "message": "题干乱码"}]
    text = json.dumps({"ok": False, "problems": problems}, ensure_ascii=False)
    result = parse_structure_check(text)
    assert result.value["problems"][1] == {"code": "garbled", "message": "题干乱码"}


def test_it_notes_a_structure_check_that_contradicts_itself():
    assert parse_structure_check('{"ok": true, "problems": [{"code": "x", "message": "题干乱码"}]}').notes == [
        "says ok but lists 1 problem(s)"
    ]
    assert parse_structure_check('{"ok": false, "problems": []}').notes == ["says not ok but lists no problems"]


def test_it_fails_on_a_structure_check_with_a_malformed_problem():
    assert_failed(parse_structure_check('{"ok": false, "problems": ["题干乱码"]}'), "problem 1 must be an object")
    assert_failed(parse_structure_check('{"ok": "也许", "problems": []}'), "'ok' is '也许'")


# --- Round trip over generated judgments -----------------------------------

PIECES = [
    "由图可知",
    "设AC=x",
    "所以",
    "∠B=90°",
    "3+4=7",
    "\\frac{1}{2}",
    "\\sqrt{3}",
    "\\times",
    "\\neq",
    "，",
    "。",
    "“瓣膜”",
    '"肌肉"',
    "'结缔'",
    "109°28'",
    " ",
    "\n因此",
    "x",
    "Na₂CO₃",
    "[1]",
    "{a}",
]


def random_text(rng: random.Random, allow_empty: bool = False) -> str:
    text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0 if allow_empty else 1, 6)))
    return text if allow_empty or text.strip() else "步骤"


def written_label(rng: random.Random, code: str) -> str:
    label = LABELS_BY_CODE[code]
    return rng.choice([code, code.lower(), label.chinese, label.english, f"【{code}】", f"{code}：{label.chinese}"])


def random_steps(rng: random.Random) -> list[dict[str, str]]:
    return [
        {"step": random_text(rng), "label": rng.choice(LABEL_CODES), "reason": random_text(rng, allow_empty=True)}
        for _ in range(rng.randint(1, 6))
    ]


def python_list(items, separator=", ") -> str:
    return "[" + separator.join(python_list(i, separator) if isinstance(i, list) else repr(i) for i in items) + "]"


def step_formats(rng: random.Random, steps):
    labelled = [[s["step"], written_label(rng, s["label"]), s["reason"]] for s in steps]
    columns = [list(column) for column in zip(*labelled, strict=True)]
    yield json.dumps({"steps": steps}, ensure_ascii=rng.random() < 0.5)
    yield "评估如下：\n```json\n" + json.dumps({"steps": steps}, ensure_ascii=False, indent=2) + "\n```\n以上。"
    yield python_list(labelled)
    yield python_list(labelled, separator="，")
    yield f"<evaluation>{python_list(columns)}</evaluation>"
    yield f"<evaluation>{json.dumps(columns, ensure_ascii=False)}</evaluation>"


def test_it_round_trips_generated_step_judgments_in_every_format():
    rng = random.Random(20261129)
    for _ in range(300):
        steps = random_steps(rng)
        for text in step_formats(rng, steps):
            result = parse_step_judgment(text)
            assert result.value == {"steps": steps}, (text, result.error)


def test_it_round_trips_generated_direct_judgments_in_every_format():
    rng = random.Random(7)
    for _ in range(300):
        size = rng.randint(1, 5)
        judgment = {
            "reference_answers": [random_text(rng) for _ in range(size)],
            "model_answers": [random_text(rng, allow_empty=True) for _ in range(size)],
            "scores": [rng.randint(0, 1) for _ in range(size)],
        }
        words = [rng.choice([["错误", "正确"], [False, True], ["0", "1"]])[score] for score in judgment["scores"]]
        columns = [judgment["reference_answers"], judgment["model_answers"], judgment["scores"]]
        for text in (
            json.dumps(judgment, ensure_ascii=False),
            f"<evaluation>{json.dumps(columns, ensure_ascii=False)}</evaluation>",
            f"评估结果：<evaluation>{python_list(columns)}</evaluation>",
            f"<evaluation>{python_list(columns[:2] + [words])}</evaluation>",
        ):
            result = parse_direct_judgment(text)
            assert result.value == judgment, (text, result.error)


def test_it_round_trips_generated_step_splits():
    rng = random.Random(3)
    for _ in range(300):
        steps = [random_text(rng) for _ in range(rng.randint(1, 8))]
        for text in (json.dumps({"steps": steps}, ensure_ascii=False), python_list(steps)):
            assert parse_step_split(text).value == {"steps": steps}, text


def test_a_value_that_leaves_its_format_is_refused_not_returned(monkeypatch):
    # The format's pydantic model is the last word: a normaliser that let an
    # empty step list through would fail the parse, never reach a caller.
    broken = parsing.formats.OutputFormat(parsing.formats.StepTexts, lambda data, notes: {"steps": []})
    monkeypatch.setitem(parsing.FORMATS, "step_split", broken)
    assert_failed(parse_step_split('{"steps": ["第一步"]}'), "does not match the format")
