import json
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from bench.generate import counts_for_scale, iter_pebench
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from k12vista.vocabulary import label_from_name
from pem import jobs
from pem.models import ChainOfThought, LabellingTask, Step, StepLabel
from pem.pebench_import import import_records
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.pem_factories import label_steps

SCALE = 0.001  # three PEBench records


@pytest.fixture(autouse=True)
def _english(english):
    """Line reasons are written in the team's language; these tests read them in English."""


pytestmark = pytest.mark.usefixtures("tmp_media")


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as out:
        for line in lines:
            out.write((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n")
    return path


def reference(hash_id="p1", labels=None, **fields):
    labels = labels or [["由图可知 $AB=4$。", "CS", ""], ["所以 $AC=7$。", "CE", "应为 5。"]]
    record = {
        "hash_id": hash_id,
        "question": "如图，求 $AC$。",
        "format_solution": "步骤1：由图可知 $AB=4$。\n步骤2：$AC=5$。",
        "ground_truth": ["$5$"],
        "student_infer": "\n\n".join(step[0] for step in labels),
        "step_labels": labels,
    }
    return record | fields


def imported_labels(cot):
    rows = StepLabel.objects.filter(step__cot=cot, source=StepLabel.Source.IMPORTED).order_by("step__position", "rater")
    return [(row.step.position, row.rater, row.label, row.explanation) for row in rows]


# --- the reference format -------------------------------------------------------------------


@pytest.mark.django_db
def test_it_imports_what_the_benchmark_generator_writes(tmp_path):
    records = list(iter_pebench(SCALE, seed=3))
    path = write_lines(tmp_path / "pebench.jsonl", records)
    report = import_records(path=path)
    assert report.as_dict() | {"conflict_lines": [], "failed_lines": []} == report.as_dict()
    assert (report.created, report.failed) == (counts_for_scale(SCALE)["pebench"], 0)
    for record in records:
        cot = ChainOfThought.objects.get(key=record["hash_id"])
        assert cot.origin == ChainOfThought.Origin.IMPORTED and cot.step_source == ChainOfThought.StepSource.IMPORT
        assert (
            cot.response_text == record["student_infer"] and cot.reference_answer.splitlines() == record["ground_truth"]
        )
        assert list(cot.steps.values_list("text", flat=True)) == [step[0] for step in record["step_labels"]]
        expected = [(n, "pebench.jsonl", step[1], step[2]) for n, step in enumerate(record["step_labels"], 1)]
        assert imported_labels(cot) == expected


@pytest.mark.django_db
def test_it_changes_nothing_when_the_same_file_comes_again(tmp_path):
    path = write_lines(tmp_path / "a.jsonl", list(iter_pebench(SCALE, seed=3)))
    import_records(path=path)
    before = (Step.objects.count(), list(StepLabel.objects.values_list("pk", "label", "explanation")))
    report = import_records(path=path)
    assert (report.created, report.unchanged, report.updated, report.conflicts) == (0, 3, 0, 0)
    assert (Step.objects.count(), list(StepLabel.objects.values_list("pk", "label", "explanation"))) == before


@pytest.mark.django_db
def test_it_updates_a_changed_chain_nobody_has_labelled(tmp_path):
    import_records(path=write_lines(tmp_path / "a.jsonl", [reference()]), name="team")
    changed = reference(labels=[["由图可知 $AB=4$。", "CS", ""], ["故 $AC=5$。", "CS", ""], ["选 B。", "CS", ""]])
    report = import_records(path=write_lines(tmp_path / "a.jsonl", [changed]), name="team")
    cot = ChainOfThought.objects.get(key="p1")
    assert report.updated == 1
    assert list(cot.steps.values_list("text", flat=True)) == ["由图可知 $AB=4$。", "故 $AC=5$。", "选 B。"]
    assert [label for _, _, label, _ in imported_labels(cot)] == ["CS", "CS", "CS"]


@pytest.mark.django_db
def test_it_reports_a_conflict_once_a_person_has_labelled_and_changes_nothing(tmp_path, annotator):
    import_records(path=write_lines(tmp_path / "a.jsonl", [reference()]), name="team")
    cot = ChainOfThought.objects.get(key="p1")
    label_steps(cot, ["CS", "KAE"], rater="alice", user=annotator)
    changed = reference(labels=[["由图可知 $AB=4$。", "CS", ""], ["故 $AC=5$。", "CS", ""]])
    report = import_records(path=write_lines(tmp_path / "a.jsonl", [changed]), name="team")
    assert report.conflicts == 1 and report.updated == 0
    assert report.conflict_lines[0]["line"] == 1 and "steps" in report.conflict_lines[0]["reason"]
    assert list(cot.steps.values_list("text", flat=True)) == ["由图可知 $AB=4$。", "所以 $AC=7$。"]
    assert StepLabel.objects.filter(step__cot=cot, source=StepLabel.Source.PERSON).count() == 2


@pytest.mark.django_db
def test_it_treats_a_saved_labelling_draft_as_person_work(tmp_path, annotator):
    import_records(path=write_lines(tmp_path / "a.jsonl", [reference()]), name="team")
    cot = ChainOfThought.objects.get(key="p1")
    LabellingTask.objects.create(cot=cot, annotator=annotator, draft={"1": {"label": "CS", "reason": ""}})
    report = import_records(path=write_lines(tmp_path / "a.jsonl", [reference(question="改过的题目")]), name="team")
    assert report.conflicts == 1
    assert ChainOfThought.objects.get(key="p1").question_text == "如图，求 $AC$。"


@pytest.mark.django_db
def test_it_adds_another_imports_labels_beside_people_labels(tmp_path, annotator):
    import_records(path=write_lines(tmp_path / "a.jsonl", [reference()]), name="team")
    cot = ChainOfThought.objects.get(key="p1")
    label_steps(cot, ["CS", "KAE"], rater="alice", user=annotator)
    report = import_records(path=write_lines(tmp_path / "a.jsonl", [reference()]), name="second opinion")
    assert report.updated == 1
    assert {rater for _, rater, _, _ in imported_labels(cot)} == {"team", "second opinion"}


@pytest.mark.parametrize(
    "written",
    ["CE", " ce ", "ＣＥ", "Calculation error", "calculation_error", "  CALCULATION   ERROR", "运算处理错误",
     " 运算处理错误　", "运算 处理错误", "ＣＡＬＣＵＬＡＴＩＯＮ　ＥＲＲＯＲ"],
)  # fmt: skip
def test_it_reads_labels_in_chinese_or_english_with_stray_or_full_width_characters(written):
    assert label_from_name(written).code == "CE"


@pytest.mark.parametrize("written", ["CE?", "计算错误", "error", "", "C E"])
def test_it_does_not_guess_an_unknown_label(written):
    with pytest.raises(ValueError, match="unknown step label"):
        label_from_name(written)


@pytest.mark.django_db
def test_it_reports_bad_lines_by_number_and_keeps_the_good_ones(tmp_path):
    lines = [
        reference("good", labels=[["第一步。", "步骤正确", ""], ["第二步。", " Calculation error ", "算错了"]]),
        reference("bad-label", labels=[["第一步。", "计算错误", "x"]]),
        "{not json",
        reference("short", labels=[["第一步。"]]),
        reference("long", labels=[["第一步。", "CS", "", "extra"]]),
        reference("empty", labels=[]) | {"step_labels": []},
        [1, 2],
        reference("no-text", labels=[["  ", "CS", ""]]),
        "",
    ]
    report = import_records(path=write_lines(tmp_path / "mixed.jsonl", lines))
    assert report.created == 1 and report.failed == 7
    reasons = {row["line"]: row["reason"] for row in report.failed_lines}
    assert reasons[2] == "step_labels[0][1]: unknown step label '计算错误' (expected one of the nine codes or names)"
    assert reasons[3].startswith("not valid JSON")
    assert reasons[4] == "step_labels[0]: expected [step, label, explanation], got 1 elements"
    assert reasons[5] == "step_labels[0]: expected [step, label, explanation], got 4 elements"
    assert reasons[6].startswith("step_labels: expected a non-empty list")
    assert reasons[7] == "line: expected a JSON object"
    assert reasons[8] == "step_labels[0][0]: expected text"
    assert [label for _, _, label, _ in imported_labels(ChainOfThought.objects.get(key="good"))] == ["CS", "CE"]
    assert not ChainOfThought.objects.filter(key="bad-label").exists()


@pytest.mark.django_db
def test_it_reads_two_element_entries_with_an_empty_explanation_and_warns(tmp_path):
    record = reference(labels=[["第一步。", "CS"], ["第二步。", "CE", "算错了"]])
    report = import_records(path=write_lines(tmp_path / "two.jsonl", [record]), name="team")
    assert report.created == 1 and report.warnings == 1
    assert report.warning_lines[0]["line"] == 1 and report.warning_lines[0]["reason"].startswith("step_labels[0]:")
    assert imported_labels(ChainOfThought.objects.get(key="p1")) == [(1, "team", "CS", ""), (2, "team", "CE", "算错了")]


@pytest.mark.django_db
def test_it_refuses_a_key_used_twice_in_one_file_for_different_chains(tmp_path):
    first, second = reference("same"), reference("same", student_infer="另一个模型的回答")
    report = import_records(path=write_lines(tmp_path / "dup.jsonl", [first, first, second]))
    assert (report.created, report.unchanged, report.failed) == (1, 1, 1)
    assert report.failed_lines[0]["line"] == 3 and "already used on line 1" in report.failed_lines[0]["reason"]


@pytest.mark.django_db
def test_it_links_the_bank_question_and_takes_its_metadata(tmp_path):
    question = make_question(subject="physics", grade=11, qtype="fill_in_blank")
    report = import_records(path=write_lines(tmp_path / "a.jsonl", [reference(question.hash_id)]))
    cot = ChainOfThought.objects.get(key=question.hash_id)
    assert report.created == 1 and cot.question == question
    assert (cot.subject, cot.grade, cot.stage, cot.qtype) == ("physics", 11, "high", "fill_in_blank")


@pytest.mark.django_db
def test_it_reads_subject_and_type_given_on_a_reference_line(tmp_path):
    record = reference("tagged", subject="chemistry-g9", type="问答题", model="qwen2.5-vl")
    import_records(path=write_lines(tmp_path / "a.jsonl", [record]))
    cot = ChainOfThought.objects.get(key="tagged")
    assert (cot.subject, cot.stage, cot.qtype, cot.model_name) == ("chemistry", "middle", "free_response", "qwen2.5-vl")


# --- our format ---------------------------------------------------------------------------


def studio(key="s1", **fields):
    record = {
        "key": key,
        "hash_id": "q-1",
        "model": "gpt-4o",
        "subject": "biology",
        "grade": 8,
        "type": "multiple_choice",
        "question_text": "下列说法正确的是",
        "reference_solution": "步骤1：…",
        "reference_answer": ["A"],
        "response": "第一步。\n\n第二步。",
        "steps": [
            {"text": "第一步。", "label": "CS", "explanation": "", "labels": [
                {"source": "person", "rater": "alice", "label": "CS", "explanation": ""},
                {"source": "model", "rater": "judge-72b", "label": "HE", "explanation": "编造"}]},
            {"text": "第二步。", "label": "IAE", "explanation": "缺第二问"},
        ],
    }  # fmt: skip
    return record | fields


@pytest.mark.django_db
def test_it_imports_our_format_with_every_label(tmp_path):
    report = import_records(path=write_lines(tmp_path / "ours.jsonl", [studio()]), name="other studio")
    cot = ChainOfThought.objects.get(key="s1")
    assert report.created == 1
    assert (cot.subject, cot.grade, cot.stage, cot.qtype, cot.model_name) == (
        "biology", 8, "middle", "multiple_choice", "gpt-4o")  # fmt: skip
    assert imported_labels(cot) == [
        (1, "other studio", "CS", ""),
        (1, "other studio · model:judge-72b", "HE", "编造"),
        (1, "other studio · person:alice", "CS", ""),
        (2, "other studio", "IAE", "缺第二问"),
    ]


@pytest.mark.django_db
def test_it_reports_bad_fields_of_our_format(tmp_path):
    lines = [
        studio("a", grade=13),
        studio("b", subject="music"),
        studio("c", steps=[{"text": "x", "label": "XYZ"}]),
        studio("d", steps=[{"text": "x", "labels": [{"source": "person", "rater": "amy", "label": "??"}]}]),
        studio("e", steps=[]),
        studio("f", stage="high"),
    ]
    report = import_records(path=write_lines(tmp_path / "ours.jsonl", lines))
    reasons = [row["reason"].split(":")[0] for row in report.failed_lines]
    assert reasons == ["grade", "subject", "steps[0].label", "steps[0].labels[0].label", "steps", "stage"]


@pytest.mark.django_db
def test_it_never_clears_the_training_data_flag(tmp_path):
    import_records(path=write_lines(tmp_path / "ours.jsonl", [studio(in_training_data=True)]))
    import_records(path=write_lines(tmp_path / "ours.jsonl", [studio(in_training_data=False)]))
    assert ChainOfThought.objects.get(key="s1").in_training_data


# --- the job, the command and the screen ---------------------------------------------------------


@pytest.mark.django_db
def test_it_imports_as_a_job_with_per_line_errors(researcher, tmp_path):
    path = write_lines(tmp_path / "upload.jsonl", [reference("ok"), reference("bad", labels=[["x", "wrong", ""]])])
    upload = SimpleUploadedFile("upload.jsonl", path.read_bytes())
    job = jobs.start_import(stored_name=jobs.store_upload(upload), name="upload.jsonl", user=researcher)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert (job.result["created"], job.result["failed"]) == (1, 1)
    assert job.result["failed_lines"] == [
        {"line": 2, "key": "bad", "reason": "step_labels[0][1]: unknown step label 'wrong' (expected one of the "
         "nine codes or names)", "reason_code": "field", "reason_params": {"field": "step_labels[0][1]",
         "message": {"code": "unknown_step_label", "params": {"value": "'wrong'"}}}}]  # fmt: skip
    assert execute_job(job.pk) == "not-claimed"


@pytest.mark.django_db
def test_it_prints_a_json_summary_from_the_command(tmp_path, capsys):
    path = write_lines(tmp_path / "cmd.jsonl", list(iter_pebench(SCALE, seed=1)))
    call_command("import_pebench", str(path), "--name", "release-2025")
    summary = json.loads(capsys.readouterr().out)
    assert summary["created"] == 3 and summary["failed"] == 0
    assert set(StepLabel.objects.values_list("rater", flat=True)) == {"release-2025"}


def test_it_refuses_a_missing_file_from_the_command(tmp_path):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="no file"):
        call_command("import_pebench", str(tmp_path / "missing.jsonl"))


@pytest.fixture
def sent():
    """Jobs are started but never sent to a broker."""
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


@pytest.mark.django_db
def test_it_shows_an_uploaded_files_per_line_errors(researcher, login, sent, tmp_path):
    client = login(researcher)
    path = write_lines(tmp_path / "up.jsonl", [reference("ok"), reference("bad", labels=[["x", "CS", "", "y"]])])
    with open(path, "rb") as handle:
        response = client.post("/pem/data/import/", {"file": handle, "name": ""})
    job = Job.objects.get(kind=jobs.IMPORT)
    assert response.status_code == 302 and response["Location"] == f"/pem/data/imports/{job.pk}/"
    assert job.params["name"] == "up.jsonl" and job.started_by == researcher
    polling = client.get(f"/pem/data/imports/{job.pk}/", headers={"HX-Request": "true"})
    assert polling.status_code == 200 and b"every 1s" in polling.content and b"<html" not in polling.content
    execute_job(job.pk)
    page = client.get(f"/pem/data/imports/{job.pk}/").content.decode()
    assert 'data-line="2"' in page and "got 4 elements" in page and "every 1s" not in page


@pytest.mark.django_db
def test_it_refuses_an_upload_that_is_not_jsonl(researcher, login, sent):
    client = login(researcher)
    upload = SimpleUploadedFile("notes.txt", b"hello")
    response = client.post("/pem/data/import/", {"file": upload}, follow=True)
    assert not Job.objects.exists() and b"neither JSONL" in response.content


@pytest.mark.django_db
def test_it_hides_other_peoples_imports_and_keeps_annotators_out(researcher, annotator, login, sent):
    someone = make_person("rob", Role.RESEARCHER)
    job = jobs.start_import(stored_name="pem-imports/x.jsonl", name="x", user=someone)
    assert login(researcher).get(f"/pem/data/imports/{job.pk}/").status_code == 404
    assert login(annotator).get(f"/pem/data/imports/{job.pk}/").status_code == 403
    assert login(annotator).post("/pem/data/import/").status_code == 403
    assert login(researcher).get("/pem/data/import/").status_code == 405


@pytest.mark.django_db
def test_it_sets_the_training_data_flag_even_on_a_chain_people_labelled(tmp_path, annotator):
    import_records(path=write_lines(tmp_path / "ours.jsonl", [studio()]))
    label_steps(ChainOfThought.objects.get(key="s1"), ["CS", "CS"], user=annotator)
    report = import_records(path=write_lines(tmp_path / "ours.jsonl", [studio(in_training_data=True)]))
    assert report.updated == 1 and ChainOfThought.objects.get(key="s1").in_training_data


# --- hostile lines (issue 10, finding 7) -----------------------------------------------------


@pytest.mark.django_db
def test_one_hostile_line_is_reported_and_the_job_finishes_with_the_report(researcher, tmp_path):
    path = tmp_path / "hostile.jsonl"
    with open(path, "wb") as out:
        out.write(json.dumps(reference("ok")).encode() + b"\n")
        out.write(json.dumps(reference("nul", question="求\u0000 $AC$。")).encode() + b"\n")
        out.write(json.dumps(reference("half")).replace("\\u6c42", "\\udc00").encode() + b"\n")  # 求 -> lone low half
        out.write(b"{" + b'"a":{' * 100_000 + b"}" * 100_001 + b"\n")
        out.write(b'{"hash_id": "latin1", "question": "caf\xe9"}\n')
        out.write(json.dumps(reference("ok2")).encode() + b"\n")
    upload = SimpleUploadedFile("hostile.jsonl", path.read_bytes())
    job = jobs.start_import(stored_name=jobs.store_upload(upload), name="hostile.jsonl", user=researcher)

    assert execute_job(job.pk) == Job.Status.SUCCEEDED

    job.refresh_from_db()
    reasons = {entry["line"]: entry["reason"] for entry in job.result["failed_lines"]}
    assert (job.result["created"], job.result["failed"]) == (2, 4)
    assert set(ChainOfThought.objects.values_list("key", flat=True)) == {"ok", "ok2"}
    assert reasons[2].startswith("question:") and "NUL" in reasons[2]
    assert "unpaired surrogate" in reasons[3]
    assert reasons[4] == "nested deeper than 64 levels"
    assert reasons[5].startswith("not valid UTF-8")


@pytest.mark.django_db
@pytest.mark.skipif(__import__("django.db").db.connection.vendor != "postgresql", reason="SQLite keeps any length")
def test_a_line_the_database_refuses_is_reported_and_the_rest_goes_on(tmp_path):
    path = write_lines(tmp_path / "p.jsonl", [reference("ok"), reference("long", model="m" * 400), reference("ok2")])
    report = import_records(path=path)
    assert (report.created, report.failed) == (2, 1)
    assert report.failed_lines[0]["line"] == 2 and "database refused" in report.failed_lines[0]["reason"]


# --- the bulk path (issue 15) -----------------------------------------------------------------


@pytest.mark.django_db
def test_batches_give_the_same_report_across_their_edges(tmp_path):
    from pem import pebench_import

    lines = [reference("b1"), reference("b2"), "not json", reference("b1"), reference("b3"),
             reference("b2", student_infer="另一个回答"), reference("b4")]  # fmt: skip
    path = write_lines(tmp_path / "b.jsonl", lines)
    report = pebench_import.import_records(path=path, name="team", batch_size=2)
    assert (report.created, report.unchanged, report.failed) == (4, 1, 2)
    assert [(row["line"], row["key"]) for row in report.failed_lines] == [(3, ""), (6, "b2")]
    assert "already used on line 2" in report.failed_lines[1]["reason"]
    assert imported_labels(ChainOfThought.objects.get(key="b4")) == [
        (1, "team", "CS", ""),
        (2, "team", "CE", "应为 5。"),
    ]
    assert list(ChainOfThought.objects.get(key="b3").steps.values_list("position", flat=True)) == [1, 2]
    again = pebench_import.import_records(path=path, name="team", batch_size=3)
    assert (again.created, again.unchanged, again.failed) == (0, 5, 2)


@pytest.mark.django_db
def test_a_batch_the_database_refuses_is_saved_one_chain_at_a_time(tmp_path, monkeypatch):
    from pem import pebench_import

    def refuse(chains, import_name):
        raise pebench_import.DataError("refused")

    monkeypatch.setattr(pebench_import, "write_new", refuse)
    report = import_records(path=write_lines(tmp_path / "b.jsonl", [reference("c1"), reference("c2")]))
    assert (report.created, report.failed) == (2, 0)
    assert ChainOfThought.objects.filter(key__in=["c1", "c2"]).count() == 2
    assert Step.objects.filter(cot__key="c2").count() == 2
