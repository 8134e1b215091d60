"""The whole reference protocol over real HTTP: reference records imported, the reference prompts
registered from ../shared/reference, two models answering in the reference protocol, a judge
scoring them in it (direct), a K12-PEM-format judge scoring them step by step (the reference's
list of [step, 中文标签, 解释]), the reference's cells on the leaderboard and in its CSV download;
the reference's own ``_save_result`` over the exported ``{model}_eval.jsonl`` gives the same cells
(to 1e-9)."""

import base64
import csv
import io
import json
import re
import zipfile
from unittest import mock

import pytest
from PIL import Image

from annotation.jsonl_import import import_questions_file
from inference import scoring, services
from inference.leaderboard import reference_cells
from inference.models import InferenceRun, JudgedStep, Judgment, ModelEndpoint, Protocol
from inference.reference import board, results
from inference.reference.register import register_checkout
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests import reference_code
from tests.scripted_models import Servers, user_text
from tests.test_reference_aggregation import reference_save_result

pytestmark = [pytest.mark.django_db, reference_code.needs_reference]

TAGS = ["math-g6", "math-g9", "physics-g12", "chemistry-g9", "biology-g12", "geography-g9"]
TYPES = ["选择题", "填空题", "问答题"]


@pytest.fixture(autouse=True)
def _settings(settings, tmp_media):
    settings.MODEL_CALL_RETRIES = 1


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


