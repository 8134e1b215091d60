"""PEBench releases: an immutable, versioned snapshot of PEBench's items with their gold labels
and the agreement report, built by a job, published, downloaded only by those the blind rule
allows, and compared between versions; the screens and the API around them."""

import json
import zipfile
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from k12vista.jobs import execute_job
from k12vista.models import Job
from pem import releases
from pem.models import Adjudication, ChainOfThought, LabellingTask, PEBenchRelease, StepLabel
from tests.pem_factories import add_to_pebench, label_steps, make_cot

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _commit(settings, tmp_media):
    settings.STUDIO_COMMIT = "abc123"


@pytest.fixture
def bench(annotator, other_annotator, inspector):
    """Two PEBench items: one decided (gold on every step), one without gold yet."""
    decided = make_cot(steps=["读图得 $AB=4$。", "故 $AC=7$。"], key="q1", status=ChainOfThought.Status.GOLD)
    open_ = make_cot(steps=["第一步。", "第二步。"], key="q2")
    add_to_pebench(decided, open_)
    label_steps(decided, ["CS", "CE"], rater="alice", user=annotator)
    label_steps(decided, ["CS", "KAE"], rater="amy", user=other_annotator)
    label_steps(decided, ["CS", "CE"], source="model", rater="judge-72b", explanation="算错")
    label_steps(decided, ["CS", "CE"], source="gold", rater="ivan", user=inspector, explanation="应为 5")
    Adjudication.objects.create(cot=decided, decided_by=inspector, decided=timezone.now(), note="CE, not KAE")
    label_steps(open_, ["CS", "CS"], rater="alice", user=annotator)
    return {"decided": decided, "open": open_}


def built(user, **kwargs) -> PEBenchRelease:
    release = releases.start_release(by=user, **kwargs)
    assert execute_job(release.job_id) == Job.Status.SUCCEEDED, Job.objects.get(pk=release.job_id).error
    release.refresh_from_db()
    return release


def read_zip(release):
    from django.conf import settings

    with zipfile.ZipFile(Path(settings.MEDIA_ROOT) / release.path) as archive:
        lines = {n: [json.loads(x) for x in archive.read(n).splitlines()] for n in archive.namelist() if "jsonl" in n}
        return lines, json.loads(archive.read("manifest.json")), json.loads(archive.read("agreement.json"))


def test_a_release_snapshots_items_gold_labels_and_the_agreement_report(bench, researcher):
    release = built(researcher)
    assert (release.version, release.status, release.studio_commit) == (1, "draft", "abc123")
    assert release.summary["items"] == 2 and release.summary["reference_items"] == 1
    assert release.summary["gold_labels"] == {"CE": 1, "CS": 1}
    assert release.agreement["items"] == 2 and release.agreement["people"]["pairs"]
    lines, manifest, agreement = read_zip(release)
    [reference] = lines["pebench-reference.jsonl"]
    assert reference["step_labels"] == [
        ["读图得 $AB=4$。", "步骤正确", "应为 5"], ["故 $AC=7$。", "运算处理错误", "应为 5"]]  # fmt: skip
    assert {r["key"] for r in lines["pebench.jsonl"]} == {"q1", "q2"}
    assert agreement == release.agreement and manifest["release"] == 1 and manifest["items"] == 2
    from django.conf import settings

    from annotation.export import sha256_of

    assert release.sha256 == sha256_of(Path(settings.MEDIA_ROOT) / release.path)


def test_publishing_freezes_it_and_later_labels_go_into_the_next_version(bench, researcher, inspector, english):
    v1 = built(researcher)
    releases.publish_release(release=v1, by=researcher)
    with pytest.raises(releases.PEBenchReleaseError, match="published already"):
        releases.publish_release(release=v1, by=researcher)
    # The open item gets its gold labels; the decided one is relabelled on step 2.
    label_steps(bench["open"], ["CS", "SE"], source="gold", rater="ivan", user=inspector)
    StepLabel.objects.filter(step__cot=bench["decided"], source="gold", step__position=2).update(label="KAE")
    extra = make_cot(steps=["一", "二"], key="q3")
    add_to_pebench(extra)
    v2 = built(researcher)
    assert v2.version == 2 and v2.summary["items"] == 3 and v2.summary["reference_items"] == 2
    # v1 still holds what it published, in its rows and its file.
    v1.refresh_from_db()
    assert v1.summary["items"] == 2
    lines, _manifest, _agreement = read_zip(v1)
    assert [r["step_labels"][1][1] for r in lines["pebench-reference.jsonl"]] == ["运算处理错误"]
    diff = releases.compare_releases(v1, v2)
    assert diff["added"] == ["q3"] and diff["removed"] == []
    changed = {c["key"]: c for c in diff["changed"]}
    assert set(changed) == {"q1", "q2"}
    [steps] = [f for f in changed["q1"]["fields"] if f["field"] == "steps"]
    assert any(line.startswith("-2. [CE]") for line in steps["diff"])
    assert any(line.startswith("+2. [KAE]") for line in steps["diff"])


