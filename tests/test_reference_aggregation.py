"""The reference code's aggregation beside the studio's: the reference's own ``_save_result``
(run from ../shared/reference/, never copied here) over the studio's exported ``{model}_eval.jsonl``
gives the cells of the studio's reference leaderboard view, to 1e-9."""

import ast
import inspect
import io
import json
import textwrap
import types
import zipfile
from pathlib import Path
from unittest import mock

import openpyxl
import pandas  # installed with datasets
import pytest

from inference import reference_views, standings
from inference.leaderboard import reference_cells
from inference.models import Judgment, ScoringRun
from inference.reference import board, results
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests import reference_code
from tests.annotation_factories import make_question
from tests.pem_factories import answer, judge, make_endpoint, make_run, make_scoring_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]

# (subject, grade, type) of the questions: several tags, stages and types, and primary physics,
# a tag outside the reference's eleven.
CELLS = [
    ("math", 5, "fill_in_blank"), ("math", 8, "multiple_choice"), ("math", 11, "free_response"),
    ("physics", 9, "multiple_choice"), ("physics", 12, "fill_in_blank"), ("chemistry", 8, "free_response"),
    ("biology", 12, "multiple_choice"), ("geography", 7, "fill_in_blank"), ("physics", 5, "free_response"),
]  # fmt: skip
LABELS = ["CS", "CE", "KAE", "LRE"]


def scored_board(user, models=("student-a", "student-b")) -> list[ScoringRun]:
    """Two models' step-by-step runs over the questions, judged with a spread of scores; per model
    one answer not given, one judge reply not understood; snapshots stored as the scoring job does."""
    questions = []
    for i, (subject, grade, qtype) in enumerate(CELLS * 2):
        extra = {} if qtype == "multiple_choice" else {"options": [], "answers": ["$2$"]}
        questions.append(make_question(user, subject=subject, grade=grade, qtype=qtype, text=f"题 {i}", **extra))
    runs = []
    for m, name in enumerate(models):
        run = make_run(make_endpoint(name))
        run.created_by = user
        run.save(update_fields=["created_by"])
        scoring = make_scoring_run(run)
        for i, question in enumerate(questions):
            if i == m:  # no answer: not in the infer file, nor the cells
                answer(run, question, "", status="failed")
                continue
            response = answer(run, question, f"步骤1：…\n步骤2：…（{name} {i}）")
            if i == m + 3:  # the judge's reply was not understood: coverage, not a 0
                Judgment.objects.create(scoring_run=scoring, response=response, status=Judgment.Status.PARSE_FAILED)
                continue
            steps = [(f"第{k}步", LABELS[(i * (m + 2) + k) % 4], "理由") for k in range(1 + (i + m) % 3)]
            judge(scoring, response, steps)
        standings.take_snapshot(scoring)
        runs.append(scoring)
    return runs


def reference_save_result(eval_path: Path, model: str) -> dict:
    """The reference's ``Evaluation._save_result`` over ``eval_path``, called with its argument (the
    published script calls it without), its one division made safe for empty cells (its source
    parsed and each ``/`` replaced by a call: the published script divides by zero there), and its
    table caught where it hands it to pandas, and the rows its ``to_excel`` would write (header
    first) from the DataFrame the script builds with pandas."""
    script = reference_code.evaluate_script()
    source = textwrap.dedent(inspect.getsource(script.Evaluation._save_result))
    tree = ast.parse(source)

    class SafeDivision(ast.NodeTransformer):
        def visit_BinOp(self, node):  # noqa: N802
            self.generic_visit(node)
            if isinstance(node.op, ast.Div):
                return ast.copy_location(ast.Call(ast.Name("_safe_div", ast.Load()), [node.left, node.right], []), node)
            return node

    tree = ast.fix_missing_locations(SafeDivision().visit(tree))
    caught = {}

    def to_excel(frame, path, index=True, **_options):
        assert index is False  # the sheet the script writes has no index column
        caught["sheet"] = [list(frame.columns), *(list(row) for row in frame.itertuples(index=False))]

    class Frame:
        @staticmethod
        def from_dict(table, orient):
            caught["table"] = table
            return pandas.DataFrame.from_dict(table, orient=orient)

    namespace = dict(script.__dict__)
    namespace["_safe_div"] = lambda a, b: None if b == 0 else a / b
    namespace["pd"] = types.SimpleNamespace(DataFrame=Frame)
    exec(compile(tree, str(reference_code.VISTA_CODE / "evalaute.py"), "exec"), namespace)  # noqa: S102
    evaluation = types.SimpleNamespace(out_path=str(eval_path), infer_model=model, excel_out_path="unused.xlsx")
    with mock.patch("builtins.print"), mock.patch.object(pandas.DataFrame, "to_excel", to_excel):
        namespace["_save_result"](evaluation, None)
    return caught


