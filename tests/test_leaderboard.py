"""Leaderboards on plain data: every expected number below is worked out by hand."""

import csv
import io
import json
import math
import random

import pytest

from inference.leaderboard import (
    DEFINITIONS,
    ERROR_CODES,
    Cell,
    PublishedCSVError,
    PublishedRow,
    ScoredItem,
    build_leaderboard,
    from_csv,
    from_json,
    in_release,
    latex_escape,
    merge_published,
    parse_group,
    read_published_csv,
    t_quantile,
    to_csv,
    to_json,
    to_latex,
)

MC, FIB, FR = "multiple_choice", "fill_in_blank", "free_response"


def item(qid, subject, grade, qtype, score, labels=(), model="M", mode="direct"):
    return ScoredItem(model, mode, qid, subject, grade, qtype, score, list(labels))


# Model M, direct: five answers, one unparsable (q4).
DIRECT = [
    item("q1", "math", 3, MC, 1.0),
    item("q2", "math", 8, FIB, 0.5),
    item("q3", "physics", 11, FR, 0.0),
    item("q4", "physics", 11, MC, None),
    item("q5", "math", 8, MC, 1.0),
]
# Model M, step by step: labels behind the scores; s3 unparsable.
STEPS = [
    item("s1", "math", 3, MC, 2 / 3, ["CS", "CS", "CE"], mode="step_by_step"),
    item("s2", "physics", 11, FR, 1 / 4, ["CS", "ICE", "CE", "IAE"], mode="step_by_step"),
    item("s3", "physics", 8, FIB, None, [], mode="step_by_step"),
]


@pytest.fixture
def board():
    return build_leaderboard(DIRECT + STEPS)


def test_it_averages_scored_items_and_leaves_none_out_of_the_mean(board):
    cells = board.entry("M", "direct").cells
    overall = cells["overall"]
    assert (overall.n, overall.unscored, overall.absent, overall.items) == (4, 1, 0, 5)
    assert overall.mean == pytest.approx((1 + 0.5 + 0 + 1) / 4)  # 0.625, not 2.5 / 5
    assert overall.coverage == pytest.approx(4 / 5)


@pytest.mark.parametrize(
    ("group", "mean", "n", "coverage"),
    [
        ("stage:primary", 1.0, 1, 1.0),
        ("stage:middle", 0.75, 2, 1.0),
        ("stage:high", 0.0, 1, 0.5),
        ("subject:math", 2.5 / 3, 3, 1.0),
        ("subject:physics", 0.0, 1, 0.5),
        ("type:multiple_choice", 1.0, 2, 2 / 3),
        ("type:fill_in_blank", 0.5, 1, 1.0),
        ("type:free_response", 0.0, 1, 1.0),
        ("cell:math-g6", 1.0, 1, 1.0),
        ("cell:math-g9", 0.75, 2, 1.0),
        ("cell:physics-g12", 0.0, 1, 0.5),
    ],
)
def test_it_computes_each_group_by_hand(board, group, mean, n, coverage):
    cell = board.entry("M", "direct").cells[group]
    assert cell.mean == pytest.approx(mean)
    assert cell.n == n
    assert cell.coverage == pytest.approx(coverage)


def test_it_keeps_a_cell_with_no_items_empty_rather_than_zero(board):
    cells = board.entry("M", "direct").cells
    for group in ("subject:chemistry", "cell:chemistry-g9", "cell:geography-g12"):
        cell = cells[group]
        assert (cell.n, cell.items, cell.mean, cell.coverage, cell.ci_low, cell.ci_high) == (
            0,
            0,
            None,
            None,
            None,
            None,
        )


def test_it_reports_a_cell_whose_only_item_is_unparsable_with_zero_coverage(board):
    cell = board.entry("M", "step_by_step").cells["cell:physics-g9"]
    assert (cell.n, cell.unscored, cell.mean, cell.coverage) == (0, 1, None, 0.0)


