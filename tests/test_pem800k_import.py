"""Importing PEM-800K-style files: per-line errors, idempotence, ~25 chains per question."""

import json
import threading
import zipfile
from contextlib import nullcontext
from functools import partial

import pytest
from django.db import IntegrityError, connection, transaction

from annotation.jsonl_import import import_questions_file
from annotation.models import Question
from bench.generate import iter_pem, iter_questions
from k12vista.vocabulary import LABEL_CODES
from pem import services
from pem.models import ChainOfThought, Step, StepLabel
from pem.training import pem800k_import, reader

pytestmark = pytest.mark.django_db


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_it_keeps_every_chain_of_a_question_and_a_second_import_changes_nothing(tmp_path):
    records = list(iter_pem(0.0001, 3))  # 84 chains over 3 questions
    path = write_jsonl(tmp_path / "pem.jsonl", records)
    first = pem800k_import.import_pem800k(path=path, name="pem800k", batch_size=20)
    assert first["created"] == len(records) and first["failed"] == 0
    per_question = {r["hash_id"] for r in records}
    assert ChainOfThought.objects.count() == len(records)
    assert len(per_question) < len(records) / 20  # many chains share one question's hash_id
    assert Step.objects.count() == sum(len(r["step_labels"]) for r in records)
    assert StepLabel.objects.filter(source=StepLabel.Source.IMPORTED, rater="pem800k").count() == Step.objects.count()
    second = pem800k_import.import_pem800k(path=path, name="pem800k")
    assert second["created"] == 0 and second["unchanged"] == len(records)
    assert ChainOfThought.objects.count() == len(records)


def test_it_reports_bad_lines_and_imports_the_rest(tmp_path):
    good = list(iter_pem(0.00002, 1))
    bad_label = {**good[0], "step_labels": [["步骤", "XYZ", ""]]}
    lines = [json.dumps(good[0]), "{not json", json.dumps([1]), json.dumps(bad_label), json.dumps(good[1])]
    path = tmp_path / "pem.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = pem800k_import.import_pem800k(path=path)
    assert report["created"] == 2 and report["failed"] == 3
    assert [row["line"] for row in report["failed_lines"]] == [2, 3, 4]
    assert "XYZ" in report["failed_lines"][2]["reason"]


def test_it_links_chains_to_the_bank_and_keeps_the_snapshot_otherwise(tmp_path, researcher):
    question_record = next(iter(iter_questions(0.0001, 3)))
    write_jsonl(tmp_path / "q.jsonl", [question_record])
    import_questions_file(path=tmp_path / "q.jsonl", user=researcher)
    question = Question.objects.get()
    records = list(iter_pem(0.0001, 3))[:30]
    report = pem800k_import.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", records))
    linked = ChainOfThought.objects.filter(question=question)
    assert linked.exists() and {c.subject for c in linked} == {question.subject}
    assert report["questions_missing"] == ChainOfThought.objects.filter(question__isnull=True).count()
    orphan = ChainOfThought.objects.filter(question__isnull=True).first()
    if orphan is not None:
        assert orphan.question_text and orphan.reference_answer


def test_a_chain_another_import_wrote_meanwhile_is_counted_unchanged(tmp_path, monkeypatch):
    # The batch's write meets the other import's chain (a unique key): the batch is redone one
    # record at a time, so the chain is neither duplicated nor lost, and the rest is created.
    records = list(iter_pem(0.0001, 3))[:5]
    pem800k_import.import_pem800k(path=write_jsonl(tmp_path / "one.jsonl", records[:1]), name="other")
    monkeypatch.setattr(pem800k_import, "_stored_keys", lambda keys: set())  # not there yet when we looked
    report = pem800k_import.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", records), name="pem")
    assert (report["created"], report["unchanged"], report["failed"]) == (4, 1, 0)
    assert ChainOfThought.objects.count() == 5
    assert Step.objects.count() == sum(len(r["step_labels"]) for r in records)


def test_it_forgives_labels_given_by_name_as_the_pebench_import_does(tmp_path):
    record = next(iter(iter_pem(0.00002, 1)))
    loose = {**record, "step_labels": [[text, f" {label.lower()} ", why] for text, label, why in record["step_labels"]]}
    report = pem800k_import.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", [loose]), name="pem")
    assert report["created"] == 1
    labels = StepLabel.objects.order_by("step__position").values_list("label", flat=True)
    assert list(labels) == [label for _, label, _ in record["step_labels"]]


def test_reading_ahead_keeps_order_and_raises_the_readers_error_in_turn():
    def batches():
        yield "first"
        yield "second"
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        got.extend(pem800k_import._read_ahead(batches()))
    assert got == ["first", "second"]