def exported(scoring: ScoringRun, tmp_path: Path) -> tuple[dict, Path, Path]:
    """(what was written, the infer file, the eval file), unzipped in the reference's layout."""
    found = results.write_results(scoring, tmp_path / f"{scoring.pk}.zip")
    folder = tmp_path / f"unzipped-{scoring.pk}"
    with zipfile.ZipFile(tmp_path / f"{scoring.pk}.zip") as archive:
        archive.extractall(folder)
    mode, model = found["mode"], found["model"]
    return found, folder / f"{mode}_infer" / f"{model}_infer.jsonl", folder / f"{mode}_eval" / f"{model}_eval.jsonl"


@reference_code.needs_reference
def test_the_reference_aggregation_of_the_export_equals_the_studios_reference_view(researcher, tmp_path):
    scored_board(researcher)
    entries = board.reference_board("step_by_step")
    assert [entry.model for entry in entries] == ["student-a", "student-b"]

    workbook = openpyxl.load_workbook(io.BytesIO(board.board_xlsx(entries)))
    assert workbook.sheetnames == ["student-a", "student-b", board.MODELS_SHEET]
    assert [list(row) for row in workbook[board.MODELS_SHEET].iter_rows(values_only=True)][1:] == [
        ["student-a", "student-a", entries[0].scoring_run.name], ["student-b", "student-b", entries[1].scoring_run.name]
    ]  # fmt: skip
    for entry in entries:
        found, infer_path, eval_path = exported(entry.scoring_run, tmp_path)
        caught = reference_save_result(eval_path, found["model"])
        table = caught["table"]

        # The studio's sheet is the reference's: the same header, row names and cells (to 1e-9);
        # an empty cell (the reference divides by zero there) is empty.
        ours_sheet = [list(row) for row in workbook[entry.model].iter_rows(values_only=True)]
        theirs_sheet = caught["sheet"]
        assert ours_sheet[0] == theirs_sheet[0] == ["类型", *reference_cells.COLUMNS]
        assert [row[0] for row in ours_sheet[1:]] == [row[0] for row in theirs_sheet[1:]] == list(reference_cells.ROWS)
        assert len(ours_sheet) == len(theirs_sheet) == 5
        for ours_row, theirs_row in zip(ours_sheet[1:], theirs_sheet[1:], strict=True):
            assert len(ours_row) == len(theirs_row)
            for ours, theirs in zip(ours_row[1:], theirs_row[1:], strict=True):
                assert (ours is None) == bool(pandas.isna(theirs)), (ours_row[0], ours, theirs)
                if ours is not None:
                    assert abs(ours - theirs) <= 1e-9
        assert sum(cell is None for row in ours_sheet[1:] for cell in row) > 0  # some cells are empty

        assert list(table) == list(reference_cells.ROWS)
        for row in reference_cells.ROWS:
            assert list(table[row]) == list(reference_cells.COLUMNS)
            for column in reference_cells.COLUMNS:
                ours, theirs = entry.cells[row][column].mean, table[row][column]
                assert (ours is None) == (theirs is None), (row, column)
                if ours is not None:
                    assert abs(ours - theirs) <= 1e-9, (row, column, ours, theirs)
        # What neither counts, said: one answer not given, one reply not understood, two primary physics items.
        assert entry.outside.unscored == 2 and entry.outside.outside_tags == 2
        assert (found["infer"], found["eval"], found["outside_tags"]) == (17, 14, 2)
        infer_lines = [json.loads(line) for line in infer_path.read_text(encoding="utf-8").splitlines()]
        assert all(line["infer_result"]["infer_model"] == found["model"] for line in infer_lines)
        assert all("<image>" in line["question"] and line["img"] for line in infer_lines)


def test_the_eval_file_holds_the_fields_the_reference_reads(researcher, tmp_path):
    [scoring] = scored_board(researcher, models=("student-a",))
    found, _infer_path, eval_path = exported(scoring, tmp_path)
    lines = [json.loads(line) for line in eval_path.read_text(encoding="utf-8").splitlines()]
    first = lines[0]
    model = found["model"]
    assert {"hash_id", "type", "subject", "question", "img", "format_answer", "judgement_result"} <= set(first)
    judged = first["judgement_result"]
    assert set(judged) == {f"{model}_judged_response", f"{model}_judged_score", "judgement_model", "infer_model"}
    steps = judged[f"{model}_judged_response"]
    names = {"步骤正确", "运算处理错误", "知识应用错误", "逻辑过程错误"}
    assert all(len(step) == 3 and step[1] in names for step in steps)
    assert judged[f"{model}_judged_score"] == sum(step[1] == "步骤正确" for step in steps) / len(steps)


