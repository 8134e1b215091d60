"""The synthetic data generator (bench/generate.py): formats, counts, images, labels, determinism.

The command-line runs use a tiny scale so the whole file stays fast; the statistical checks call
the generator functions directly, without images, on a few thousand records.
"""

import base64
import io
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from bench.generate import (
    IMAGE_HEIGHT_RANGE,
    IMAGE_WIDTH_RANGE,
    PAPER_COUNTS,
    counts_for_scale,
    iter_pebench,
    iter_pem,
    iter_questions,
)
from k12vista.vocabulary import (
    LABEL_CODES,
    QUESTION_TYPE_ZH,
    RELEASE_TAGS,
    QuestionType,
    parse_release_tag,
    stage_of_grade,
)

REPO = Path(__file__).resolve().parents[1]
SCALE = 0.0005  # 17 questions, 420 PEM records, 2 PEBench items
SEED = 7
FILES = ("questions.jsonl", "pem.jsonl", "pebench.jsonl")

MULTIPLE_CHOICE = QUESTION_TYPE_ZH[QuestionType.MULTIPLE_CHOICE]
FILL_IN_BLANK = QUESTION_TYPE_ZH[QuestionType.FILL_IN_BLANK]
FREE_RESPONSE = QUESTION_TYPE_ZH[QuestionType.FREE_RESPONSE]