def test_it_orders_groups_and_entries_for_display(board):
    assert [(e.model, e.mode) for e in board.entries] == [("M", "direct"), ("M", "step_by_step")]
    groups = list(board.entry("M", "direct").cells)
    assert groups[:4] == ["overall", "stage:primary", "stage:middle", "stage:high"]
    assert groups[4:9] == [f"subject:{s}" for s in ("math", "physics", "chemistry", "biology", "geography")]
    assert groups[9:12] == ["type:multiple_choice", "type:fill_in_blank", "type:free_response"]
    assert groups[12] == "cell:math-g6" and groups[22] == "cell:geography-g12"
    # then the paper's grid: type x subject-grade, each type's eleven tags in release order
    assert groups[23:25] == ["grid:multiple_choice:math-g6", "grid:multiple_choice:math-g9"]
    assert groups[34] == "grid:fill_in_blank:math-g6" and groups[-1] == "grid:free_response:geography-g12"
    assert len(groups) == 12 + 11 + 33


def test_it_appends_cells_outside_the_release_in_subject_order():
    board = build_leaderboard([item("a", "physics", 2, MC, 1.0), item("b", "biology", 5, MC, 0.0)])
    groups = list(board.entries[0].cells)
    cells = [group for group in groups if group.startswith("cell:")]
    assert cells[-2:] == ["cell:physics-g6", "cell:biology-g6"]  # after the release's eleven
    assert groups.index("grid:multiple_choice:biology-g6") == groups.index("grid:multiple_choice:geography-g12") + 2
    assert not in_release("cell:physics-g6") and not in_release("grid:multiple_choice:physics-g6")
    assert in_release("cell:physics-g9") and in_release("overall")


def test_it_computes_a_student_t_interval_on_a_known_example():
    board = build_leaderboard([item(f"q{i}", "math", 8, MC, s) for i, s in enumerate([0.4, 0.6, 0.5, 0.5])])
    cell = board.entries[0].cells["overall"]
    # mean 0.5; s^2 = (0.01 + 0.01 + 0 + 0) / 3; half-width = t(0.975, 3) * s / sqrt(4)
    half = 3.182446305284263 * math.sqrt(0.02 / 3) / 2
    assert half == pytest.approx(0.129923, abs=1e-6)
    assert cell.ci_low == pytest.approx(0.5 - half, abs=1e-12)
    assert cell.ci_high == pytest.approx(0.5 + half, abs=1e-12)


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706204736), (2, 4.302652730), (10, 2.228138852), (30, 2.042272456), (1000, 1.962339081)],
)
def test_it_matches_published_t_quantiles(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-8)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=1e-8)


def test_it_clips_the_interval_to_0_1_and_gives_none_below_two_items():
    board = build_leaderboard(
        [item("a", "math", 8, MC, 0.0), item("b", "math", 8, MC, 1.0), item("c", "math", 3, MC, 1)]
    )
    cells = board.entries[0].cells
    assert (cells["stage:middle"].ci_low, cells["stage:middle"].ci_high) == (0.0, 1.0)
    assert (cells["stage:primary"].ci_low, cells["stage:primary"].ci_high) == (None, None)


def test_it_counts_error_labels_without_correct_steps(board):
    errors = board.entry("M", "step_by_step").errors
    overall = errors["overall"]
    assert overall.steps == 7
    assert overall.counts == {"ICE": 1, "QM": 0, "LRK": 0, "KAE": 0, "LRE": 0, "HE": 0, "CE": 2, "IAE": 1}
    assert list(overall.counts) == list(ERROR_CODES) and "CS" not in overall.counts
    assert overall.error_steps == 4
    assert overall.shares["CE"] == 0.5 and overall.shares["ICE"] == 0.25 and overall.shares["QM"] == 0.0
    assert errors["stage:primary"].counts["CE"] == 1 and errors["stage:primary"].error_steps == 1
    assert errors["subject:physics"].steps == 4 and errors["subject:physics"].error_steps == 3
    assert errors["type:free_response"].counts["IAE"] == 1 and errors["type:multiple_choice"].counts["IAE"] == 0


def test_it_gives_no_shares_where_there_are_no_error_steps(board):
    dist = board.entry("M", "direct").errors["subject:chemistry"]
    assert dist.error_steps == 0 and set(dist.shares.values()) == {None}
    assert board.entry("M", "direct").errors["cell:math-g9"].steps == 0  # cells have distributions too


def test_it_counts_error_labels_per_cell_and_grid_cell(board):
    errors = board.entry("M", "step_by_step").errors
    assert errors["cell:physics-g12"].counts["ICE"] == 1 and errors["cell:physics-g12"].error_steps == 3
    assert errors["grid:free_response:physics-g12"].steps == 4
    primary_mc = errors["grid:multiple_choice:math-g6"]
    assert (primary_mc.counts["CE"], primary_mc.steps) == (1, 3)
    assert errors["grid:fill_in_blank:physics-g9"].steps == 0  # s3 was not scored


