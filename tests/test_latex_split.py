"""split_formulas: the delimiters of static/js/app.js, found in one regex search per formula."""

import pytest

from annotation.latex import split_formulas


@pytest.fixture(autouse=True)
def _english(english):
    """The problems are read in English here."""


def found(text):
    formulas, problems = split_formulas(text)
    return [(f.tex, f.display) for f in formulas], [p.message for p in problems]


@pytest.mark.parametrize(
    ("text", "formulas"),
    [
        (
            "已知 $x^2$ 与 $$\\frac{1}{2}$$ 和 \\[a\\] 及 \\(b\\)",
            [("x^2", False), ("\\frac{1}{2}", True), ("a", True), ("b", False)],
        ),
        ("价格 \\$5 与 $y$", [("y", False)]),  # an escaped dollar sign is text
        ("\\$$x$", [("x", False)]),  # the escaped one, then an inline formula
        ("\\alpha 不在公式里，\\, 也不是 $\\beta$", [("\\beta", False)]),  # a backslash opens nothing else
        ("$$$x$$", [("$x", True)]),  # $$ wins over $, as in the browser
        ("", []),
    ],
)
def test_formulas_are_found_in_reading_order(text, formulas):
    assert found(text) == (formulas, [])


@pytest.mark.parametrize(
    ("text", "formulas", "problem"),
    [
        ("$a$ 然后 $b", [("a", False)], "$ opened at character 8 is never closed"),
        ("\\[x", [], "\\[ opened at character 1 is never closed"),
        ("$$x$", [], "$$ opened at character 1 is never closed"),
    ],
)
def test_an_unclosed_delimiter_is_a_problem_and_ends_the_search(text, formulas, problem):
    assert found(text) == (formulas, [problem])
