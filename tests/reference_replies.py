"""A corpus of judge replies, written here (no reference text), in the forms judges really
produce: well formed, with text around, several blocks, <think> sections, LaTeX backslashes,
wrong lengths, unknown labels, full-width punctuation, cut off. Built by combining wrappers
with bodies, so that every body is seen in every position a judge puts it."""

from __future__ import annotations

import itertools

CORRECT = "步骤正确"
ERRORS = [
    "图像认知错误", "题意理解错误", "缺乏相关知识", "知识应用错误",
    "逻辑过程错误", "幻觉错误", "运算处理错误", "回答不完整错误",
]  # fmt: skip

# --- direct mode: what goes inside <evaluation> ... </evaluation> ---------------------------

DIRECT_BODIES = [
    '[["A"],["A"],[1]]',
    '[["B"],["C"],[0]]',
    '[["3","5"],["3","4"],[1,0]]',
    '[["x=2", "y=3", "z=1"], ["x=2", "y=3", "z=1"], [1, 1, 1]]',
    "[['4'],['4'],[1]]",
    '[["1"],["1"],["1"]]',
    '[["1"],["1"],[True]]',
    '[["1"],["2"],[False]]',
    '[["1"],["1"],[1.0]]',
    '[["1","2"],["1","3"],[1, 0.5]]',
    '[["1","2"],["1","3"],[1, 1/2]]',
    '[["a"],["a"],[2]]',
    '[["a"],["b"],[-1]]',
    '[["a","b"],["a"],[1,0]]',
    '[["a"],["a","b","c"],[1]]',
    '[["a"],["a"],[]]',
    '[["a"],["a"]]',
    '[["a"],["a"],[1],[1]]',
    '[["a"],["a"],"1"]',
    '[["a"],["a"],"10"]',
    '[["a"],["a"],1]',
    '[["a"],["a"],["yes"]]',
    '[["a"],["a"],[null]]',
    '[["a"],["a"],[None]]',
    '(["a"],["a"],[1])',
    '{"ref": ["a"], "stu": ["a"], "score": [1]}',
    '[["a"],["a"],[1],]',
    '[["$\\frac{1}{2}$"],["$\\frac{1}{2}$"],[1]]',
    '[["\\sqrt{2}"],["\\sqrt{3}"],[0]]',
    '[["\\(x^2\\)"],["\\(x^2\\)"],[1]]',
    '[["\\\\frac{a}{b}"],["a/b"],[1]]',
    '[["\\n"],["\\t"],[1]]',
    '[["a\\"b"],["a"],[1]]',
    "[[“A”],[“A”],[1]]",
    '[["A"]，["A"]，[1]]',
    '[["A"],["A"],[1，0]]',
    '[["A", "B"],\n ["A", "C"],\n [1, 0]]',
    '[["A"], # the reference\n ["A"], [1]]',
    "[[A],[A],[1]]",
    '[["A"],["A"],[1]',
    '[["A"],["A"],[1',
    "",
    "not a list at all",
    '[["A"],["A"],[1]] trailing words',
    '[["0.5"],["0.5"],["0"]]',
    '[["A"],["A"],[" 1 "]]',
    '[["A"],["A"],["1.0"]]',
    '[["A"],["A"],[1e999]]',
    '[["A"],["A"],[1+0j]]',
    '[["A"],["A"],{1: "a"}]',
    '[["A"],["A"],{0, 1}]',
    '[["A"],["A"],[[1]]]',
]

DIRECT_WRAPPERS = [
    "<evaluation>{}</evaluation>",
    "<evaluation>\n{}\n</evaluation>",
    "学生答案与参考答案比较如下。\n<evaluation>{}</evaluation>\n以上是评分。",
    "<think>先提取参考答案，再比较。</think>\n<evaluation>{}</evaluation>",
    '<think>草稿：<evaluation>[["X"],["Y"],[0]]</evaluation></think><evaluation>{}</evaluation>',
    '<evaluation>{}</evaluation>\n<evaluation>[["X"],["X"],[1]]</evaluation>',
    "```\n<evaluation>{}</evaluation>\n```",
    "<evaluation>```python\n{}\n```</evaluation>",
    "<Evaluation>{}</Evaluation>",
    "<evaluation>{}",
    "{}",
    "<evaluation> {} </evaluation>",
]