def jpeg(n: int) -> str:
    image = Image.new("RGB", (120, 80), (255, 255 - n, 250))
    for x in range(5, 115):
        image.putpixel((x, 40), (0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=80)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def reference_lines() -> list[dict]:
    lines = []
    for i, (tag, qtype) in enumerate((t, q) for t in TAGS for q in TYPES):
        question = f"Q{i:02d} 如图，<image>求 $x$。" + ("\nA. $1$\nB. $2$\nC. $3$\nD. $4$" if qtype == "选择题" else "")
        answers = ["B"] if qtype == "选择题" else ["$2$", "$3$"][: 1 + i % 2]
        solution = "步骤1：读图。\n步骤2：得解。"
        lines.append({"hash_id": f"e2e-{i:02d}", "question": question, "type": qtype, "subject": tag, "img": jpeg(i),
                      "format_answer": {"ground_truth": answers, "format_solution": solution}})  # fmt: skip
    return lines


def student(name: str):
    def reply(body: dict) -> tuple[int, str]:
        marker = user_text(body).split("Q", 1)[1][:2]
        return 200, f"{name} 的答案 Q{marker}\n步骤1：读图得 $x$。\n步骤2：代入求解。"

    return reply


def judge(body: dict) -> tuple[int, str]:
    """Marks by question and model; one question's reply never reads (the reference drops it)."""
    text = user_text(body)
    marker = int(text.split("Q", 1)[1][:2])
    model_b = "student-b 的答案" in text
    if marker == 7 and model_b:
        return 200, "我无法判断。"
    n = 1 if "['B']" in text or "['$2$']" in text else 2
    marks = [(marker + k + model_b) % 2 for k in range(n)]
    return 200, f"<evaluation>[{['x'] * n}, {['y'] * n}, {marks}]</evaluation>"


def k12_pem(body: dict) -> tuple[int, str]:
    """A judge trained on the reference format (K12-PEM): a Python-style list of [step, 中文标签,
    解释], as the released model writes it (LaTeX backslashes single, full-width commas between
    items for one model); one chain gets a label outside the nine, which the reference never reads."""
    text = user_text(body)
    assert body["messages"][0]["role"] == "user" and "response_format" not in body
    marker = int(re.search(r"Q(\d\d)", text).group(1))
    model_b = "student-b 的答案" in text
    second = "步骤正确" if (marker + model_b) % 2 == 0 else ["知识应用错误", "逻辑过程错误", "运算处理错误"][marker % 3]
    if marker == 4 and model_b:
        second = "计算错误"
    comma = "，" if model_b else ", "
    first = "['步骤1：读图得 $x$。', '步骤正确', '由图得 $\\frac{1}{2}$，无误']"  # one backslash, as written
    return 200, f"<think>逐步检查。</think>\n[{first}{comma}['步骤2：代入求解。', '{second}', '见上']]"


def reference_csv_tables(text: str) -> dict[str, dict[str, dict[str, float | None]]]:
    """The means block of each model in the reference board's CSV, read back as numbers."""
    tables: dict[str, dict[str, dict[str, float | None]]] = {}
    header: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "model":
            header = row if row[1] == "类型" else []
            continue
        if header:
            cells = dict(zip(header[2:], row[2:], strict=True))
            tables.setdefault(row[0], {})[row[1]] = {k: float(v) if v else None for k, v in cells.items()}
    return tables


def assert_cells_are_the_references(mode: str, tmp_path, csv_text: str | None = None) -> None:
    """Every cell of the reference board equals the reference's own ``_save_result`` over the
    exported eval file (and, given the board's CSV, the CSV's number too)."""
    entries = board.reference_board(mode)
    assert [entry.model for entry in entries] == ["student-a", "student-b"]
    from_csv = reference_csv_tables(csv_text) if csv_text is not None else None
    folder = "directly" if mode == "direct" else mode
    for entry in entries:
        out = tmp_path / f"results-{entry.scoring_run.pk}.zip"
        found = results.write_results(entry.scoring_run, out)
        with zipfile.ZipFile(out) as archive:
            archive.extractall(tmp_path / f"r{entry.scoring_run.pk}")
        eval_path = tmp_path / f"r{entry.scoring_run.pk}" / f"{folder}_eval" / f"{found['model']}_eval.jsonl"
        table = reference_save_result(eval_path, found["model"])["table"]
        compared = 0
        for row in reference_cells.ROWS:
            for column in reference_cells.COLUMNS:
                ours, theirs = entry.cells[row][column].mean, table[row][column]
                assert (ours is None) == (theirs is None), (entry.model, row, column)
                if from_csv is not None:
                    read = from_csv[entry.model][row][column]
                    assert (read is None) == (theirs is None), (entry.model, row, column)
                    assert read is None or abs(read - theirs) <= 1e-9, (entry.model, row, column, read, theirs)
                if ours is not None:
                    assert abs(ours - theirs) <= 1e-9, (entry.model, row, column, ours, theirs)
                    compared += 1
        assert compared > 30
        assert entry.outside.unscored == (1 if entry.model == "student-b" else 0)


def test_two_models_answered_and_judged_in_the_reference_protocol_give_the_references_cells(
    servers, researcher, tmp_path, login
):
    path = tmp_path / "release.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in reference_lines()), "utf-8")
    assert import_questions_file(path=path, user=researcher).created == 18
    register_checkout(reference_code.CHECKOUT)
    base = servers.start({"student-a": student("student-a"), "student-b": student("student-b"), "judge-72b": judge,
                          "k12-pem": k12_pem})  # fmt: skip
    judge_endpoint = services.save_endpoint(endpoint=ModelEndpoint(name="judge", base_url=base, model_name="judge-72b"),
                                            user=None)  # fmt: skip

    for name in ("student-a", "student-b"):
        ep = services.save_endpoint(endpoint=ModelEndpoint(name=name, base_url=base, model_name=name), user=None)
        with mock.patch("k12vista.tasks.run_job.apply_async"):
            run = services.start_inference_run(endpoint=ep, mode=InferenceRun.Mode.DIRECT, filters={},
                                               user=researcher, protocol=Protocol.REFERENCE)  # fmt: skip
            assert execute_job(run.job_id) == Job.Status.SUCCEEDED
            run = InferenceRun.objects.get(pk=run.pk)
            scoring_run = scoring.start_scoring_run(inference_run=run, judge=judge_endpoint, method="judge_direct",
                                                    user=researcher, protocol=Protocol.REFERENCE)  # fmt: skip
            assert execute_job(scoring_run.job_id) == Job.Status.SUCCEEDED
        assert run.counts()["ok"] == 18

    assert Judgment.objects.filter(score__isnull=True).count() == 1
    assert_cells_are_the_references("direct", tmp_path)

    # Step by step, judged by a K12-PEM-format judge, read from the reference board's CSV.
    pem = services.save_endpoint(endpoint=ModelEndpoint(name="K12-PEM", base_url=base, model_name="k12-pem"),
                                 user=None)  # fmt: skip
    for name in ("student-a", "student-b"):
        ep = ModelEndpoint.objects.get(name=name)
        with mock.patch("k12vista.tasks.run_job.apply_async"):
            run = services.start_inference_run(endpoint=ep, mode=InferenceRun.Mode.STEP_BY_STEP, filters={},
                                               user=researcher, protocol=Protocol.REFERENCE)  # fmt: skip
            assert execute_job(run.job_id) == Job.Status.SUCCEEDED
            scoring_run = scoring.start_scoring_run(inference_run=InferenceRun.objects.get(pk=run.pk), judge=pem,
                                                    method="judge_steps", user=researcher,
                                                    protocol=Protocol.REFERENCE)  # fmt: skip
            assert execute_job(scoring_run.job_id) == Job.Status.SUCCEEDED
    stepped = Judgment.objects.filter(scoring_run__judge=pem)
    assert stepped.count() == 36 and stepped.filter(score__isnull=True).count() == 1  # the unknown label
    labels = set(JudgedStep.objects.filter(judgment__scoring_run__judge=pem).values_list("label", flat=True))
    assert labels == {"CS", "KAE", "LRE", "CE"}  # the Chinese names became the studio's codes
    assert {j.score for j in stepped.exclude(score__isnull=True)} == {0.5, 1.0}
    csv_text = login(researcher).get("/research/leaderboard/reference/download.csv?mode=step_by_step")
    assert csv_text.status_code == 200
    assert_cells_are_the_references("step_by_step", tmp_path, csv_text.content.decode())
