"""Releases: an immutable, versioned snapshot of an audited candidate set, its
three files, publishing, and the comparison of two releases."""

import json
import zipfile
from pathlib import Path

import pytest

from annotation import release_files, releases
from annotation import services as bank
from annotation.models import CandidateSet, Question, Release, ReleaseFile
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _settings(settings, tmp_media):
    settings.STUDIO_COMMIT = "abc123"


def audited_set(user, n=3, **overrides) -> CandidateSet:
    questions = [make_question(user, **overrides) for _ in range(n)]
    Question.objects.filter(pk__in=[q.pk for q in questions]).update(status=Question.Status.AUDITED)
    candidate = CandidateSet.objects.create(name="draw", seed=1, bank_fingerprint="x")
    candidate.questions.set(questions)
    return candidate


def built(candidate, user, **kwargs) -> Release:
    release = releases.start_release(candidate_set=candidate, by=user, **kwargs)
    assert execute_job(release.job_id) == Job.Status.SUCCEEDED, Job.objects.get(pk=release.job_id).error
    release.refresh_from_db()
    return release


def test_a_release_snapshots_content_hash_provenance_and_commit(researcher):
    candidate = audited_set(researcher)
    release = built(candidate, researcher)
    assert (release.version, release.status, release.studio_commit) == (1, "draft", "abc123")
    item = release.items.order_by("hash_id").first()
    question = Question.objects.get(hash_id=item.hash_id)
    assert item.content_hash == bank.hash_content(bank.content_of(question))
    assert item.content["text"] == question.text and item.content["figures"]
    assert item.provenance["document"] is None and "refinement" in item.provenance
    assert release.summary["questions"] == 3
    assert release.summary["cells"] == [{"subject": "math", "grade": 9, "qtype": "multiple_choice", "count": 3}]


def test_only_an_audited_candidate_set_is_released(researcher, english):
    candidate = audited_set(researcher)
    Question.objects.filter(pk=candidate.questions.first().pk).update(status=Question.Status.SOLUTION_CORRECTED)
    with pytest.raises(releases.ReleaseError, match="1 questions .* not audited"):
        releases.start_release(candidate_set=candidate, by=researcher)


def test_publishing_moves_the_questions_to_released_and_freezes_the_release(researcher, english):
    release = built(audited_set(researcher), researcher)
    releases.publish_release(release=release, by=researcher)
    assert set(Question.objects.values_list("status", flat=True)) == {"released"}
    assert Question.objects.first().edits.filter(new="released", note__contains="release v1").exists()
    with pytest.raises(releases.ReleaseError, match="published already"):
        releases.publish_release(release=release, by=researcher)


def test_an_edit_after_the_build_refuses_the_publication(researcher, english):
    release = built(audited_set(researcher), researcher)
    question = Question.objects.first()
    bank.edit_question(question=question, changes={"text": "新的题干"}, user=researcher,
                       expected_version=question.version)  # fmt: skip
    with pytest.raises(releases.ReleaseError, match="changed since this draft was built"):
        releases.publish_release(release=release, by=researcher)


def test_a_later_edit_goes_into_the_next_release_and_the_comparison_shows_it(researcher):
    candidate = audited_set(researcher)
    v1 = built(candidate, researcher)
    releases.publish_release(release=v1, by=researcher)
    question = Question.objects.order_by("id").first()
    old_text = question.text
    bank.edit_question(question=question, changes={"text": "改正后的题干"}, user=researcher,
                       expected_version=question.version)  # fmt: skip
    added = make_question(researcher)
    Question.objects.filter(pk=added.pk).update(status=Question.Status.AUDITED)
    candidate.questions.add(added)
    v2 = built(candidate, researcher)
    releases.publish_release(release=v2, by=researcher)
    # v1 still holds what it published.
    assert v1.items.get(hash_id=question.hash_id).content["text"] == old_text
    diff = releases.compare_releases(v1, v2)
    assert diff["added"] == [added.hash_id] and diff["removed"] == []
    [changed] = diff["changed"]
    assert changed["hash_id"] == question.hash_id
    [text] = [f for f in changed["fields"] if f["field"] == "text"]
    assert f"-{old_text}" in text["diff"] and "+改正后的题干" in text["diff"]


