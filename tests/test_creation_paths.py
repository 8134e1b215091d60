"""A question and a PEBench chain are each created by a single path (create_question, save_chain)
and by a bulk path (the JSONL and PEBench imports). Both build their rows in one place; these
tests hold that: the same record through either path stores the same rows, column for column,
so a column one path sets and the other forgets fails here."""

import base64
import io
import json
import re

import pytest
from PIL import Image

from annotation import jsonl_bulk, jsonl_import
from annotation.jsonl_records import read_record
from annotation.models import Question, SourceDocument
from annotation.public_formats import unwrapped
from annotation.services import create_question
from k12vista.import_files import open_source
from pem import services as pem_services
from pem.models import ChainOfThought
from pem.pebench_import import import_records
from tests.annotation_factories import figure_png, make_question

pytestmark = pytest.mark.django_db

# Told apart by the database or the clock, never by the path.
NOT_COMPARED = {"id", "created", "updated", "cot_id", "step_id"}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def columns(row, *, skip=()) -> dict:
    """Every concrete column of a saved row as the database holds it, a file as its name (without
    the random part) and its bytes."""
    row = type(row)._default_manager.get(pk=row.pk)
    values = {}
    for field in type(row)._meta.concrete_fields:
        if field.attname in NOT_COMPARED or field.attname in skip:
            continue
        value = getattr(row, field.attname)
        if hasattr(value, "open"):  # a file
            value = (re.sub(r"-[0-9a-f]{12}\.", ".", value.name), value.read())
        values[field.attname] = value
    return values


OWNER = {"question_id"}  # the question of the first path is deleted before the second writes it again


def question_rows(question: Question) -> dict:
    return {
        "question": columns(question),
        "knowledge_points": sorted(question.knowledge_points.values_list("subject", "name")),
        "figures": [columns(f, skip=OWNER) for f in question.figures.order_by("position")],
        "edits": [columns(e, skip=OWNER) for e in question.edits.all()],
        "flags": sorted(
            (columns(f, skip=OWNER) for f in question.flags.all()), key=lambda f: (f["code"], f["message"])
        ),
    }


def png(size) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, "white").save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def test_a_question_is_stored_alike_by_create_question_and_the_bulk_import(tmp_path, annotator):
    record = {
        "hash_id": "same-1", "subject": "physics", "grade": 8, "type": "multiple_choice",
        "text": "如图，电阻为多少？$\\frac{1}{$",
        "options": [{"label": "A", "text": "$5$"}, {"label": "B", "text": "6"}],
        "answers": ["A"], "raw_solution": "由欧姆定律。", "solution_steps": ["$R=U/I$。", "$R=5$。"],
        "knowledge_points": [" 欧姆定律 ", "欧姆定律", "电阻" * 150], "difficulty": 0.4, "source": "2024 期中",
        # A sharp figure and a tiny blank one (flagged as too small and as blurry).
        "figures": [base64.b64encode(figure_png()).decode("ascii"), png((30, 20))],
    }  # fmt: skip
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    document = SourceDocument.objects.create(kind="jsonl", original_name="one.jsonl", sha256="0" * 64, size=1)

    report = jsonl_import.import_questions_file(path=path, user=annotator, source_document=document)
    assert report.created == 1
    bulk = question_rows(Question.objects.get(hash_id="same-1"))
    Question.objects.all().delete()

    with open_source(path, unwrap=unwrapped) as source:
        data, _fmt, _guessed = read_record(record, source)
    data.source_document = document
    single = question_rows(create_question(data=data, user=annotator, note=jsonl_bulk.NOTE))

    assert {f["code"] for f in single["flags"]} >= {"low_resolution", "option_count"}  # flags are compared too
    assert len(single["knowledge_points"]) == 2 and len(single["figures"]) == 2
    assert bulk == single


def test_a_chain_is_stored_alike_by_save_chain_and_the_bulk_import(tmp_path, annotator):
    question = make_question(annotator, hash_id="q-bank")
    reference = {
        "hash_id": "q-bank", "student_infer": "一。\n\n二。", "model": "qwen",
        "step_labels": [["一。", "CS", ""], ["二。", "CE", "应为 5。"]],
    }  # fmt: skip
    ours = {
        "key": "ours-1", "hash_id": "q-none", "model": "gpt-4o", "subject": "biology", "grade": 8,
        "type": "multiple_choice", "question_text": "下列说法正确的是", "reference_solution": "步骤1：…",
        "reference_answer": ["A"], "response": "第一步。\n\n第二步。", "step_source": "model",
        "in_training_data": True,
        "steps": [
            {"text": "第一步。", "label": "CS", "labels": [
                {"source": "model", "rater": "judge-72b", "label": "HE", "explanation": "编造"}]},
            {"text": "第二步。", "label": "IAE", "explanation": "缺第二问"},
        ],
    }  # fmt: skip
    records = [reference, ours]
    path = tmp_path / "chains.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")

    def stored() -> dict:
        chains = {}
        for cot in ChainOfThought.objects.order_by("key"):
            steps = cot.steps.order_by("position")
            labels = [columns(label) | {"position": step.position} for step in steps for label in step.labels.all()]
            chains[cot.key] = {
                "chain": columns(cot),
                "steps": [columns(step) for step in steps],
                "labels": sorted(labels, key=lambda label: (label["position"], label["rater"])),
            }
        return chains

    report = import_records(path=path, name="file")
    assert report.created == 2
    bulk = stored()
    ChainOfThought.objects.all().delete()

    for record in records:
        outcome = pem_services.save_chain(pem_services.record_to_chain(record), import_name="file")
        assert outcome == ("created", "")
    single = stored()

    assert single["q-bank"]["chain"]["question_text"] and ChainOfThought.objects.get(key="q-bank").question == question
    assert len(single["ours-1"]["labels"]) == 3
    assert bulk == single
