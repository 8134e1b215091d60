"""The paper's Table 2 for a release: counted on the release's own contents, its tokenizer named,
the paper's figures beside ours on the card and the release page."""

import sys
import types
from pathlib import Path

import pytest

from annotation import statistics
from annotation.models import CandidateSet, Question, ReleaseFile
from tests.annotation_factories import make_question

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _settings(settings, tmp_media):
    settings.STUDIO_COMMIT = "abc123"
    settings.STATS_TOKENIZER_DIR = ""


def test_the_fallback_counts_cjk_characters_words_numbers_and_symbols():
    assert statistics.fallback_count("求 $x^2$ 的值") == 8  # 求 $ x ^ 2 $ 的 值
    assert statistics.fallback_count("speed 3.5 m/s，故选B") == 9  # speed 3.5 m / s ， 故 选 B


def test_table_2_over_release_contents():
    contents = [
        {"subject": "math", "qtype": "multiple_choice", "text": "求<image>值", "knowledge_points": ["勾股定理"],
         "options": [{"label": "A", "text": "1"}, {"label": "B", "text": "2"}], "answers": ["B"],
         "solution_steps": ["一步", "两步"], "raw_solution": "x"},
        {"subject": "physics", "qtype": "fill_in_blank", "text": "电阻为___欧",
         "knowledge_points": ["欧姆定律", "电阻"], "options": [], "answers": ["5", "10"], "solution_steps": [],
         "raw_solution": "由欧姆定律"},
    ]  # fmt: skip
    found = statistics.table_2(contents)
    # problem: 求 值 / A . 1 / B . 2 = 8 (the placeholder is not the question's) and 电 阻 为 _ _ _ 欧 = 7
    assert found["problem_tokens"] == 7.5 and found["solution_tokens"] == (4 + 5) / 2
    assert (found["questions"], found["subjects"], found["knowledge_points"], found["types"]) == (2, 2, 3, 2)
    assert (found["solution_steps"], found["answers"], found["answer_tokens"]) == (1.0, 1.5, 1.5)
    assert found["tokenizer"].startswith("fallback") and "STATS_TOKENIZER_DIR" in found["tokenizer"]


def test_a_configured_tokenizer_counts_and_is_named(settings, tmp_path, monkeypatch):
    folder = tmp_path / "Qwen2.5-VL-7B-Instruct"
    folder.mkdir()
    settings.STATS_TOKENIZER_DIR = str(folder)
    opened = []

    class Tokenizer:  # the tokenizers library's interface, as the ml extra installs it
        @staticmethod
        def from_file(path):
            opened.append(path)
            return Tokenizer()

        def encode(self, text, add_special_tokens=True):
            return types.SimpleNamespace(ids=list(text.replace(" ", "")))

    monkeypatch.setitem(sys.modules, "tokenizers", types.SimpleNamespace(Tokenizer=Tokenizer))
    counter = statistics.token_counter()
    assert counter.name.startswith("Qwen2.5-VL-7B-Instruct") and opened == [str(folder / "tokenizer.json")]
    assert counter.count("a b c") == 3

    monkeypatch.setitem(sys.modules, "tokenizers", None)  # not installed: the fallback, with the reason
    assert "not installed" in statistics.token_counter().name


def test_the_release_card_and_page_carry_table_2_beside_the_papers(researcher, login, english):
    from annotation import releases
    from k12vista.jobs import execute_job

    questions = [make_question(researcher) for _ in range(3)]
    Question.objects.update(status=Question.Status.AUDITED)
    candidate = CandidateSet.objects.create(name="draw", seed=1, bank_fingerprint="x")
    candidate.questions.set(questions)
    release = releases.start_release(candidate_set=candidate, by=researcher)
    execute_job(release.job_id)
    release.refresh_from_db()

    found = release.summary["statistics"]
    assert found["questions"] == 3 and found["solution_steps"] == 3.0 and found["answers"] == 1.0
    hf = release.files.get(form=ReleaseFile.Form.HUGGINGFACE)
    import zipfile

    from django.conf import settings

    with zipfile.ZipFile(Path(settings.MEDIA_ROOT) / hf.path) as archive:
        card = archive.read("k12vista-v1-hf/README.md").decode()
    assert "## Statistics (the paper's Table 2)" in card and "| Avg. Problem Tokens |" in card
    assert "| Question Number | 3 | 33660 |" in card and "Tokens counted by: fallback" in card
    page = login(researcher).get(f"/annotate/benchmark/releases/v{release.version}/").content.decode()
    assert 'id="release-statistics"' in page and "17721" in page and "fallback" in page