def test_the_three_files_are_written_and_checksummed(researcher, settings):
    release = built(audited_set(researcher), researcher)
    files = {f.form: f for f in release.files.all()}
    assert set(files) == set(ReleaseFile.Form.values)
    for f in files.values():
        path = Path(settings.MEDIA_ROOT) / f.path
        assert f.sha256 == release_files.export.sha256_of(path) and f.count == 3
    lines = (Path(settings.MEDIA_ROOT) / files["reference"].path).read_text().splitlines()
    assert {json.loads(line)["hash_id"] for line in lines} == set(release.items.values_list("hash_id", flat=True))
    with zipfile.ZipFile(Path(settings.MEDIA_ROOT) / files["studio"].path) as archive:
        assert sum(n.startswith("images/") for n in archive.namelist()) == 3
    with zipfile.ZipFile(Path(settings.MEDIA_ROOT) / files["huggingface"].path) as archive:
        names = archive.namelist()
    assert "k12vista-v1-hf/README.md" in names and any(n.endswith(".parquet") for n in names)


def test_datasets_loads_the_parquet_release_as_in_the_database(researcher, settings, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    settings.RELEASE_PARQUET_ROWS_PER_SHARD = 2  # three rows: two shards
    release = built(audited_set(researcher), researcher)
    folder = release_files.release_dir(release) / "k12vista-v1-hf"
    assert len(list((folder / "data").glob("test-*-of-00002.parquet"))) == 2
    import datasets

    loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf-cache"))["test"]
    assert loaded.num_rows == release.items.count() == 3
    assert set(release_files.FEATURES) == set(loaded.features)
    for row in loaded:
        question = Question.objects.get(hash_id=row["hash_id"])
        assert (row["question"], row["answers"], row["grade"]) == (question.text, question.answers, question.grade)
        assert row["knowledge_points"] == ["平方根"]
        [image] = row["images"]
        figure = question.figures.get()
        assert image.size == (figure.width, figure.height)
        item = release.items.get(hash_id=row["hash_id"])
        assert json.loads(row["provenance"]) == item.provenance and row["content_hash"] == item.content_hash
    card = (folder / "README.md").read_text()
    assert card.startswith("---\nlicense: cc-by-nc-4.0") and "## Counts per cell" in card and "@misc{k12vista" in card


def test_the_column_writer_builds_the_same_table_as_row_dicts(tmp_path, settings):
    """The writer's column-by-column row groups equal pyarrow's reading of the row dicts,
    images (none, one, two a row) and options included."""
    import pyarrow as pa
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    names = [default_storage.save(f"figures/t-{n}.png", ContentFile(bytes([n]) * (50 + n))) for n in range(3)]
    base = {"subject": "math", "grade": 7, "stage": "middle", "text": "题", "answers": ["A"], "raw_solution": "解",
            "solution_steps": ["一", "二"], "knowledge_points": ["平方根"], "core_units": [], "difficulty": 0.5,
            "source": "jsonl"}  # fmt: skip
    items = [
        ("a", "h1", base | {"qtype": "multiple_choice", "options": [{"label": "A", "text": "1"}], "figures": []}, {}),
        ("b", "h2", base | {"qtype": "fill_in_blank", "options": [], "figures": names[:1]}, {"page": 3}),
        ("c", "h3", base | {"qtype": "free_response", "options": [{"label": 1, "text": 2}], "figures": names[1:]},
         '{"page": 4}'),
    ]  # fmt: skip
    schema = release_files.FEATURES.arrow_schema
    ours = release_files.arrow_group(tuple(items), schema)
    rows = [release_files.hf_row(item, [release_files.read_figure(n) for n in item[2]["figures"]]) for item in items]
    rows[2]["provenance"] = '{"page": 4}'  # already JSON text, as the database hands it over
    expected = pa.Table.from_pylist(rows, schema=schema)
    assert ours.equals(expected)
    assert [len(r) for r in ours.column("images").to_pylist()] == [0, 1, 2]
    assert ours.column("options").to_pylist()[2] == [{"label": "1", "text": "2"}]
    # Content as the database hands it over (JSON text): parsed by pyarrow where it fits, in
    # Python where it does not (the number as a label, an option without text), the same table.
    as_text = [(h, d, json.dumps(c, ensure_ascii=False), p) for h, d, c, p in items]
    assert release_files.parsed_group(tuple(as_text[:2]), schema) is not None
    assert release_files.parsed_group(tuple(as_text), schema) is None
    assert release_files.arrow_group(tuple(as_text[:2]), schema).equals(expected.slice(0, 2))
    assert release_files.arrow_group(tuple(as_text), schema).equals(expected)
    missing = [(h, d, json.dumps({k: v for k, v in json.loads(c).items() if k != "stage"}), p)
               for h, d, c, p in as_text]  # fmt: skip
    assert release_files.parsed_group(tuple(missing[:1]), schema) is None
    assert release_files.arrow_group(tuple(missing[:1]), schema).column("stage").to_pylist() == [""]
    # A grade the source did not give is null, as in the release JSONL, never the stage's stand-in.
    unknown = [(h, d, json.dumps(json.loads(c) | {"grade": 9, "grade_known": False}), p) for h, d, c, p in as_text[:2]]
    assert release_files.arrow_group(tuple(unknown), schema).column("grade").to_pylist() == [None, None]
    hash_id, digest, content, provenance = items[0]
    assert release_files.hf_row((hash_id, digest, content | {"grade_known": False}, provenance), [])["grade"] is None


def test_a_published_release_keeps_its_figures_when_the_bank_changes_them(researcher, settings):
    """Replacing one question's figure (as a recrop does: new file, old one deleted) and removing
    another's leaves the published release whole: its snapshot, its Parquet and its zip still hold
    the bytes as built; the next release holds the new ones and the comparison names the change."""
    import io

    import pyarrow.parquet as pq
    from django.core.files.base import ContentFile
    from PIL import Image

    candidate = audited_set(researcher)
    v1 = built(candidate, researcher)
    releases.publish_release(release=v1, by=researcher)
    edited, removed, _kept = Question.objects.order_by("id")
    before = {}
    for question in (edited, removed):
        figure = question.figures.get()
        with figure.image.open("rb") as stored:
            before[question.hash_id] = stored.read()
    figure = edited.figures.get()
    old_name = figure.image.name
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), "red").save(buffer, "PNG")
    figure.image.save(f"{edited.hash_id}-0-crop.png", ContentFile(buffer.getvalue()), save=True)
    figure.image.storage.delete(old_name)
    gone = removed.figures.get()
    gone.image.storage.delete(gone.image.name)
    gone.delete()
    for question in (edited, removed):
        bank.edit_question(question=question, changes={"text": question.text + "。"}, user=researcher,
                           expected_version=question.version)  # fmt: skip

    # The snapshot's own copies are still there, byte for byte.
    for hash_id, data in before.items():
        [name] = v1.items.get(hash_id=hash_id).content["figures"]
        with releases.default_storage.open(name, "rb") as stored:
            assert stored.read() == data
    # So are the release's files.
    folder = release_files.release_dir(v1) / "k12vista-v1-hf"
    table = pq.read_table(next((folder / "data").glob("*.parquet")))
    images = dict(zip(table.column("hash_id").to_pylist(), table.column("images").to_pylist(), strict=True))
    assert {h: images[h][0]["bytes"] for h in before} == before
    studio = v1.files.get(form="studio")
    with zipfile.ZipFile(Path(settings.MEDIA_ROOT) / studio.path) as archive:
        kept = {n.split("/")[-1].rsplit("-", 1)[0]: archive.read(n) for n in archive.namelist() if "images/" in n}
    assert {h: kept[h] for h in before} == before

    v2 = built(candidate, researcher)
    [new_name] = v2.items.get(hash_id=edited.hash_id).content["figures"]
    with releases.default_storage.open(new_name, "rb") as stored:
        assert stored.read() == buffer.getvalue()
    assert v2.items.get(hash_id=removed.hash_id).content["figures"] == []
    diff = releases.compare_releases(v1, v2)
    changed = {c["hash_id"]: {f["field"] for f in c["fields"]} for c in diff["changed"]}
    assert changed == {edited.hash_id: {"text", "figures"}, removed.hash_id: {"text", "figures"}}
    # Unchanged bytes are kept once and shared by both releases.
    assert (
        v1.items.get(hash_id=_kept.hash_id).content["figures"] == v2.items.get(hash_id=_kept.hash_id).content["figures"]
    )
