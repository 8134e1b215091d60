import base64
import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile
from django.core.management import call_command
from PIL import Image

from annotation import jsonl_import
from annotation.jsonl_import import import_questions_file, register_upload, start_import
from annotation.models import Figure, Question, SourceDocument
from annotation.record_fields import question_type, split_options, split_steps
from bench.generate import counts_for_scale, iter_questions
from k12vista import import_files
from k12vista.import_files import BoundedReader, ImportFileError, RecordError
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.ci import needs

SCALE = 0.0003  # ten questions


@pytest.fixture(autouse=True)
def _english(english):
    """Line reasons are written in the team's language; these tests read them in English."""


pytestmark = pytest.mark.usefixtures("tmp_media")


def image_bytes(fmt="JPEG", size=(240, 160)):
    image = Image.new("RGB", size, "white")
    for x in range(20, 200):
        image.putpixel((x, 80), (0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def b64(content):
    return base64.b64encode(content).decode("ascii")


def write_lines(path, lines):
    """Writes records (dicts) or raw text lines, one a line."""
    with open(path, "w", encoding="utf-8") as out:
        for line in lines:
            out.write((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n")
    return path


def studio(hash_id="s1", **fields):
    record = {
        "hash_id": hash_id,
        "subject": "physics",
        "grade": 8,
        "type": "fill_in_blank",
        "text": "电阻为___欧。",
        "answers": ["$5$"],
        "solution_steps": ["由欧姆定律得 $R=U/I$。", "$R=5$。"],
        "knowledge_points": ["欧姆定律"],
        "difficulty": 0.4,
        "source": "2024 期中",
        "figures": [b64(image_bytes())],
    }
    return record | fields


def reference(hash_id="r1", **fields):
    record = {
        "hash_id": hash_id,
        "question": "如图，求 $x$ 的值。则 $x$ 为（　　）\nA. $1$\nB. $2$\nC. $3$\nD. $4$",
        "type": "选择题",
        "subject": "math-g9",
        "img": b64(image_bytes()),
        "format_answer": {"ground_truth": ["B"], "format_solution": "步骤1：由图可知 $x=2$。\n步骤2：故选 B。"},
    }
    return record | fields


def release_file(tmp_path, scale=SCALE):
    return write_lines(tmp_path / "release.jsonl", iter_questions(scale, 0))


def test_it_imports_the_reference_release_format(researcher, tmp_path):
    path = release_file(tmp_path)
    records = {r["hash_id"]: r for r in iter_questions(SCALE, 0, with_images=False)}

    report = import_questions_file(path=path, user=researcher)

    assert report.created == counts_for_scale(SCALE)["questions"] == 10
    assert report.failed == report.conflicts == 0
    for question in Question.objects.prefetch_related("figures", "knowledge_points"):
        record = records[question.hash_id]
        assert question.answers == record["format_answer"]["ground_truth"]
        assert question.raw_solution == record["format_answer"]["format_solution"]
        assert len(question.solution_steps) == record["format_answer"]["format_solution"].count("步骤")
        assert question.grade == record["grade"]
        assert sorted(kp.name for kp in question.knowledge_points.all()) == sorted(record["knowledge_points"])
        assert question.difficulty == record["difficulty"]
        assert [f.origin for f in question.figures.all()] == [Figure.Origin.IMPORTED]
        if record["type"] == "选择题":
            assert [o["label"] for o in question.options] == ["A", "B", "C", "D"]
            assert "\nA." not in question.text
    assert Question.objects.first().edits.get().user == researcher


def test_it_splits_embedded_options_in_any_of_the_usual_styles():
    for text in [
        "求值（ ）A. 1 B. 2 C. 3 D. 4",
        "求值（ ）\nA、1\nB、2\nC、3\nD、4",
        "求值（ ）\nA．1\nB．2\nC．3\nD．4",
    ]:
        stem, options = split_options(text)
        assert stem == "求值（ ）"
        assert options == [{"label": label, "text": str(n)} for n, label in enumerate("ABCD", start=1)]


def test_it_does_not_take_a_point_named_a_for_an_option():
    stem, options = split_options("点 A. 在圆上，则（ ）\nA. 1\nB. 2\nC. 3\nD. 4")
    assert stem == "点 A. 在圆上，则（ ）"
    assert len(options) == 4
    assert split_options("如图，A、B、C、D 四点共圆。") == ("如图，A、B、C、D 四点共圆。", [])


def test_it_splits_numbered_solutions_into_steps():
    assert split_steps("步骤1：设 $x$。\n步骤2：解得 $x=3.5$。") == ["设 $x$。", "解得 $x=3.5$。"]
    assert split_steps("1. 设 $x$。\n继续。\n2、得解。") == ["设 $x$。\n继续。", "得解。"]
    assert split_steps("3.14 是圆周率的近似值。") == []


def test_it_keeps_an_explicit_grade_only_inside_the_tags_stage(researcher, tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [reference("in", grade=8), reference("out", grade=3), reference("none")])

    import_questions_file(path=path, user=researcher)

    assert dict(Question.objects.values_list("hash_id", "grade")) == {"in": 8, "out": 9, "none": 9}


def test_it_reads_a_list_solution_and_several_images(researcher, tmp_path):
    record = reference(img=[b64(image_bytes()), b64(image_bytes("PNG"))])
    record["format_answer"]["format_solution"] = ["设 $x$。", "故选 B。"]
    path = write_lines(tmp_path / "q.jsonl", [record])

    import_questions_file(path=path, user=researcher)

    question = Question.objects.get()
    assert question.solution_steps == ["设 $x$。", "故选 B。"]
    assert question.raw_solution == "设 $x$。\n故选 B。"
    assert question.figures.count() == 2


def studio_zip(path, records, files):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("questions.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in records))
        for name, content in files.items():
            archive.writestr(name, content)
    return path


def test_it_imports_our_format_from_a_zip_with_images(researcher, tmp_path):
    records = [
        studio("s1", figures=[{"path": "images/a.png"}, {"path": "./images/b.jpg"}]),
        studio("s2", type="问答题", figures=["data:image/jpeg;base64," + b64(image_bytes())]),
    ]
    path = studio_zip(tmp_path / "q.zip", records, {"images/a.png": image_bytes("PNG"), "images/b.jpg": image_bytes()})

    report = import_questions_file(path=path, user=researcher)

    assert (report.created, report.failed) == (2, 0), report.failed_lines
    first = Question.objects.get(hash_id="s1")
    assert (first.subject, first.grade, first.stage, first.qtype) == ("physics", 8, "middle", "fill_in_blank")
    assert first.solution_steps == ["由欧姆定律得 $R=U/I$。", "$R=5$。"]
    assert first.source == "2024 期中"
    assert [f.image.name.rsplit(".", 1)[-1] for f in first.figures.all()] == ["png", "jpg"]
    assert Question.objects.get(hash_id="s2").qtype == "free_response"


def test_it_reports_bad_lines_by_number_and_keeps_the_good_ones(researcher, tmp_path):
    lines = [
        studio("good1"),
        '{"hash_id": "broken", ',
        studio("bad-subject", subject="music"),
        reference("bad-tag", subject="music-g9"),
        studio("bad-type", type="判断题"),
        studio("bad-base64", figures=["not base64!!"]),
        studio("not-an-image", figures=[b64(b"just some text, not pixels")]),
        studio("lying-image", figures=["data:image/png;base64," + b64(image_bytes("JPEG"))]),
        studio("path-outside-zip", figures=[{"path": "images/a.png"}]),
        studio("bad-grade", grade=13),
        studio("type-not-text", type=5),
        "",
        reference("good2"),
    ]
    path = write_lines(tmp_path / "q.jsonl", lines)

    report = import_questions_file(path=path, user=researcher)

    assert report.created == 2
    assert set(Question.objects.values_list("hash_id", flat=True)) == {"good1", "good2"}
    reasons = {entry["line"]: entry["reason"] for entry in report.failed_lines}
    assert report.failed == len(reasons) == 10
    assert reasons[2].startswith("not valid JSON")
    assert reasons[3].startswith("subject: unknown subject 'music'")
    assert reasons[4].startswith("subject: unknown subject tag 'music-g9'")
    assert reasons[5].startswith("type: unknown question type '判断题'")
    assert reasons[6] == "figures[0]: not valid base64"
    assert reasons[7].startswith("figures[0]: not a usable image")
    assert reasons[8] == "figures[0]: claims to be PNG but the data is JPEG"
    assert reasons[9].startswith("figures[0]: a figure given by path needs a zip archive")
    assert reasons[10].startswith("grade:")
    assert reasons[11] == "type: expected text"  # the field named once
    assert {entry["hash_id"] for entry in report.failed_lines if entry["line"] > 2} >= {"bad-subject", "bad-grade"}


def test_it_caps_the_listed_problems_and_says_so(researcher, tmp_path, monkeypatch):
    monkeypatch.setattr("k12vista.reports.REPORT_LIMIT", 2)
    path = write_lines(tmp_path / "q.jsonl", ["{", "{", "{"])

    report = import_questions_file(path=path, user=researcher).as_dict()

    assert report["failed"] == 3
    assert len(report["failed_lines"]) == 2
    assert report["failed_lines_truncated"] is True


def test_it_skips_an_overlong_line_without_reading_it_whole(researcher, tmp_path, monkeypatch):
    monkeypatch.setattr(import_files, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(import_files, "READ_CHUNK", 64)
    path = write_lines(tmp_path / "q.jsonl", [reference("long", question="x" * 5000), studio("short", figures=[])])

    report = import_questions_file(path=path, user=researcher)

    assert report.failed_lines == [{"line": 1, "hash_id": "", "reason": "the line is longer than 1,000 bytes",
                                    "reason_code": "line_too_long", "reason_params": {"n": "1,000"}}]  # fmt: skip
    assert report.created == 1


def test_it_creates_nothing_on_reimport(researcher, tmp_path):
    path = release_file(tmp_path)
    import_questions_file(path=path, user=researcher)
    hashes = dict(Question.objects.values_list("hash_id", "content_hash"))

    report = import_questions_file(path=path, user=researcher)

    assert (report.created, report.unchanged, report.conflicts, report.failed) == (0, 10, 0, 0)
    assert dict(Question.objects.values_list("hash_id", "content_hash")) == hashes
    assert Figure.objects.count() == 10


def test_it_reports_changed_content_as_a_conflict_and_keeps_the_original(researcher, tmp_path):
    import_questions_file(path=write_lines(tmp_path / "a.jsonl", [studio("s1")]), user=researcher)
    before = Question.objects.get()

    changed = studio("s1", answers=["$6$"], knowledge_points=["电功率"])
    report = import_questions_file(path=write_lines(tmp_path / "b.jsonl", [changed]), user=researcher)

    assert report.conflicts == 1
    assert report.conflict_lines[0]["line"] == 1
    assert report.conflict_lines[0]["fields"] == ["answers", "knowledge_points"]
    after = Question.objects.get()
    assert (after.answers, after.content_hash, after.version) == (["$5$"], before.content_hash, before.version)


def test_it_fails_only_the_line_whose_image_is_damaged_in_the_archive(researcher, tmp_path):
    image = image_bytes()
    records = [studio("s1", figures=[{"path": "images/a.jpg"}]), studio("s2")]
    path = studio_zip(tmp_path / "q.zip", records, {"images/a.jpg": image})
    data = path.read_bytes()
    at = data.index(image) + 100
    path.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])

    report = import_questions_file(path=path, user=researcher)

    assert report.created == 1
    assert report.failed_lines[0]["line"] == 1
    assert report.failed_lines[0]["reason"].startswith("figures[0]: images/a.jpg in the archive is damaged")


def test_it_refuses_a_zip_entry_that_climbs_out(researcher, tmp_path):
    path = studio_zip(tmp_path / "q.zip", [studio()], {"../evil.png": image_bytes()})

    with pytest.raises(ImportFileError, match=r"'\.\./evil\.png', which points outside the archive"):
        import_questions_file(path=path, user=researcher)
    assert not Question.objects.exists()


def test_it_refuses_a_zip_entry_with_an_absolute_path(researcher, tmp_path):
    path = studio_zip(tmp_path / "q.zip", [studio()], {"/etc/evil.png": image_bytes()})

    with pytest.raises(ImportFileError, match="an absolute path"):
        import_questions_file(path=path, user=researcher)


def test_it_refuses_a_zip_bomb(researcher, tmp_path):
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("questions.jsonl", json.dumps(studio()))
        archive.writestr("images/zeros.png", b"\0" * (8 * 1024 * 1024))

    with pytest.raises(ImportFileError, match="over the limit of 200:1"):
        import_questions_file(path=tmp_path / "bomb.zip", user=researcher)


def test_it_refuses_an_archive_that_unpacks_too_large(researcher, tmp_path, settings):
    settings.ZIP_MAX_UNCOMPRESSED_BYTES = 1000
    path = studio_zip(tmp_path / "q.zip", [studio()], {"images/a.jpg": image_bytes()})

    with pytest.raises(ImportFileError, match="over the limit of 1,000"):
        import_questions_file(path=path, user=researcher)


def test_it_stops_reading_an_entry_past_its_declared_size():
    reader = BoundedReader(io.BytesIO(b"0123456789"), 4, "questions.jsonl")

    with pytest.raises(ImportFileError, match="larger than its header says"):
        reader.read()


def test_it_refuses_a_file_that_is_neither_jsonl_nor_zip(researcher, tmp_path):
    path = tmp_path / "exam.pdf"
    path.write_bytes(b"%PDF-1.7\n...")

    with pytest.raises(ImportFileError, match="neither JSONL"):
        import_questions_file(path=path, user=researcher)
    with pytest.raises(ImportFileError, match="neither JSONL"):
        register_upload(path=path, user=researcher)


def test_it_reports_progress_with_the_line_count(researcher, tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_import, "PROGRESS_EVERY", 4)
    calls = []

    import_questions_file(path=release_file(tmp_path), user=researcher, progress=lambda d, t: calls.append((d, t)))

    assert calls == [(0, 10), (4, 10), (8, 10), (10, 10)]


def test_it_registers_an_upload_with_its_hash(researcher):
    content = json.dumps(studio()).encode()
    upload = SimpleUploadedFile("batch.jsonl", content)

    document = register_upload(uploaded_file=upload, user=researcher)

    assert (document.kind, document.size, document.original_name) == ("jsonl", len(content), "batch.jsonl")
    assert document.sha256 == hashlib.sha256(content).hexdigest()
    assert document.file.read() == content


def test_it_registers_a_large_upload_spooled_to_disk(researcher):
    content = json.dumps(studio()).encode()
    upload = TemporaryUploadedFile("batch.jsonl", "application/jsonl", len(content), "utf-8")
    upload.write(content)

    document = register_upload(uploaded_file=upload, user=researcher)

    assert document.sha256 == hashlib.sha256(content).hexdigest()
    assert document.file.read() == content


def test_it_refuses_an_upload_over_the_size_limit(researcher, settings):
    settings.MAX_UPLOAD_BYTES = 10

    with pytest.raises(ImportFileError, match="over the upload limit of 10"):
        register_upload(uploaded_file=SimpleUploadedFile("a.jsonl", b'{"hash_id": "x"}'), user=researcher)
    assert not SourceDocument.objects.exists()


def start(document, user):
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return start_import(document=document, user=user)


def test_it_imports_as_a_job(researcher, tmp_path):
    document = register_upload(path=release_file(tmp_path), user=researcher)
    job = start(document, researcher)

    assert execute_job(job.pk) == Job.Status.SUCCEEDED

    job.refresh_from_db()
    assert (job.result["created"], job.result["failed"], job.done, job.total) == (10, 0, 10, 10)
    assert SourceDocument.objects.get().job == job
    assert Question.objects.filter(source_document=document).count() == 10


def test_it_refuses_an_unsafe_archive_at_upload(researcher, tmp_path):
    path = studio_zip(tmp_path / "q.zip", [studio()], {"../evil.png": image_bytes()})
    with pytest.raises(ImportFileError, match="points outside the archive"):
        register_upload(path=path, user=researcher)
    assert not SourceDocument.objects.exists()


def test_it_records_a_refused_archive_on_the_document(researcher, tmp_path):
    document = register_upload(path=studio_zip(tmp_path / "ok.zip", [studio()], {}), user=researcher)
    # The stored file changed after the upload check (a restore, a disk fault): the import checks again.
    studio_zip(Path(document.file.path), [studio()], {"../evil.png": image_bytes()})
    job = start(document, researcher)

    assert execute_job(job.pk) == Job.Status.FAILED

    job.refresh_from_db()
    assert "points outside the archive" in job.error
    assert "points outside the archive" in SourceDocument.objects.get().error


def test_it_prints_a_json_summary_from_the_command(researcher, tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [studio("s1"), "{"])
    out = io.StringIO()

    call_command("import_questions", str(path), "--user", "rita", stdout=out)

    summary = json.loads(out.getvalue())
    assert (summary["created"], summary["unchanged"], summary["conflicts"], summary["failed"]) == (1, 0, 0, 1)
    assert summary["failed_lines"][0]["line"] == 2
    assert Question.objects.get().source_document_id == summary["source_document"]
    assert Question.objects.get().edits.get().user == researcher


@pytest.mark.django_db(transaction=True)
def test_it_imports_with_several_threads_and_the_same_outcome(tmp_path, django_user_model):
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [*iter_questions(SCALE, 0), "not json", reference("bad-subject", subject="music-g9"), reference("r-ok")],
    )
    report = import_questions_file(path=path, user=None, workers=3)
    assert (report.created, report.failed, report.unchanged) == (11, 2, 0)
    assert sorted(row["line"] for row in report.failed_lines) == [11, 12]
    again = import_questions_file(path=path, user=None, workers=3)
    assert (again.created, again.unchanged, again.failed) == (0, 11, 2)
    assert Question.objects.count() == 11


# --- hostile lines (issue 10, finding 7) -------------------------------------------------


def hostile_file(tmp_path):
    """Good lines around lines that used to fail the whole job: a NUL, an unpaired
    surrogate, JSON nested 100,000 deep, and bytes that are not UTF-8."""
    path = tmp_path / "hostile.jsonl"
    with open(path, "wb") as out:
        out.write(json.dumps(studio("good1")).encode() + b"\n")
        out.write(json.dumps(studio("nul", text="电阻\u0000为___欧。")).encode() + b"\n")  # written as \u0000
        out.write(json.dumps(studio("half-pair")).replace("\\u7535", "\\ud835\\u7535").encode() + b"\n")
        out.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        out.write(json.dumps(studio("latin1")).replace("\\u7535\\u963b", "caf\xe9").encode("latin-1") + b"\n")
        out.write(json.dumps(studio("good2")).encode() + b"\n")
    return path


def test_one_hostile_line_is_reported_and_the_job_finishes_with_the_report(researcher, tmp_path):
    document = register_upload(path=hostile_file(tmp_path), user=researcher)
    job = start(document, researcher)

    assert execute_job(job.pk) == Job.Status.SUCCEEDED

    job.refresh_from_db()
    reasons = {entry["line"]: entry["reason"] for entry in job.result["failed_lines"]}
    assert (job.result["created"], job.result["failed"]) == (2, 4)
    assert set(Question.objects.values_list("hash_id", flat=True)) == {"good1", "good2"}
    assert "NUL" in reasons[2] and reasons[2].startswith("text:")
    assert "unpaired surrogate" in reasons[3]
    assert reasons[4] == "nested deeper than 64 levels"
    assert reasons[5].startswith("not valid UTF-8")


def test_a_line_nested_a_little_too_deep_is_refused_before_anything_recurses(researcher, tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [studio("deep", source_detail=[[[[[[[[[[[]]]]]]]]]]] * 1) | {
        "extra": json.loads("[" * 70 + "]" * 70)}])  # fmt: skip
    report = import_questions_file(path=path, user=researcher)
    assert report.failed == 1 and report.failed_lines[0]["reason"] == "nested deeper than 64 levels"


@needs(bool(shutil.which("node")), "the KaTeX check needs Node.js")
def test_a_katex_message_about_math_italic_letters_is_stored_as_valid_text(researcher, tmp_path):
    """KaTeX cuts its excerpt at a UTF-16 index: with 𝑥 (U+1D465, two UTF-16 units) the
    message held half a surrogate pair, and the flag's insert failed (PostgreSQL above all)."""
    from annotation.models import Flag

    text = "电阻为___欧，$\\foo " + "𝑥" * 20 + "$"
    report = import_questions_file(path=write_lines(tmp_path / "q.jsonl", [studio("italic", text=text)]),
                                   user=researcher)  # fmt: skip
    assert report.created == 1
    flag = Flag.objects.get(question__hash_id="italic", code=Flag.Code.LATEX_ERROR)
    flag.message.encode("utf-8")  # raises on a lone surrogate
    assert "Undefined control sequence: \\foo at character 1" in flag.message


def test_a_value_longer_than_its_column_is_reported_and_the_rest_goes_on(researcher, tmp_path):
    # services.validate checks the column's length on every database, before PostgreSQL would refuse it.
    path = write_lines(tmp_path / "q.jsonl", [studio("good1"), studio("long", source="试" * 400), studio("good2")])
    report = import_questions_file(path=path, user=researcher)
    assert (report.created, report.failed) == (2, 1)
    assert report.failed_lines[0]["line"] == 2 and "300" in report.failed_lines[0]["reason"]


# --- the bulk path (issue 15): a pool of processes, batches, the same report -------------------


@pytest.mark.django_db(transaction=True)
def test_a_pool_of_processes_prepares_a_zip_with_the_same_outcome_as_one_process(tmp_path, monkeypatch, settings):
    from annotation import jsonl_bulk
    from annotation.models import Flag

    monkeypatch.setattr(jsonl_bulk, "POOL_MIN_LINES", 0)
    monkeypatch.setattr(jsonl_bulk, "CHUNK_LINES", 3)
    monkeypatch.setattr(jsonl_bulk, "WRITE_BATCH", 4)
    records = [studio(f"z{i}", figures=[{"path": "images/a.png"}], text=f"第{i}题 $\\frac{{1}}{{{i}}}$ ___")
               for i in range(9)]  # fmt: skip
    records[4]["text"] = "电阻为___欧 $\\foo$"
    path = studio_zip(tmp_path / "q.zip", records, {"images/a.png": image_bytes("PNG")})
    report = import_questions_file(path=path, user=None, workers=2)
    assert (report.created, report.failed) == (9, 0)
    assert Figure.objects.count() == 9 and all(Path(f.image.path).is_file() for f in Figure.objects.all())
    assert Question.objects.get(hash_id="z4").flags.filter(code=Flag.Code.LATEX_ERROR).count() == 1
    assert not Flag.objects.filter(code=Flag.Code.LATEX_ERROR).exclude(question__hash_id="z4").exists()
    assert Question.objects.get(hash_id="z3").knowledge_points.get().name == "欧姆定律"
    assert Question.objects.get(hash_id="z3").edits.get().note == "imported from JSONL"
    again = import_questions_file(path=path, user=None, workers=2)
    assert (again.created, again.unchanged) == (0, 9)
    assert len(list((Path(settings.MEDIA_ROOT) / "figures").rglob("*.png"))) == 9


@pytest.mark.django_db(transaction=True)
def test_a_pool_that_prepared_every_line_is_closed_and_joined_not_terminated(tmp_path, monkeypatch):
    """Terminating the processes right after close() could leave one blocked on the task queue's
    lock, and the import waiting for it for ever; the pool is terminated only on an error."""
    import billiard.pool

    from annotation import jsonl_bulk

    monkeypatch.setattr(jsonl_bulk, "POOL_MIN_LINES", 0)
    terminated = []
    real = billiard.pool.Pool.terminate
    monkeypatch.setattr(billiard.pool.Pool, "terminate", lambda pool: terminated.append(pool) or real(pool))
    path = write_lines(tmp_path / "q.jsonl", [studio(f"p{i}") for i in range(5)])
    assert import_questions_file(path=path, user=None, workers=2).created == 5
    assert terminated == []

    with import_files.open_source(path) as source:  # a reader that stops early: the rest is not worth finishing
        lines = jsonl_bulk.prepared_lines(source, path=path, workers=2, total=5)
        next(lines)
        lines.close()
    assert len(terminated) == 1


def test_a_hash_id_twice_in_one_batch_is_created_once_then_unchanged_or_a_conflict(researcher, tmp_path):
    lines = [studio("d1"), studio("d2"), studio("d1"), studio("d2", text="改了___"), studio("d3")]
    report = import_questions_file(path=write_lines(tmp_path / "d.jsonl", lines), user=researcher)
    assert (report.created, report.unchanged, report.conflicts) == (3, 1, 1)
    assert report.conflict_lines == [
        {
            "line": 4,
            "hash_id": "d2",
            "fields": ["text"],
            "reason": mock.ANY,
            "reason_code": "question_conflict",
            "reason_params": {"fields": "text"},
        }
    ]
    assert Question.objects.get(hash_id="d2").text == "电阻为___欧。"
    assert Figure.objects.count() == 3  # the repeated lines' figures were not kept
    assert len(list(Path(Figure.objects.first().image.path).parent.iterdir())) == 3


def test_a_batch_the_database_refuses_is_written_line_by_line(researcher, tmp_path, monkeypatch):
    from annotation import jsonl_bulk

    real = jsonl_bulk.write_questions

    def refuse_batches(batch, **kwargs):
        if len(batch) > 1:
            raise jsonl_bulk.DataError("a batch refused")
        if batch[0].hash_id == "b2":
            raise jsonl_bulk.DataError("value too long")
        return real(batch, **kwargs)

    monkeypatch.setattr(jsonl_bulk, "write_questions", refuse_batches)
    path = write_lines(tmp_path / "b.jsonl", [studio("b1"), studio("b2"), studio("b3")])
    report = import_questions_file(path=path, user=researcher)
    assert (report.created, report.failed) == (2, 1)
    assert report.failed_lines == [
        {
            "line": 2,
            "hash_id": "b2",
            "reason": "the database refused the line: value too long",
            "reason_code": "database_refused",
            "reason_params": {"error": "value too long"},
        }
    ]
    assert set(Question.objects.values_list("hash_id", flat=True)) == {"b1", "b3"}
    assert Figure.objects.count() == 2


def test_a_type_error_names_its_field_once_in_chinese():
    from django.utils import translation

    with translation.override("zh-hans"), pytest.raises(RecordError) as refused:
        question_type(5)
    assert str(refused.value).count("type") == 1, str(refused.value)


def test_the_upload_check_sniffs_a_published_set_without_parsing_it_whole():
    import io
    import json as jsonlib

    from annotation.uploads import check_import_file
    from k12vista.import_files import SNIFF_BYTES

    class Counting(io.BytesIO):
        read_bytes = 0

        def read(self, size=-1):
            chunk = super().read(size)
            self.read_bytes += len(chunk)
            return chunk

        def readline(self, size=-1):
            chunk = super().readline(size)
            self.read_bytes += len(chunk)
            return chunk

    record = {"year": "2010", "question": "题" * 200, "answer": ["A"], "index": 0}
    wrapper = {"keywords": "2010-2022_Math_I_MCQs", "example": [record] * 3000}
    content = jsonlib.dumps(wrapper, ensure_ascii=False, indent=4).encode()
    assert len(content) > 4 * SNIFF_BYTES
    handle = Counting(content)
    assert check_import_file(handle, size=len(content)) == "jsonl"
    # The kind, the first line and the head: the job reads it whole, not the web request.
    assert handle.read_bytes <= 2 * SNIFF_BYTES + 1024
    with pytest.raises(ImportFileError):  # a JSON document that is no published set is still refused
        check_import_file(Counting(b'{\n"a": 1,\n' + b" " * SNIFF_BYTES + b"}"), size=SNIFF_BYTES)