def test_table_3_over_pebench_records():
    records = [
        {"question": "求<image>值", "format_solution": "一步", "student_infer": "先算 x",
         "step_labels": [["a", "步骤正确", ""], ["b", "运算处理错误", "错"], ["c", "CE", "错"]]},
        {"question": "问", "format_solution": "", "student_infer": "答", "step_labels": [["a", "步骤正确", ""]]},
    ]  # fmt: skip
    found = statistics.table_3_pebench(records)
    assert (found["records"], found["student_input_steps"], found["student_error_steps"]) == (2, 2.0, 1.0)
    assert (found["problem_tokens"], found["solution_tokens"], found["student_input_tokens"]) == (1.5, 1.0, 2.0)


def test_a_pebench_release_carries_table_3_beside_the_papers(researcher, inspector, login, english):
    from k12vista.jobs import execute_job
    from pem import releases as pebench_releases
    from tests.pem_factories import add_to_pebench, label_steps, make_cot

    decided = make_cot(steps=["读图。", "算错。"], key="q1", question_text="求 $x$", reference_solution="步骤1：…")
    open_ = make_cot(steps=["一。", "二。"], key="q2")
    add_to_pebench(decided, open_)
    label_steps(decided, ["CS", "CE"], source="gold", rater="ivan", user=inspector)
    release = pebench_releases.start_release(by=researcher)
    execute_job(release.job_id)
    release.refresh_from_db()

    found = release.summary["statistics"]
    assert (found["records"], found["student_input_steps"], found["student_error_steps"]) == (1, 2.0, 1.0)
    assert found["problem_tokens"] == 4.0  # 求 $ x $
    page = login(researcher).get(f"/pem/releases/v{release.version}/").content.decode()
    assert 'id="release-statistics"' in page and "3033" in page and "fallback" in page


def test_table_3_of_a_pem_800k_export_counts_every_error_step_and_samples_tokens():
    table = statistics.PemTable3(total=5, sample=2)  # every 3rd record counted for tokens
    for i in range(5):
        table.add(problem="求值" * (i + 1), solution="一步", steps=["算"], output="[]")
    found = table.result({"CS": 8, "CE": 5, "KAE": 0})
    assert (found["records"], found["student_error_steps"], found["tokens_counted_on"]) == (5, 1.0, 2)
    assert found["problem_tokens"] == (2 + 8) / 2  # records 0 and 3


def test_a_pem_800k_export_carries_table_3_in_its_manifest_and_datasheet(researcher, settings, tmp_path):
    from pem.training import exports
    from tests.test_pem800k_export import kept_run

    run, _cots = kept_run(researcher)
    export = exports.start_export(filter_run=run, user=researcher)
    exports.write_export(export)
    root = exports.export_path(export)
    import json

    found = json.loads((root / "manifest.json").read_text())["statistics"]
    # Three chains of three steps, one labelled CE each; the question text holds a literal <image>.
    assert (found["records"], found["student_error_steps"], found["tokens_counted_on"]) == (3, 1.0, 3)
    assert found["problem_tokens"] == statistics.fallback_count("题目 <image> 文字")
    datasheet = (root / "datasheet.md").read_text()
    assert "## Statistics (the paper's Table 3)" in datasheet and "| K12-PEM-800K | 3 | 840175 |" in datasheet