def generate(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.generate", "--out", str(out), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """One command-line run shared by the file-level tests."""
    out = tmp_path_factory.mktemp("generated")
    result = generate(out, "--scale", str(SCALE), "--seed", str(SEED))
    assert result.returncode == 0, result.stderr
    return out, result.stdout


@pytest.fixture(scope="module")
def sample_questions():
    """About 1,700 questions without images: enough for averages, fast to build."""
    return list(iter_questions(0.05, SEED, with_images=False))


def test_it_counts_linearly_with_a_minimum_of_one():
    assert counts_for_scale(1.0) == {"questions": 33_660, "pem": 840_175, "pebench": 3_033}
    assert counts_for_scale(0.05) == {"questions": 1_683, "pem": 42_009, "pebench": 152}
    assert counts_for_scale(1e-9) == {"questions": 1, "pem": 1, "pebench": 1}
    assert counts_for_scale(2.0)["pem"] == 2 * PAPER_COUNTS["pem"]
    with pytest.raises(ValueError):
        counts_for_scale(0)


def test_it_writes_the_counts_of_counts_for_scale(generated):
    out, stdout = generated
    counts = counts_for_scale(SCALE)
    for name, file_name in zip(("questions", "pem", "pebench"), FILES, strict=True):
        assert len(read_jsonl(out / file_name)) == counts[name]
        size = (out / file_name).stat().st_size
        assert re.search(rf"^{file_name}: {counts[name]} records, {size} bytes, [\d.]+ s$", stdout, re.M), stdout
    assert not list(out.glob("*.partial"))


def test_it_writes_release_format_questions(generated):
    out, _ = generated
    required = {
        "hash_id",
        "question",
        "type",
        "subject",
        "img",
        "format_answer",
        "grade",
        "knowledge_points",
        "difficulty",
    }
    questions = read_jsonl(out / "questions.jsonl")
    for question in questions:
        assert required <= question.keys()
        assert re.fullmatch(r"[0-9a-f]{32}", question["hash_id"])
        assert question["type"] in QUESTION_TYPE_ZH.values()
        assert set(question["format_answer"]) == {"ground_truth", "format_solution"}
        assert question["format_answer"]["ground_truth"]
        assert all(isinstance(answer, str) and answer for answer in question["format_answer"]["ground_truth"])
        assert 1 <= len(question["knowledge_points"]) <= 3
        assert 0 <= question["difficulty"] <= 1
        assert "$" in question["question"]  # inline LaTeX
    assert len({question["hash_id"] for question in questions}) == len(questions)


def test_it_draws_jpeg_images_of_realistic_sizes(generated):
    out, _ = generated
    sizes = set()
    for question in read_jsonl(out / "questions.jsonl"):
        image = Image.open(io.BytesIO(base64.b64decode(question["img"], validate=True)))
        image.load()
        assert image.format == "JPEG"
        assert image.mode == "RGB"
        assert IMAGE_WIDTH_RANGE[0] <= image.width <= IMAGE_WIDTH_RANGE[1]
        assert IMAGE_HEIGHT_RANGE[0] <= image.height <= IMAGE_HEIGHT_RANGE[1]
        # Not a blank page: a figure has dark strokes on white.
        assert image.convert("L").getextrema()[0] < 100
        sizes.add(image.size)
    assert len(sizes) > 1


def test_it_gives_multiple_choice_four_options_and_one_letter(sample_questions):
    choices = [question for question in sample_questions if question["type"] == MULTIPLE_CHOICE]
    assert choices
    for question in choices:
        assert re.findall(r"^([A-Z])\. ", question["question"], re.M) == ["A", "B", "C", "D"]
        answers = question["format_answer"]["ground_truth"]
        assert len(answers) == 1
        assert answers[0] in "ABCD"
        assert "___" not in question["question"]
    # The correct letter is not always the same one.
    assert len({question["format_answer"]["ground_truth"][0] for question in choices}) == 4


def test_it_matches_fill_in_blanks_to_answers(sample_questions):
    blanks = [question for question in sample_questions if question["type"] == FILL_IN_BLANK]
    assert blanks
    for question in blanks:
        assert question["question"].count("___") == len(question["format_answer"]["ground_truth"])
        # Blanks are exactly three underscores: a longer run would miscount.
        assert "____" not in question["question"]
    assert max(question["question"].count("___") for question in blanks) > 1


def test_it_numbers_free_response_subquestions(sample_questions):
    free = [question for question in sample_questions if question["type"] == FREE_RESPONSE]
    assert free
    for question in free:
        numbers = [int(number) for number in re.findall(r"^\((\d+)\) ", question["question"], re.M)]
        assert numbers == list(range(1, len(numbers) + 1))
        assert len(numbers) >= 2
        assert len(question["format_answer"]["ground_truth"]) >= len(numbers)
        assert "___" not in question["question"]


def test_it_uses_valid_tags_and_grades_of_the_tag_stage(sample_questions):
    assert {question["subject"] for question in sample_questions} == set(RELEASE_TAGS)
    for question in sample_questions:
        _, stage = parse_release_tag(question["subject"])
        assert stage_of_grade(question["grade"]) == stage
    assert {question["type"] for question in sample_questions} == set(QUESTION_TYPE_ZH.values())


def test_it_writes_numbered_solution_steps(sample_questions):
    for question in sample_questions:
        steps = question["format_answer"]["format_solution"].split("\n")
        assert len(steps) >= 3
        for number, step in enumerate(steps, start=1):
            assert step.startswith(f"步骤{number}：")


def test_it_averages_about_the_papers_answer_and_step_counts(sample_questions):
    answers = statistics.mean(len(question["format_answer"]["ground_truth"]) for question in sample_questions)
    steps = statistics.mean(
        question["format_answer"]["format_solution"].count("\n") + 1 for question in sample_questions
    )
    assert 3.0 <= answers <= 3.5  # paper: 3.24
    assert 4.8 <= steps <= 5.5  # paper: 5.15
    chains = list(iter_pem(0.002, SEED))
    assert 5.5 <= statistics.mean(len(record["step_labels"]) for record in chains) <= 6.5


def check_chain(record: dict, minimum_steps: int) -> None:
    assert record["ground_truth"]
    steps = record["step_labels"]
    assert minimum_steps <= len(steps) <= 12
    for step in steps:
        assert isinstance(step, list)
        assert len(step) == 3
        text, label, explanation = step
        assert text
        assert label in LABEL_CODES
        if label != "CS":
            assert explanation.strip(), step
            assert re.search(r"[\u4e00-\u9fff]", explanation), step
    assert record["student_infer"] == "\n\n".join(step[0] for step in steps)


def test_it_labels_pem_steps_with_valid_codes_and_explains_every_error(generated):
    out, _ = generated
    records = read_jsonl(out / "pem.jsonl")
    for record in records:
        assert {"hash_id", "question", "ground_truth", "student_infer", "step_labels"} <= record.keys()
        check_chain(record, minimum_steps=2)
    labels = [step[1] for record in records for step in record["step_labels"]]
    # Mostly correct steps, but errors of several kinds.
    assert 0.6 < labels.count("CS") / len(labels) < 0.9
    assert len(set(labels) - {"CS"}) >= 5


def test_it_writes_pebench_items_with_at_least_three_steps(generated):
    out, _ = generated
    keys = ["hash_id", "question", "format_solution", "ground_truth", "student_infer", "step_labels"]
    for record in read_jsonl(out / "pebench.jsonl"):
        assert list(record) == keys
        assert record["format_solution"].startswith("步骤1：")
        check_chain(record, minimum_steps=3)
    for record in iter_pebench(0.1, SEED):
        check_chain(record, minimum_steps=3)


def test_it_refers_chains_to_generated_questions(generated):
    out, _ = generated
    questions = {question["hash_id"]: question for question in read_jsonl(out / "questions.jsonl")}
    uses = dict.fromkeys(questions, 0)
    for record in read_jsonl(out / "pem.jsonl"):
        question = questions[record["hash_id"]]
        assert record["question"] == question["question"]
        assert record["ground_truth"] == question["format_answer"]["ground_truth"]
        uses[record["hash_id"]] += 1
    # The paper keeps every question at least three times in PEM-800K.
    assert min(uses.values()) >= 3
    for record in read_jsonl(out / "pebench.jsonl"):
        assert record["format_solution"] == questions[record["hash_id"]]["format_answer"]["format_solution"]


def test_it_gives_identical_output_for_the_same_seed(generated, tmp_path):
    out, _ = generated
    result = generate(tmp_path, "--scale", str(SCALE), "--seed", str(SEED))
    assert result.returncode == 0, result.stderr
    for file_name in FILES:
        assert (tmp_path / file_name).read_bytes() == (out / file_name).read_bytes()
    assert list(iter_pem(SCALE, SEED)) == list(iter_pem(SCALE, SEED))


def test_it_gives_different_output_for_another_seed(generated, tmp_path):
    out, _ = generated
    result = generate(tmp_path, "--scale", str(SCALE), "--seed", str(SEED + 1))
    assert result.returncode == 0, result.stderr
    for file_name in FILES:
        assert (tmp_path / file_name).read_bytes() != (out / file_name).read_bytes()
    ours = {question["hash_id"] for question in read_jsonl(out / "questions.jsonl")}
    theirs = {question["hash_id"] for question in read_jsonl(tmp_path / "questions.jsonl")}
    assert not ours & theirs


def test_it_writes_only_the_requested_files(tmp_path):
    result = generate(tmp_path, "--scale", str(SCALE), "--only", "pebench,pem")
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pebench.jsonl", "pem.jsonl"]


def test_it_rejects_unknown_files_and_bad_scales(tmp_path):
    assert generate(tmp_path, "--scale", "0.001", "--only", "answers").returncode == 2
    assert generate(tmp_path, "--scale", "0").returncode == 2
    assert not list(tmp_path.iterdir())
