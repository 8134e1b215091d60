"""PEM training exports: four formats, each checked against its rules; PEBench items refused."""

import json

import pytest

from inference import client, parsing
from pem import build, services
from pem.models import ChainOfThought, PEBenchItem, StepLabel, TrainingExport
from pem.training import exports, filters, formats
from tests.annotation_factories import make_question
from tests.pem_factories import label_steps, make_cot

pytestmark = pytest.mark.django_db

IMPORTED = StepLabel.Source.IMPORTED
STEPS = ("由图可知 $AB=4$。", "由勾股定理得 $AC=5$。", "所以答案为 B。")


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def kept_run(user, n_models=3, question=None):
    question = question or make_question(answers=["B"])
    cots = []
    for i in range(n_models):
        cot = make_cot(
            key=f"{question.hash_id}:{i}",
            model_name=f"m{i}",
            question=question,
            steps=STEPS,
            reference_answer="B",
            question_text="题目 <image> 文字",
        )
        label_steps(cot, ("CS", "CE", "CS"), source=IMPORTED, rater="pem", explanation="计算错误")
        cots.append(cot)
    run = filters.start_filter_run(source=IMPORTED, rater="pem", params=None, user=user)
    filters.run_filters(run)
    run.refresh_from_db()
    return run, cots


def test_it_writes_all_four_formats_that_pass_their_rules_and_marks_the_chains(media, researcher):
    run, cots = kept_run(researcher)
    assert run.kept == 3
    export = exports.start_export(filter_run=run, user=researcher)
    result = exports.write_export(export)
    export.refresh_from_db()
    assert export.status == TrainingExport.Status.DONE and result["records"] == 3
    assert exports.verify_export(export) == dict.fromkeys(formats.FORMATS, 3)
    root = exports.export_path(export)
    assert sorted(p.name for p in (root / "images").iterdir()) == [
        f"{f.pk}.png" for f in cots[0].question.figures.all()
    ]
    assert result["images"] == 1  # one figure, written once for three chains
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["min_pixels"] == exports.DEFAULT_MIN_PIXELS and manifest["max_pixels"] == exports.DEFAULT_MAX_PIXELS
    assert set(manifest["files"]) >= {"trl.jsonl", "llamafactory.jsonl", "dataset_info.json", "datasheet.md"}
    assert "template: qwen2_vl" in (root / "llamafactory-qwen2_5vl-lora.yaml").read_text()
    trl = json.loads((root / "trl.jsonl").read_text().splitlines()[0])
    assert trl["images"] == [f"images/{cots[0].question.figures.get().pk}.png"]
    # The target is the judge's structured output, so a scoring run reads the trained PEM's answers.
    target = trl["messages"][2]["content"][0]["text"]
    assert json.loads(target)["steps"][1] == {"step": STEPS[1], "label": "CE", "reason": "计算错误"}
    assert parsing.parse_step_judgment(target).value["steps"][1]["label"] == "CE"
    assert "[image]" in trl["messages"][1]["content"][0]["text"]  # a literal <image> in the text is not an image
    # The figure after the text, where a scoring run sends a judge its figures (client.build_messages):
    # a PEM trained with it before the text is asked a prompt it never saw, and writes noise.
    sent = client.build_messages(system="s", user="u", image_urls=["data:image/png;base64,AA"])[-1]["content"]
    assert [p["type"] for p in trl["messages"][1]["content"]] == [p["type"].removesuffix("_url") for p in sent]
    assert [p["type"] for p in sent] == ["text", "image_url"]
    lines = {name: json.loads((root / file).read_text().splitlines()[0]) for name, file in formats.FILE_NAMES.items()}
    assert lines["llamafactory"]["messages"][1]["content"].endswith("<image>")
    assert lines["swift"]["messages"][1]["content"].endswith("<image>")
    assert lines["qwen"]["conversations"][0]["value"].startswith(formats.SYSTEM_PROMPT)
    assert lines["qwen"]["conversations"][0]["value"].endswith("<image>")
    assert set(ChainOfThought.objects.filter(in_training_data=True)) == set(cots)
    with pytest.raises(services.PEBenchError):  # PEBench builds refuse training data
        build.build_pebench(target_size=1, min_steps=1, seed=1, user=researcher)


def test_it_refuses_an_export_with_pebench_items_and_names_them(media, researcher):
    run, cots = kept_run(researcher)
    PEBenchItem.objects.create(cot=cots[1])
    with pytest.raises(exports.ExportError, match=cots[1].key):
        exports.start_export(filter_run=run, user=researcher)
    assert not ChainOfThought.objects.filter(in_training_data=True).exists()


@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "llamafactory",
            {
                "messages": [{"role": "user", "content": "<image>题"}, {"role": "assistant", "content": "a"}],
                "images": [],
            },
        ),
        ("swift", {"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]}),
        ("trl", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}),
        (
            "qwen",
            {
                "conversations": [{"from": "human", "value": "<image>q"}, {"from": "gpt", "value": "a"}],
                "image": "../etc/passwd",
            },
        ),
    ],
)
def test_the_checkers_reject_lines_that_break_their_format(name, line):
    with pytest.raises(formats.FormatError):
        formats.check_line(name, line, lambda path: True)