def test_it_counts_absent_questions_in_overall_coverage_only():
    board = build_leaderboard(DIRECT, total_questions={("M", "direct"): 8, ("Dead", "step_by_step"): 3})
    overall = board.entry("M", "direct").cells["overall"]
    assert (overall.absent, overall.items, overall.coverage) == (3, 8, 0.5)
    assert board.entry("M", "direct").cells["stage:high"].absent == 0
    dead = board.entry("Dead", "step_by_step").cells["overall"]
    assert (dead.n, dead.items, dead.coverage, dead.mean) == (0, 3, 0.0, None)


def test_it_refuses_more_rows_than_questions_and_duplicate_questions():
    with pytest.raises(ValueError, match="5 rows but only 4"):
        build_leaderboard(DIRECT, total_questions={("M", "direct"): 4})
    with pytest.raises(ValueError, match="appears twice"):
        build_leaderboard([DIRECT[0], DIRECT[0]])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"score": 1.5}, "score"),
        ({"score": float("nan")}, "score"),
        ({"mode": "cot"}, "mode"),
        ({"grade": 13}, "grade"),
        ({"subject": "music"}, "music"),
        ({"qtype": "essay"}, "essay"),
        ({"step_labels": ["CS", "XX"]}, "step label"),
        ({"model": " "}, "model"),
    ],
)
def test_it_rejects_invalid_items(change, message):
    fields = {
        "model": "M",
        "mode": "direct",
        "question_id": 1,
        "subject": "math",
        "grade": 3,
        "qtype": MC,
        "score": 1.0,
        "step_labels": [],
    }
    with pytest.raises(ValueError, match=message):
        ScoredItem(**(fields | change))


def test_it_normalises_label_names_to_codes():
    scored = item("x", "math", 3, MC, 0.5, ["correct step", "运算处理错误"])
    assert scored.step_labels == ("CS", "CE")


def published_board(board):
    rows = read_published_csv(
        "model,mode,group,score,source\n"
        "M,direct,overall,61.5,paper Table 7\n"
        "M,direct,cell:physics-g6,40%,paper appendix\n"
        "Gemini2-thinking,step_by_step,stage:primary,62.06,paper Table 7\n"
    )
    return merge_published(board, rows)


def test_it_round_trips_through_csv(board):
    merged = published_board(board)
    text = to_csv(merged)
    assert from_csv(text) == merged
    assert text.startswith("# k12vista-leaderboard.v2")
    for name in ("mean", "interval", "coverage", "absent", "error_share", "time_rule"):
        assert f"# {name}: " in text
    rows = list(csv.DictReader(line for line in io.StringIO(text) if not line.startswith("#")))
    overall = next(r for r in rows if (r["model"], r["mode"], r["group"]) == ("M", "direct", "overall"))
    assert (overall["n"], overall["items"], overall["coverage"], overall["mean"]) == ("4", "5", "0.8", "0.625")
    assert (overall["published_score"], overall["published_source"]) == ("0.615", "paper Table 7")
    ce = next(r for r in rows if (r["model"], r["mode"], r["group"]) == ("M", "step_by_step", "overall"))
    assert (ce["CE"], ce["CE_share"], ce["QM_share"]) == ("2", "0.5", "0.0")
    cell = next(r for r in rows if (r["model"], r["mode"], r["group"]) == ("M", "direct", "cell:math-g9"))
    assert (cell["steps"], cell["ICE"], cell["in_release"]) == ("0", "0", "true")  # cells have error distributions


def test_it_round_trips_through_json_with_a_stable_key_order(board):
    merged = published_board(board)
    text = to_json(merged)
    assert from_json(text) == merged
    shuffled = DIRECT + STEPS
    random.Random(4).shuffle(shuffled)
    assert to_json(published_board(build_leaderboard(shuffled))) == text
    document = json.loads(text)
    assert list(document) == ["format", "interval", "time_rule", "definitions", "question_set", "entries"]
    assert "correct steps (CS) are excluded" in document["definitions"]["error_share"]
    entry = document["entries"][0]
    assert list(entry) == ["model", "mode", "run", "cells", "errors", "published"]
    assert list(entry["cells"]["overall"]) == [
        "n",
        "unscored",
        "absent",
        "items",
        "coverage",
        "mean",
        "ci_low",
        "ci_high",
        "in_release",
    ]
    assert entry["cells"]["subject:chemistry"]["mean"] is None