def test_a_consumer_that_stops_early_stops_the_reader(tmp_path):
    import threading

    closed = threading.Event()

    def batches():
        try:
            yield from range(1000)
        finally:
            closed.set()

    reader = pem800k_import._read_ahead(batches(), depth=1)
    assert next(reader) == 0
    reader.close()  # the import failed while writing: the reader thread must not stay behind
    assert closed.wait(5)
    assert not any(t.name == "pem800k-reader" for t in threading.enumerate())


def test_hostile_values_fail_their_line_alone_and_the_rest_is_imported(tmp_path, english):
    good = list(iter_pem(0.00002, 1))[:3]
    (text, label, why), *_ = good[0]["step_labels"]
    lines = [
        json.dumps(good[0]),
        json.dumps({**good[1], "step_labels": [[text, [label], why]]}),  # an unhashable label
        json.dumps({**good[1], "step_labels": [{"step": text}]}),
        json.dumps({**good[1], "question": "\ud800 半个代理对"}),  # no database can store it
        json.dumps({**good[2], "score": 1e-05}),  # a float: imported, keyed as before
    ]
    path = tmp_path / "pem.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = pem800k_import.import_pem800k(path=path)
    assert report["created"] == 2 and report["failed"] == 3
    assert [row["line"] for row in report["failed_lines"]] == [2, 3, 4]
    assert "surrogate" in report["failed_lines"][2]["reason"]


@pytest.mark.parametrize(
    "record",
    [
        {"hash_id": "h", "b": '步骤 \u2028 \x7f \x00\x1f "\\/ 😀', "a": [1, -2, 2**63 - 1, None, {"z": [], "é": {}}]},
        {"hash_id": "h", "score": 1e-05, "big": 2**70, "small": -7.185e-09, "x": 0.5},
    ],
)
def test_the_content_key_is_made_from_the_same_canonical_json_as_before(record):
    """orjson writes keys for text and whole numbers; floats and big integers go through json.dumps:
    every chain imported before keeps its key, so a second import of its file changes nothing."""
    before = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    line = json.dumps(record).encode()
    assert pem800k_import.canonical_json(json.loads(line, parse_float=pem800k_import._Float)) == before


postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="the COPY path is PostgreSQL's")


def table_rows():
    chains = list(ChainOfThought.objects.order_by("key").values_list("key", "question_id", "response_text"))
    steps = list(Step.objects.order_by("cot__key", "position").values_list("cot__key", "position", "text"))
    labels = list(StepLabel.objects.order_by("step__cot__key", "step__position")
                  .values_list("step__cot__key", "step__position", "label", "explanation", "rater"))  # fmt: skip
    return chains, steps, labels


@postgresql
def test_checking_foreign_keys_per_batch_writes_what_checking_per_row_writes(tmp_path, monkeypatch, researcher):
    if not pem800k_import.may_skip_row_checks():
        pytest.skip("the test database's role may not set session_replication_role")
    question_record = next(iter(iter_questions(0.0001, 3)))
    import_questions_file(path=write_jsonl(tmp_path / "q.jsonl", [question_record]), user=researcher)
    path = write_jsonl(tmp_path / "pem.jsonl", list(iter_pem(0.0001, 3))[:40])
    fast = pem800k_import.import_pem800k(path=path, name="pem800k", batch_size=15)
    written = table_rows()
    assert any(question for _, question, _ in written[0])  # some chains are linked to the bank
    ChainOfThought.objects.all().delete()
    monkeypatch.setattr(pem800k_import, "may_skip_row_checks", lambda: False)
    slow = pem800k_import.import_pem800k(path=path, name="pem800k", batch_size=15)
    assert fast == slow and table_rows() == written
    # The caller's transaction (the test's) has its triggers back: a dangling step is refused.
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('session_replication_role')")
        assert cursor.fetchone()[0] == "origin"
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with pytest.raises(IntegrityError), transaction.atomic():
        Step.objects.create(cot_id=10**9, position=1, text="悬空")


