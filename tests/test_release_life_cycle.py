"""The one release life cycle (k12vista.releases) that the benchmark's releases and PEBench's
releases share: numbering, the build job's frame, publishing, immutability and comparing."""

import pytest

from annotation import releases as benchmark_releases
from annotation.models import Release, ReleaseItem
from k12vista import releases
from k12vista.models import Job
from pem import releases as pebench_releases
from pem.models import PEBenchRelease, PEBenchReleaseItem

pytestmark = pytest.mark.django_db


def test_both_kinds_of_release_raise_the_one_release_error():
    assert benchmark_releases.ReleaseError is releases.ReleaseError
    assert pebench_releases.PEBenchReleaseError is releases.ReleaseError
    assert issubclass(Release, releases.ReleaseBase) and issubclass(PEBenchRelease, releases.ReleaseBase)


@pytest.mark.parametrize(
    ("model", "fields", "label"),
    [(Release, {"licence": "CC"}, "release v1"), (PEBenchRelease, {}, "PEBench v1")],
)
def test_a_published_release_is_never_saved_again(model, fields, label, english):
    draft = model.objects.create(version=1, name="one", status=model.Status.DRAFT, **fields)
    draft.name = "renamed while a draft"
    draft.save()
    model.objects.filter(pk=draft.pk).update(status=model.Status.PUBLISHED)
    draft.refresh_from_db()
    draft.name = "renamed after publishing"
    with pytest.raises(releases.ReleaseError, match=f"{label} is published and never changes"):
        draft.save()
    assert model.objects.get(pk=draft.pk).name == "renamed while a draft"


def test_a_late_build_job_leaves_a_published_release_alone():
    release = PEBenchRelease.objects.create(version=1, name="one", status=PEBenchRelease.Status.PUBLISHED)
    job = Job.objects.create(kind=pebench_releases.BUILD, params={"release": release.pk})

    def work(_release):
        raise AssertionError("a published release is never rebuilt")

    assert releases.build(PEBenchRelease, job, work) == {"release": release.pk, "published": True}
    release.refresh_from_db()
    assert release.status == PEBenchRelease.Status.PUBLISHED


def test_a_failed_build_keeps_its_reason_and_a_good_one_stores_its_fields():
    release = PEBenchRelease.objects.create(version=1, name="one")
    job = Job.objects.create(kind=pebench_releases.BUILD, params={"release": release.pk})

    def failing(_release):
        raise releases.ReleaseError("the labels moved")

    with pytest.raises(releases.ReleaseError):
        releases.build(PEBenchRelease, job, failing)
    release.refresh_from_db()
    assert (release.status, release.error) == ("failed", "the labels moved")
    result = releases.build(PEBenchRelease, job, lambda r: ({"ok": r.pk}, {"sha256": "ab", "path": "x.zip"}))
    release.refresh_from_db()
    assert result == {"ok": release.pk}
    assert (release.status, release.error, release.sha256, release.path) == ("draft", "", "ab", "x.zip")


def test_publishing_a_draft_without_its_files_is_refused(researcher, english):
    release = PEBenchRelease.objects.create(version=1, name="one", status=PEBenchRelease.Status.DRAFT)
    with pytest.raises(releases.ReleaseError, match="not all written"):
        releases.publish(release, by=researcher, check=lambda r: None)
    building = PEBenchRelease.objects.create(version=2, name="two")
    with pytest.raises(releases.ReleaseError, match="PEBench v2 is .*, not a built draft"):
        releases.publish(building, by=researcher, check=lambda r: None)


def test_compare_reads_only_changed_hashes_unless_the_hash_leaves_content_out():
    old = Release.objects.create(version=1, name="one", licence="CC")
    new = Release.objects.create(version=2, name="two", licence="CC")
    for release, items in ((old, {"a": ("h1", "x"), "b": ("h2", "y"), "gone": ("h3", "")}),
                           (new, {"a": ("h1", "x2"), "b": ("h9", "y"), "new": ("h4", "")})):  # fmt: skip
        for hash_id, (digest, text) in items.items():
            ReleaseItem.objects.create(release=release, hash_id=hash_id, version=1, content_hash=digest,
                                       content={"text": text})  # fmt: skip

    def changes(a, b):
        return [{"field": "text"}] if a["text"] != b["text"] else []

    whole = releases.compare(old, new, key="hash_id", changes=changes, hash_covers_content=False)
    assert (whole["added"], whole["removed"]) == (["new"], ["gone"])
    # "a" kept its hash but its text changed; "b" changed its hash alone.
    assert whole["changed"] == [{"hash_id": "a", "fields": [{"field": "text"}]}, {"hash_id": "b", "fields": []}]
    hashed = releases.compare(old, new, key="hash_id", changes=changes)
    assert hashed["changed"] == [{"hash_id": "b", "fields": []}]


def test_pebench_items_compare_by_key():
    old = PEBenchRelease.objects.create(version=1, name="one")
    new = PEBenchRelease.objects.create(version=2, name="two")
    PEBenchReleaseItem.objects.create(release=old, key="q1", content_hash="h1", content={})
    PEBenchReleaseItem.objects.create(release=new, key="q1", content_hash="h2", content={})
    diff = releases.compare(old, new, key="key", changes=lambda a, b: [])
    assert diff == {"old": 1, "new": 2, "added": [], "removed": [], "changed": [{"key": "q1", "fields": []}]}