# --- step by step: the list of [step, label, explanation] ----------------------------------


def _step(n: int, label: str, why: str = "理由") -> str:
    return f'["步骤{n}：计算 $x+{n}$", "{label}", "{why}"]'


def _steps(*labels: str) -> str:
    return "[" + ", ".join(_step(n, label) for n, label in enumerate(labels, 1)) + "]"


STEP_BODIES = [
    _steps(CORRECT),
    _steps(CORRECT, CORRECT, CORRECT),
    _steps(CORRECT, ERRORS[6], CORRECT),
    *[_steps(CORRECT, label) for label in ERRORS],
    _steps(ERRORS[0], ERRORS[1], ERRORS[2], ERRORS[3]),
    "[" + _steps(CORRECT, ERRORS[4]) + "]",
    "[[" + _steps(CORRECT) + "]]",
    _steps(CORRECT, "计算错误"),
    _steps(CORRECT, "CE"),
    _steps(CORRECT, "步骤正确 "),
    _steps(CORRECT, "1"),
    _steps("1", CORRECT),
    _steps(CORRECT, "1", "不存在的标签"),
    '["步骤1", "步骤正确", "好"]',
    '["a1b", "步骤正确"]',
    '[["步骤1", "步骤正确"]]',
    '[["步骤1", "步骤正确", "好", "多余"]]',
    '[["步骤1", "步骤正确", "好"], "a1b"]',
    '[["步骤1", "步骤正确", "好"], "ab"]',
    '[["步骤1", "步骤正确", "好"], 3]',
    '[["步骤1", "步骤正确", "好"], ("步骤2", "步骤正确", "好")]',
    '[("步骤1", "步骤正确", "好")]',
    '[["步骤1", 1, "好"]]',
    '[["步骤1", "1", "好"]]',
    "[]",
    "[[]]",
    "[[[]]]",
    '[["步骤1", "步骤正确", "好"]，["步骤2"，"运算处理错误"，"算错了"]]',
    "[['步骤1', '步骤正确', '好'], ['步骤2', '幻觉错误', '编造条件']]",
    "[[“步骤1”, “步骤正确”, “好”]]",
    '[["由 $\\frac{1}{2}$ 得", "步骤正确", "正确"]]',
    '[["\\(a^2+b^2=c^2\\)", "知识应用错误", "用错定理 \\sqrt{2}"]]',
    '[["He said \\"hi\\"", "步骤正确", "ok"]]',
    '[["步骤1", "步骤正确", "好"],\n ["步骤2", "运算处理错误", "3+4=8"],\n]',
    '[["步骤1", "步骤正确", "好"], # 注释\n ["步骤2", "步骤正确", "好"]]',
    "[[步骤1, 步骤正确, 好]]",
    '[["步骤1", "步骤正确", null]]',
    '[["步骤1", "步骤正确", None]]',
    '[[1, "步骤正确", 2]]',
    '[["步骤1", "步骤正确", "好"], ["步骤2", "运算处理错误", "算',
    '[["步骤1", "步骤正确", "好"], ["步骤2", "运算处理错误"',
    '{"steps": [["步骤1", "步骤正确", "好"]]}',
    '[{"step": "步骤1", "label": "步骤正确", "reason": "好"}]',
    '[{1: "1"}]',
    '["ab", "1"]',
    '[["步骤1", "步骤正确", "好"]] [1]',
]

STEP_WRAPPERS = [
    "{}",
    "评估结果如下：\n{}",
    "{}\n以上为逐步评估。",
    "<think>逐步检查学生的每一步。</think>\n{}",
    "<think>第[1]步看起来对。</think>\n{}",
    "```python\n{}\n```",
    "```json\n{}\n```",
    "评估：\n{}\n备注：见步骤[2]",
    "学生共写了 3 步，结果：{}",
    "{}\n\n{}",
]


def direct_corpus() -> list[str]:
    return [wrapper.replace("{}", body) for wrapper, body in itertools.product(DIRECT_WRAPPERS, DIRECT_BODIES)]


def step_corpus() -> list[str]:
    return [wrapper.replace("{}", body) for wrapper, body in itertools.product(STEP_WRAPPERS, STEP_BODIES)]