@postgresql
def test_a_question_deleted_after_it_was_looked_up_leaves_its_chains_unlinked(tmp_path, monkeypatch, researcher):
    if not pem800k_import.may_skip_row_checks():
        pytest.skip("the test database's role may not set session_replication_role")
    question_record = next(iter(iter_questions(0.0001, 3)))
    import_questions_file(path=write_jsonl(tmp_path / "q.jsonl", [question_record]), user=researcher)
    looked_up = services.fill_from_bank

    def then_deleted(chains):
        missing = looked_up(chains)
        Question.objects.all().delete()  # between the lookup and the write
        return missing

    monkeypatch.setattr(services, "fill_from_bank", then_deleted)
    records = [r for r in iter_pem(0.0001, 3) if r["hash_id"] == question_record["hash_id"]][:5]
    report = pem800k_import.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", records))
    assert report["created"] == 5
    assert not ChainOfThought.objects.filter(question__isnull=False).exists()
    assert all(c.question_text for c in ChainOfThought.objects.all())  # the snapshot is kept


# --- the reader process (pem.training.reader, PostgreSQL) ---------------------------------------


def odd_texts(record):
    """The record with the characters COPY's text format escapes in its step texts and reasons."""
    (text, label, why), *rest = record["step_labels"]
    return {**record, "step_labels": [[f"{text}\t制表\\N 反斜杠\\\r\n换行", label, f"{why}\\t\t"], *rest]}


def test_the_reader_process_keys_and_reads_a_line_as_the_importer_does():
    records = list(iter_pem(0.0001, 4))[:20]
    lines = (
        [json.dumps(r, ensure_ascii=False).encode() for r in records]
        + [
            json.dumps(odd_texts(records[0])).encode(),  # escaped non-ASCII and control characters
            b'{"hash_id": "h", "question": "x", "question": "y", ' + json.dumps(records[1])[1:].encode(),  # a key twice
        ]
    )
    codes = frozenset(LABEL_CODES)
    for line in lines:
        key, found = reader.read_line(line, codes)
        data = pem800k_import.parse_line(line)
        assert key == data.key
        assert [text for text, _, _ in found.steps] == data.steps
        assert [[(label, why)] for _, label, why in found.steps] == [
            [(label.label, label.explanation) for label in step] for step in data.labels
        ]
    # Any other shape, and whatever the reader process cannot read, is left to the importer.
    others = [
        {**records[2], "score": 1e-05}, {**records[2], "subject": "数学"}, {**records[2], "question": "\ud800"},
        {**records[2], "question": "\x00"},
    ]  # fmt: skip
    for line in [*(json.dumps(r).encode() for r in others), b"\xef\xbb\xbf" + lines[0], b"not json", b"[1, 2]"]:
        assert reader.read_line(line, codes) is None


@postgresql
def test_the_reader_process_writes_what_the_importer_alone_writes(tmp_path, monkeypatch, researcher):
    question_record = next(iter(iter_questions(0.0001, 3)))
    import_questions_file(path=write_jsonl(tmp_path / "q.jsonl", [question_record]), user=researcher)
    records = list(iter_pem(0.0001, 3))[:30]
    by_name = {**records[3], "step_labels": [[text, "运算处理错误", why] for text, _, why in records[3]["step_labels"]]}
    lines = [*records[:10], odd_texts(records[10]), by_name, records[0], *records[11:]]
    path = write_jsonl(tmp_path / "pem.jsonl", lines)
    with path.open("a") as handle:
        handle.write("not json\n\n" + json.dumps({**records[12], "step_labels": []}) + "\n")
    via_reader = pem800k_import.import_pem800k(path=path, name="pem800k", batch_size=7)
    written = table_rows()
    assert via_reader["created"] == 31 and via_reader["unchanged"] == 1 and via_reader["failed"] == 2
    assert any(question for _, question, _ in written[0])  # linked to the bank
    assert any("\t制表\\N 反斜杠\\\r\n换行" in text for _, _, text in written[1])
    ChainOfThought.objects.all().delete()
    monkeypatch.setattr(pem800k_import, "_reader_process", lambda *args: nullcontext(None))  # read in this process
    alone = pem800k_import.import_pem800k(path=path, name="pem800k", batch_size=7)
    assert via_reader == alone and table_rows() == written


@postgresql
def test_a_zip_is_read_by_the_reader_process_too(tmp_path):
    records = list(iter_pem(0.0001, 3))[:5]
    path = tmp_path / "pem.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pem.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    report = pem800k_import.import_pem800k(path=path, name="pem800k")
    assert report["created"] == 5 and Step.objects.count() == sum(len(r["step_labels"]) for r in records)