def test_a_label_after_the_build_refuses_the_publication(bench, researcher, annotator, english):
    release = built(researcher)
    label_steps(bench["open"], ["CS", "CS"], rater="bob")
    with pytest.raises(releases.PEBenchReleaseError, match="changed since this draft was built"):
        releases.publish_release(release=release, by=researcher)


def test_a_gold_label_corrected_in_place_refuses_the_publication(bench, researcher, english):
    release = built(researcher)
    StepLabel.objects.filter(step__cot=bench["decided"], source="gold", step__position=2).update(label="KAE")
    with pytest.raises(releases.PEBenchReleaseError, match="changed since this draft was built"):
        releases.publish_release(release=release, by=researcher)


def test_it_refuses_an_empty_pebench_or_training_data(researcher, english):
    with pytest.raises(releases.PEBenchReleaseError, match="no items"):
        releases.start_release(by=researcher)
    cot = make_cot(key="t1", in_training_data=True)
    add_to_pebench(cot)
    with pytest.raises(releases.PEBenchReleaseError, match="training data"):
        releases.start_release(by=researcher)


# --- screens --------------------------------------------------------------------------------


def test_a_researcher_builds_publishes_downloads_and_compares_in_the_browser_pages(login, researcher, bench):
    client = login(researcher)
    assert b'id="build-release"' in client.get("/pem/releases/").content
    response = client.post("/pem/releases/", {"name": "PEBench 2026"})
    release = PEBenchRelease.objects.get()
    assert response["Location"] == f"/pem/releases/v{release.version}/"
    assert execute_job(release.job_id) == Job.Status.SUCCEEDED
    page = client.get(response["Location"]).content.decode()
    assert 'data-status="draft"' in page and 'id="publish"' in page and 'id="download"' in page
    client.post(f"/pem/releases/v{release.version}/publish/")
    release.refresh_from_db()
    assert release.status == "published"
    download = client.get(f"/pem/releases/v{release.version}/file/")
    assert download.status_code == 200 and download["X-Checksum-SHA256"] == release.sha256
    assert b"".join(download.streaming_content)[:2] == b"PK"
    v2 = built(researcher)
    compare = client.get(f"/pem/releases/compare/?old=1&new={v2.version}").content.decode()
    assert 'data-added="0"' in compare and 'data-changed="0"' in compare


def test_annotators_and_anyone_with_an_open_task_are_kept_out(login, researcher, annotator, inspector, bench):
    release = built(researcher)
    urls = ["/pem/releases/", f"/pem/releases/v{release.version}/", f"/pem/releases/v{release.version}/file/",
            "/pem/releases/compare/?old=1&new=1"]  # fmt: skip
    for url in urls:
        assert login(annotator).get(url).status_code == 403, url
    assert login(inspector).get(urls[2]).status_code == 200  # inspectors read all labels
    LabellingTask.objects.create(cot=bench["open"], annotator=inspector)  # now labelling an item: blind
    for url in urls:
        assert login(inspector).get(url).status_code == 403, url
    assert login(inspector).post(f"/pem/releases/v{release.version}/publish/").status_code == 403
    assert client_api(inspector).get("/api/pem/releases/").status_code == 403


def test_an_inspector_reads_but_does_not_build_or_publish(login, researcher, inspector, bench):
    release = built(researcher)
    client = login(inspector)
    assert b'id="build-release"' not in client.get("/pem/releases/").content
    assert client.post("/pem/releases/", {"name": "x"}).status_code == 403
    assert client.post(f"/pem/releases/v{release.version}/publish/").status_code == 403
    assert PEBenchRelease.objects.count() == 1


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get("/pem/releases/")
    assert response.status_code == 302 and "/login/" in response["Location"]


# --- the API --------------------------------------------------------------------------------


def client_api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_the_api_builds_publishes_lists_and_compares(researcher, bench):
    api = client_api(researcher)
    response = api.post("/api/pem/releases/", {"name": "api"}, format="json")
    assert response.status_code == 202 and response.json()["status"] == "building"
    release = PEBenchRelease.objects.get()
    execute_job(release.job_id)
    detail = api.get(f"/api/pem/releases/v{release.version}/").json()
    assert detail["status"] == "draft" and detail["agreement"]["items"] == 2
    assert detail["download"] == f"/pem/releases/v{release.version}/file/"
    assert api.post(f"/api/pem/releases/v{release.version}/publish/").json()["status"] == "published"
    assert api.post(f"/api/pem/releases/v{release.version}/publish/").status_code == 400
    assert [r["version"] for r in api.get("/api/pem/releases/").json()] == [1]
    assert api.get("/api/pem/releases/compare/?old=1&new=1").json()["changed"] == []
    assert api.get("/api/pem/releases/compare/?old=x").status_code == 400


def test_the_api_keeps_annotators_out(annotator, bench):
    assert client_api(annotator).get("/api/pem/releases/").status_code == 403
    assert client_api(annotator).post("/api/pem/releases/", {}, format="json").status_code == 403
