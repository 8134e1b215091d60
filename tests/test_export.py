import base64
import hashlib
import io
import json
import zipfile
from unittest import mock

import pytest
from django.core.management import call_command
from PIL import Image

from annotation.export import ExportError, export_questions, filter_questions
from annotation.jsonl_import import import_questions_file
from annotation.models import Question
from annotation.services import FigureData, QuestionData, create_question
from bench.generate import iter_questions
from k12vista.jobs import execute_job, start_job
from k12vista.models import Job

SCALE = 0.0003  # ten questions


pytestmark = pytest.mark.usefixtures("tmp_media")


@pytest.fixture
def release(researcher, tmp_path):
    path = tmp_path / "release.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for record in iter_questions(SCALE, 0):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    import_questions_file(path=path, user=researcher)
    return path


def png_figure():
    buffer = io.BytesIO()
    Image.new("RGB", (300, 200), "white").save(buffer, "PNG")
    return FigureData(content=buffer.getvalue())


def content_hashes():
    return dict(Question.objects.values_list("hash_id", "content_hash"))


def reimport(path, user):
    """Imports into an emptied question bank, as a fresh database would."""
    Question.objects.all().delete()
    return import_questions_file(path=path, user=user)


def read_lines(path):
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def test_it_round_trips_the_reference_format(researcher, release, tmp_path):
    before = content_hashes()

    result = export_questions(queryset=Question.objects.all(), fmt="reference", out_path=tmp_path / "out.jsonl")

    assert result["count"] == 10
    assert result["sha256"] == hashlib.sha256((tmp_path / "out.jsonl").read_bytes()).hexdigest()
    assert result["bytes"] == (tmp_path / "out.jsonl").stat().st_size
    report = reimport(tmp_path / "out.jsonl", researcher)
    assert (report.created, report.failed) == (10, 0), report.failed_lines
    assert content_hashes() == before


def test_it_writes_release_records(release, tmp_path):
    export_questions(queryset=Question.objects.all(), fmt="reference", out_path=tmp_path / "out.jsonl")

    original = {r["hash_id"]: r for r in iter_questions(SCALE, 0, with_images=False)}
    for record in read_lines(tmp_path / "out.jsonl"):
        source = original[record["hash_id"]]
        # The generator writes no figure placeholder: the export puts one where the stem ends.
        assert record["question"].count("<image>") == 1
        assert (record["type"], record["subject"], record["question"].replace("<image>", "")) == (
            source["type"],
            source["subject"],
            source["question"],
        )
        assert record["format_answer"] == source["format_answer"]
        assert Image.open(io.BytesIO(base64.b64decode(record["img"]))).format == "JPEG"


def test_it_round_trips_our_format_with_images(researcher, tmp_path):
    data = QuestionData(
        hash_id="png-1", subject="chemistry", grade=11, qtype="free_response", text="(1) 求 $n$；(2) 求 $m$。",
        answers=["$2$", "$3$"], raw_solution="先算 n，再算 m。", knowledge_points=["物质的量"],
        figures=[png_figure(), png_figure()],
    )  # fmt: skip
    create_question(data=data, user=researcher)
    before = content_hashes()

    result = export_questions(queryset=Question.objects.all(), fmt="studio", out_path=tmp_path / "out.zip")

    with zipfile.ZipFile(tmp_path / "out.zip") as archive:
        assert sorted(archive.namelist()) == ["images/png-1-0.png", "images/png-1-1.png", "questions.jsonl"]
    assert result["count"] == 1
    report = reimport(tmp_path / "out.zip", researcher)
    assert (report.created, report.failed) == (1, 0), report.failed_lines
    assert content_hashes() == before
    assert Question.objects.get().figures.count() == 2


def test_it_converts_a_png_figure_to_jpeg_for_the_release(researcher, tmp_path):
    data = QuestionData(hash_id="p", subject="math", grade=3, qtype="fill_in_blank", text="___", answers=["1"],
                        figures=[png_figure()])  # fmt: skip
    create_question(data=data, user=researcher)

    export_questions(queryset=Question.objects.all(), fmt="reference", out_path=tmp_path / "out.jsonl")

    (record,) = read_lines(tmp_path / "out.jsonl")
    assert record["subject"] == "math-g6"
    assert Image.open(io.BytesIO(base64.b64decode(record["img"]))).format == "JPEG"


def test_it_filters_questions(release):
    some = Question.objects.order_by("id")[0]

    assert list(filter_questions({"hash_ids": [some.hash_id]})) == [some]
    assert (
        filter_questions({"subject": some.subject, "qtype": "选择题"}).count()
        == Question.objects.filter(subject=some.subject, qtype="multiple_choice").count()
    )
    assert filter_questions({"status": "released"}).count() == 0
    assert filter_questions({}).count() == 10
    with pytest.raises(ExportError, match="unknown subject 'music'"):
        filter_questions({"subject": "music"})


def test_it_exports_as_a_job(researcher, release, settings):
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        job = start_job(
            kind="annotation.export_questions", user=researcher, params={"filters": {"stage": "high"}, "fmt": "studio"}
        )

    assert execute_job(job.pk) == Job.Status.SUCCEEDED

    job.refresh_from_db()
    assert job.result["path"] == f"exports/questions-{job.pk}-studio.zip"
    assert job.result["count"] == Question.objects.filter(stage="high").count()
    written = settings.MEDIA_ROOT / job.result["path"]
    assert hashlib.sha256(written.read_bytes()).hexdigest() == job.result["sha256"]
    assert not list(written.parent.glob("*.partial"))


def test_it_prints_a_json_summary_from_the_command(release, tmp_path):
    out = io.StringIO()

    call_command("export_questions", "--type", "multiple_choice", "--out", str(tmp_path / "mc.jsonl"), stdout=out)

    summary = json.loads(out.getvalue())
    assert summary["count"] == Question.objects.filter(qtype="multiple_choice").count() > 0
    assert summary["path"] == str(tmp_path / "mc.jsonl")
    assert {r["type"] for r in read_lines(tmp_path / "mc.jsonl")} == {"选择题"}