@postgresql
def test_a_clash_with_a_chain_written_since_the_reader_looked_is_looked_up_again(tmp_path, monkeypatch):
    records = list(iter_pem(0.0001, 3))[:4]
    pem800k_import.import_pem800k(path=write_jsonl(tmp_path / "one.jsonl", records[:1]), name="pem")
    chains = [pem800k_import.parse_line(json.dumps(r).encode()) for r in records]
    services.fill_from_bank(chains)
    report = services.ImportReport(created=4)  # as sorted out by the reader process's older view

    def not_one_at_a_time(*args, **kwargs):
        raise AssertionError("the rest is written by COPY, not one chain at a time")

    monkeypatch.setattr(services, "save_chain", not_one_at_a_time)
    rows = partial(pem800k_import._whole_rows, made={}, import_name="pem")
    pem800k_import._save(chains, report, "pem", rows=rows, checks_per_row=True, look_again=True)
    assert (report.created, report.unchanged) == (3, 1)
    assert ChainOfThought.objects.count() == 4
    assert Step.objects.count() == sum(len(r["step_labels"]) for r in records)


@postgresql
@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_chains_repeated_in_later_batches_and_a_second_import_are_unchanged(tmp_path):
    records = list(iter_pem(0.0001, 5))[:12]
    path = write_jsonl(tmp_path / "pem.jsonl", [*records, records[0], records[5], records[11]])
    first = pem800k_import.import_pem800k(path=path, name="pem800k", batch_size=4)
    assert (first["created"], first["unchanged"], first["failed"]) == (12, 3, 0)
    again = pem800k_import.import_pem800k(path=path, name="pem800k", batch_size=4)
    assert (again["created"], again["unchanged"]) == (0, 15)
    assert ChainOfThought.objects.count() == 12
    assert Step.objects.count() == sum(len(r["step_labels"]) for r in records)
    assert StepLabel.objects.count() == Step.objects.count()


@postgresql
def test_a_reader_process_that_cannot_start_fails_the_import_with_what_it_said(tmp_path, monkeypatch):
    monkeypatch.setattr(pem800k_import, "_conninfo", lambda: "host=127.0.0.1 port=1 dbname=none connect_timeout=2")
    path = write_jsonl(tmp_path / "pem.jsonl", list(iter_pem(0.0001, 3))[:3])
    with pytest.raises(RuntimeError, match="reader process failed.*127.0.0.1"):
        pem800k_import.import_pem800k(path=path, name="pem800k")
    assert not ChainOfThought.objects.exists()
    assert not any(t.name == "pem800k-feeder" for t in threading.enumerate())


# --- one bad line fails alone (issue 26, item 15) -----------------------------------------------


def deep_line(record: dict) -> str:
    """The record with a value nested 100,000 levels: Python's json recursed until RecursionError."""
    return json.dumps(record)[:-1] + ', "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("reading", ["default", "in this process"])
def test_a_nul_or_deep_nesting_fails_its_line_alone_and_the_rest_is_imported(tmp_path, monkeypatch, reading, english):
    if reading != "default":
        monkeypatch.setattr(pem800k_import, "_reader_process", lambda *args: nullcontext(None))
    good = list(iter_pem(0.0001, 3))[:4]
    (text, label, why), *rest = good[1]["step_labels"]
    lines = [
        json.dumps(good[0]),
        json.dumps({**good[1], "question": "题\u0000目"}),
        json.dumps({**good[1], "step_labels": [[text + "\x00", label, why], *rest]}),
        deep_line(good[2]),
        json.dumps(good[3], ensure_ascii=False),
    ]
    path = tmp_path / "pem.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = pem800k_import.import_pem800k(path=path, batch_size=10)
    assert (report["created"], report["failed"]) == (2, 3), report
    assert [row["line"] for row in report["failed_lines"]] == [2, 3, 4]
    reasons = [row["reason"] for row in report["failed_lines"]]
    assert "NUL" in reasons[0] and "NUL" in reasons[1] and "nested" in reasons[2]
    assert ChainOfThought.objects.count() == 2


@postgresql
@pytest.mark.parametrize("reading", ["default", "in this process"])
def test_a_line_the_database_refuses_fails_alone_and_the_batch_is_written(tmp_path, monkeypatch, reading, english):
    if reading != "default":
        monkeypatch.setattr(pem800k_import, "_reader_process", lambda *args: nullcontext(None))
    good = list(iter_pem(0.0001, 3))[:4]
    lines = [good[0], {**good[1], "model": "m" * 300}, good[2], good[3]]  # model_name holds 200 characters
    report = pem800k_import.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", lines), batch_size=10)
    assert (report["created"], report["failed"]) == (3, 1), report
    assert report["failed_lines"][0]["line"] == 2 and "database" in report["failed_lines"][0]["reason"]
    assert ChainOfThought.objects.count() == 3
    assert Step.objects.count() == sum(len(r["step_labels"]) for r in (good[0], good[2], good[3]))