def test_it_refuses_json_of_another_format():
    with pytest.raises(ValueError, match="format"):
        from_json('{"format": "other", "entries": []}')


LATEX_ITEMS = [
    item("p", "math", 2, MC, 0.5, model="Gem#1"),
    item("m", "math", 8, MC, 0.25, model="Gem#1"),
    item("h", "math", 11, MC, 0.5, model="Gem#1"),
    item("p", "math", 2, MC, 1.0, model="Q_2.5 & co"),
    item("m", "math", 8, MC, 0.25, model="Q_2.5 & co"),
    item("p", "math", 2, MC, 0.0, model="Low"),
    item("m", "math", 8, MC, None, model="Low"),
    item("h", "math", 11, MC, 0.125, model="Low"),
    item("m", "math", 8, MC, None, model="Broken"),
    item("p", "math", 2, MC, 1.0, model="Only steps", mode="step_by_step"),
]

EXPECTED_LATEX = r"""\begin{table}[htbp]
  \centering
  \caption{Direct Inference Score (\%) by stage.}
  \label{tab:k12vista-direct-stage}
  \begin{tabular}{lrrrr}
    \toprule
    & \multicolumn{4}{c}{Direct Inference Score} \\
    \cmidrule(lr){2-5}
    Model & Primary & Middle & High & Overall \\
    \midrule
    Q\_2.5 \& co & \textbf{100.00} & \textbf{25.00} & --- & \textbf{62.50} \\
    Gem\#1 & 50.00 & \textbf{25.00} & \textbf{50.00} & 41.67 \\
    Low & 0.00 & ---$^\dagger$ & 12.50 & 6.25$^\dagger$ \\
    Broken & --- & ---$^\dagger$ & --- & ---$^\dagger$ \\
    \bottomrule
  \end{tabular}
  \par\smallskip
  {\footnotesize Mean over scored items; the bank as each scoring run saw it.}\par
  {\footnotesize $^\dagger$ Coverage below 100\,\%: mean over scored responses only.}
\end{table}
"""


def test_it_writes_a_booktabs_table_with_bold_best_escaping_and_em_dashes():
    text = to_latex(build_leaderboard(LATEX_ITEMS), mode="direct")
    definitions = "".join(f"% {name}: {value}\n" for name, value in DEFINITIONS.items())
    assert text == definitions + EXPECTED_LATEX


def test_it_writes_published_numbers_as_a_latex_table(board):
    text = to_latex(published_board(board), mode="step_by_step", grouping="stage", source="published")
    assert r"Gemini2-thinking & \textbf{62.06} & --- & --- & --- \\" in text
    assert "\\label{tab:k12vista-step-by-step-stage-published}" in text
    assert r"\multicolumn{4}{c}{Step-by-Step Score}" in text


def test_it_writes_other_groupings_without_a_note_when_coverage_is_full():
    text = to_latex(build_leaderboard(DIRECT[:3]), mode="direct", grouping="type", caption="Types.", label="tab:t")
    assert "Model & Multiple choice & Fill-in-blank & Free response & Overall \\\\" in text
    assert r"M & \textbf{100.00} & \textbf{50.00} & \textbf{0.00} & \textbf{50.00} \\" in text
    assert "dagger" not in text and "\\caption{Types.}" in text


def test_it_escapes_every_latex_special_character():
    assert latex_escape(r"a\b&c%d$e#f_g{h}i~j^k") == (
        r"a\textbackslash{}b\&c\%d\$e\#f\_g\{h\}i\textasciitilde{}j\textasciicircum{}k"
    )


def test_it_reads_a_published_csv_in_percent():
    rows = read_published_csv(
        "\ufeffModel,Mode,Group,Score,Source,notes\n"
        "Gemini2-thinking,direct,overall,55.47,paper Table 7,\n"
        "\n"
        "Gemini2-thinking,step-by-step,Stage:Primary,62.06%,paper Table 7,x\n"
        '"GPT-4o",direct,cell:math-g9,45,"paper, appendix",\n'
        "GPT-4o,direct,type:选择题,0.5,paper,\n"
    )
    assert rows == [
        PublishedRow("Gemini2-thinking", "direct", "overall", pytest.approx(0.5547), "paper Table 7", 2),
        PublishedRow("Gemini2-thinking", "step_by_step", "stage:primary", pytest.approx(0.6206), "paper Table 7", 4),
        PublishedRow("GPT-4o", "direct", "cell:math-g9", 0.45, "paper, appendix", 5),
        PublishedRow("GPT-4o", "direct", "type:multiple_choice", 0.005, "paper", 6),
    ]