def test_the_reference_board_page_its_download_and_the_export_job(researcher, annotator, login, english, tmp_path):
    [scoring] = scored_board(researcher, models=("student-a",))
    client = login(annotator)
    assert client.get("/research/leaderboard/reference/").status_code == 403

    client = login(researcher)
    page = client.get("/research/leaderboard/reference/?mode=step_by_step").content.decode()
    assert "student-a" in page and "所有(sub*grade)" in page
    assert "1 answers not scored" not in page and "2 answers not scored" in page and "2 scored items of tags" in page
    csv_text = client.get("/research/leaderboard/reference/download.csv?mode=step_by_step").content.decode()
    header = csv_text.splitlines()[0].split(",")
    assert header == ["model", "类型", *reference_cells.COLUMNS]
    overall = board.reference_board("step_by_step")[0].cells["所有题型"]["所有(sub*grade)"].mean
    assert csv_text.splitlines()[4].split(",")[-1] == repr(overall)

    with mock.patch("k12vista.tasks.run_job.apply_async"):
        started = client.post(f"/research/scoring/{scoring.pk}/reference-results/")
    job = Job.objects.get(kind=results.KIND)
    assert started.status_code == 302 and execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    download = client.get(f"/media/{job.result['path']}")
    assert download.status_code == 200
    assert login(annotator).get(f"/media/{job.result['path']}").status_code in (403, 404)


def test_the_scoring_page_offers_the_export(researcher, login):
    [scoring] = scored_board(researcher, models=("student-a",))
    page = login(researcher).get(f"/research/scoring/{scoring.pk}/").content.decode()
    assert f'action="/research/scoring/{scoring.pk}/reference-results/"' in page


def test_the_xlsx_download_its_access_and_a_hostile_model_name(researcher, annotator, login, english):
    hostile = '=HYPERLINK("http://evil.example/","open")'
    [scoring] = scored_board(researcher, models=(hostile,))
    url = "/research/leaderboard/reference/download.xlsx?mode=step_by_step"
    assert login(annotator).get(url).status_code == 403

    client = login(researcher)
    page = client.get("/research/leaderboard/reference/?mode=step_by_step").content.decode()
    assert 'href="/research/leaderboard/reference/download.xlsx?mode=step_by_step"' in page
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == reference_views.XLSX
    assert 'filename="k12vista-reference-cells-step_by_step.xlsx"' in response["Content-Disposition"]
    workbook = openpyxl.load_workbook(io.BytesIO(response.content))

    [entry] = board.reference_board("step_by_step")
    assert entry.model == hostile
    [title, _models] = workbook.sheetnames
    assert title == '=HYPERLINK("http___evil.exa' and _models == board.MODELS_SHEET  # no / or : in a sheet name
    assert [list(row) for row in workbook[title].iter_rows(values_only=True)][4][-1] == pytest.approx(
        entry.cells["所有题型"]["所有(sub*grade)"].mean, abs=1e-9
    )
    # The model's name is text, written as the CSV writes it; no cell of the workbook is a formula.
    cell = workbook[board.MODELS_SHEET]["B2"]
    assert (cell.value, cell.data_type) == ("'" + hostile, "s")
    assert scoring.name == workbook[board.MODELS_SHEET]["C2"].value
    assert not [c for sheet in workbook for row in sheet.iter_rows() for c in row if c.data_type == "f"]
    csv_text = client.get("/research/leaderboard/reference/download.csv?mode=step_by_step").content.decode()
    assert csv_text.splitlines()[1].startswith("\"'=HYPERLINK(")


def test_sheet_names_are_ones_excel_accepts_and_distinct():
    taken = {board.MODELS_SHEET}
    long = "org/model:" + "x" * 40
    titles = [board.sheet_title(name, taken) for name in (long, long.upper(), "", "models", "a[b]*?'\\c")]
    assert titles == [
        "org_model_" + "x" * 17, "ORG_MODEL_" + "X" * 17 + " (2)", "model", "models (2)", "a_b_____c"
    ]  # fmt: skip
    assert all(len(title) <= 31 for title in titles)
