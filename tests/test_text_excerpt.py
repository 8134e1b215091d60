from k12vista.templatetags.text_extras import excerpt


def test_it_keeps_short_text_whole():
    assert excerpt("已知 $x=1$", 80) == "已知 $x=1$"


def test_it_never_cuts_a_formula_in_half():
    text = "已知函数 " + "$f(x)=\\frac{1}{x^2+1}$" + "，求值域" * 20
    short = excerpt(text, 10)  # the cut falls inside the formula: it is kept whole
    assert short == "已知函数 $f(x)=\\frac{1}{x^2+1}$…"
    long_formula = "题目 $" + "+".join(["x"] * 200) + "$ 后文"
    assert excerpt(long_formula, 10) == "题目…"  # too long to keep: left out whole
    assert excerpt("a" * 100, 80) == "a" * 80 + "…"


def test_it_knows_every_delimiter():
    for formula in ("$$x^2$$", "\\(x^2\\)", "\\[x^2\\]"):
        text = "前文" * 3 + formula + "后文" * 50
        assert formula in excerpt(text, 8)
