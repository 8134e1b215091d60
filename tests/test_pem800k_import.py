"""Importing PEM-800K-style files: per-line errors, idempotence, ~25 chains per question."""

import json

import pytest
from django.db import IntegrityError, connection, transaction

from annotation.jsonl_import import import_questions_file
from annotation.models import Question
from bench.generate import iter_pem, iter_questions
from pem import services
from pem.models import ChainOfThought, Step, StepLabel
from pem.training import importer

pytestmark = pytest.mark.django_db


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_it_keeps_every_chain_of_a_question_and_a_second_import_changes_nothing(tmp_path):
    records = list(iter_pem(0.0001, 3))  # 84 chains over 3 questions
    path = write_jsonl(tmp_path / "pem.jsonl", records)
    first = importer.import_pem800k(path=path, name="pem800k", batch_size=20)
    assert first["created"] == len(records) and first["failed"] == 0
    per_question = {r["hash_id"] for r in records}
    assert ChainOfThought.objects.count() == len(records)
    assert len(per_question) < len(records) / 20  # many chains share one question's hash_id
    assert Step.objects.count() == sum(len(r["step_labels"]) for r in records)
    assert StepLabel.objects.filter(source=StepLabel.Source.IMPORTED, rater="pem800k").count() == Step.objects.count()
    second = importer.import_pem800k(path=path, name="pem800k")
    assert second["created"] == 0 and second["unchanged"] == len(records)
    assert ChainOfThought.objects.count() == len(records)


def test_it_reports_bad_lines_and_imports_the_rest(tmp_path):
    good = list(iter_pem(0.00002, 1))
    bad_label = {**good[0], "step_labels": [["步骤", "XYZ", ""]]}
    lines = [json.dumps(good[0]), "{not json", json.dumps([1]), json.dumps(bad_label), json.dumps(good[1])]
    path = tmp_path / "pem.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = importer.import_pem800k(path=path)
    assert report["created"] == 2 and report["failed"] == 3
    assert [row["line"] for row in report["failed_lines"]] == [2, 3, 4]
    assert "XYZ" in report["failed_lines"][2]["reason"]


def test_it_links_chains_to_the_bank_and_keeps_the_snapshot_otherwise(tmp_path, researcher):
    question_record = next(iter(iter_questions(0.0001, 3)))
    write_jsonl(tmp_path / "q.jsonl", [question_record])
    import_questions_file(path=tmp_path / "q.jsonl", user=researcher)
    question = Question.objects.get()
    records = list(iter_pem(0.0001, 3))[:30]
    report = importer.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", records))
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
    importer.import_pem800k(path=write_jsonl(tmp_path / "one.jsonl", records[:1]), name="other")
    monkeypatch.setattr(importer, "_stored_keys", lambda keys: set())  # not there yet when we looked
    report = importer.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", records), name="pem")
    assert (report["created"], report["unchanged"], report["failed"]) == (4, 1, 0)
    assert ChainOfThought.objects.count() == 5
    assert Step.objects.count() == sum(len(r["step_labels"]) for r in records)


def test_it_forgives_labels_given_by_name_as_the_pebench_import_does(tmp_path):
    record = next(iter(iter_pem(0.00002, 1)))
    loose = {**record, "step_labels": [[text, f" {label.lower()} ", why] for text, label, why in record["step_labels"]]}
    report = importer.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", [loose]), name="pem")
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
        got.extend(importer._read_ahead(batches()))
    assert got == ["first", "second"]


def test_a_consumer_that_stops_early_stops_the_reader(tmp_path):
    import threading

    closed = threading.Event()

    def batches():
        try:
            yield from range(1000)
        finally:
            closed.set()

    reader = importer._read_ahead(batches(), depth=1)
    assert next(reader) == 0
    reader.close()  # the import failed while writing: the reader thread must not stay behind
    assert closed.wait(5)
    assert not any(t.name == "pem800k-reader" for t in threading.enumerate())


def test_hostile_values_fail_their_line_alone_and_the_rest_is_imported(tmp_path):
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
    report = importer.import_pem800k(path=path)
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
    assert importer.canonical_json(json.loads(line, parse_float=importer._Float)) == before


postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="the COPY path is PostgreSQL's")


def table_rows():
    chains = list(ChainOfThought.objects.order_by("key").values_list("key", "question_id", "response_text"))
    steps = list(Step.objects.order_by("cot__key", "position").values_list("cot__key", "position", "text"))
    labels = list(StepLabel.objects.order_by("step__cot__key", "step__position")
                  .values_list("step__cot__key", "step__position", "label", "explanation", "rater"))  # fmt: skip
    return chains, steps, labels


@postgresql
def test_checking_foreign_keys_per_batch_writes_what_checking_per_row_writes(tmp_path, monkeypatch, researcher):
    if not importer.may_skip_row_checks():
        pytest.skip("the test database's role may not set session_replication_role")
    question_record = next(iter(iter_questions(0.0001, 3)))
    import_questions_file(path=write_jsonl(tmp_path / "q.jsonl", [question_record]), user=researcher)
    path = write_jsonl(tmp_path / "pem.jsonl", list(iter_pem(0.0001, 3))[:40])
    fast = importer.import_pem800k(path=path, name="pem800k", batch_size=15)
    written = table_rows()
    assert any(question for _, question, _ in written[0])  # some chains are linked to the bank
    ChainOfThought.objects.all().delete()
    monkeypatch.setattr(importer, "may_skip_row_checks", lambda: False)
    slow = importer.import_pem800k(path=path, name="pem800k", batch_size=15)
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
    if not importer.may_skip_row_checks():
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
    report = importer.import_pem800k(path=write_jsonl(tmp_path / "pem.jsonl", records))
    assert report["created"] == 5
    assert not ChainOfThought.objects.filter(question__isnull=False).exists()
    assert all(c.question_text for c in ChainOfThought.objects.all())  # the snapshot is kept