def test_it_reads_a_published_csv_in_fractions_when_nothing_is_above_one():
    rows = read_published_csv(
        "model,mode,group,score,source\nA,direct,overall,0.5547,ours\nA,direct,stage:high,1,ours\n"
    )
    assert [row.score for row in rows] == [0.5547, 1.0]
    forced = read_published_csv("model,mode,group,score,source\nA,direct,overall,0.8,x\n", scale="percent")
    assert forced[0].score == pytest.approx(0.008)


def test_it_reports_every_bad_line_of_a_published_csv_with_its_number():
    text = (
        "model,mode,group,score,source\n"
        "A,direct,overall,55.47,paper\n"
        ",direct,overall,50,paper\n"
        "B,cot,overall,50,paper\n"
        "B,direct,stage:college,50,paper\n"
        "B,direct,overall,abc,paper\n"
        "A,direct,overall,56,paper\n"
        "B,direct,cell:math-g7,50,paper\n"
        "B,direct,overall,150,paper\n"
        "C,direct,overall,50,paper,extra\n"
        "D,direct,overall,50,\n"
    )
    with pytest.raises(PublishedCSVError) as caught:
        read_published_csv(text)
    lines = dict(caught.value.errors)
    assert sorted(lines) == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert "missing model" in lines[3]
    assert "unknown mode 'cot'" in lines[4]
    assert "unknown group 'stage:college'" in lines[5]
    assert "'abc' is not a non-negative number" in lines[6]
    assert "duplicate of line 2" in lines[7]
    assert "unknown group 'cell:math-g7'" in lines[8]
    assert "above 100" in lines[9]
    assert "6 fields, the header has 5" in lines[10]
    assert "missing source" in lines[11]
    assert str(caught.value).startswith("line 3: missing model\nline 4: ")


def test_it_reports_missing_columns_on_line_one():
    with pytest.raises(PublishedCSVError) as caught:
        read_published_csv("model,mode,score\nA,direct,50\n")
    assert caught.value.errors == [(1, "missing column(s): group, source")]


def test_it_refuses_a_percent_sign_when_fractions_are_asked_for():
    with pytest.raises(PublishedCSVError, match="line 2: .*scale='fraction'"):
        read_published_csv("model,mode,group,score,source\nA,direct,overall,50%,x\n", scale="fraction")


def test_it_shows_published_numbers_beside_ours_without_changing_ours(board):
    merged = published_board(board)
    ours = merged.entry("M", "direct")
    assert ours.cells["overall"] == board.entry("M", "direct").cells["overall"]
    assert ours.published["overall"].score == pytest.approx(0.615)
    assert ours.published["overall"].source == "paper Table 7"
    assert ours.cells["cell:physics-g6"] == Cell("cell:physics-g6")
    assert [g for g in ours.cells if g.startswith("cell:")][-1] == "cell:physics-g6"
    assert [e.key for e in merged.entries] == [
        ("Gemini2-thinking", "step_by_step"),
        ("M", "direct"),
        ("M", "step_by_step"),
    ]
    only_published = merged.entry("Gemini2-thinking", "step_by_step")
    assert only_published.cells["overall"].items == 0 and only_published.published[
        "stage:primary"
    ].score == pytest.approx(0.6206)


def test_it_refuses_the_same_published_group_twice():
    row = PublishedRow("A", "direct", "overall", 0.5, "x", 2)
    with pytest.raises(ValueError, match="given twice"):
        merge_published(build_leaderboard([]), [row, row])


@pytest.mark.parametrize(
    ("text", "group"),
    [
        ("overall", "overall"),
        (" Stage:High ", "stage:high"),
        ("subject:Math", "subject:math"),
        ("type:填空题", "type:fill_in_blank"),
        ("cell:geography-g12", "cell:geography-g12"),
    ],
)
def test_it_parses_group_keys(text, group):
    assert parse_group(text) == group
