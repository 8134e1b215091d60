"""The agreement report over all chains as a stored result: computed by a job, read by the
page (which writes nothing), marked out of date when the labels change."""

import pytest

from k12vista.jobs import execute_job
from k12vista.models import Job
from pem import agreement_store
from pem.models import StoredAgreement
from pem.reports import agreement_report
from tests.test_pem_reports import GOLD, MODEL, PERSON, chain, labels, scoring_run

pytestmark = pytest.mark.django_db
URL = "/pem/agreement/"
COMPUTE = "/pem/agreement/compute/"


@pytest.fixture
def labelled():
    run = scoring_run("judge-a")
    c1, c2 = chain("c1", 3), chain("c2", 2)
    labels(c1, PERSON, "alice", ["CS", "CE", "CS"])
    labels(c1, PERSON, "amy", ["CS", "CS", "CS"])
    labels(c2, PERSON, "alice", ["CS", "KAE"])
    labels(c2, PERSON, "amy", ["CS", "KAE"])
    for cot in (c1, c2):
        labels(cot, GOLD, "gold", ["CS"] * cot.steps.count())
    labels(c1, MODEL, "judge-a", ["CS", "CE", "CS"], run)
    return c1, c2


@pytest.fixture
def large(settings):
    settings.AGREEMENT_INLINE_LABELS = 0  # every label count is "large": the page only reads


def test_the_stored_report_is_the_report(labelled):
    stored = agreement_store.compute_and_store("all")
    fresh = agreement_store.plain(agreement_report())
    assert StoredAgreement.objects.get(scope="all").report == fresh == stored.report
    assert stored.report["people"]["cohen_kappa"]["value"] == fresh["people"]["cohen_kappa"]["value"] is not None
    assert stored.fingerprint == agreement_store.fingerprint()


def test_a_large_database_is_never_computed_in_the_request(login, researcher, labelled, large, monkeypatch):
    monkeypatch.setattr(agreement_store, "compute", lambda scope: pytest.fail("computed in the request"))
    body = login(researcher).get(URL).content.decode()
    assert 'id="report-missing"' in body and 'id="people"' not in body and 'id="compute-report"' in body
    assert not StoredAgreement.objects.exists()  # GET wrote nothing


def test_the_page_starts_the_job_shows_its_progress_then_the_stored_numbers(login, researcher, labelled, large):
    client = login(researcher)
    response = client.post(COMPUTE, {"scope": "all"})
    assert response.status_code == 302 and response["Location"].endswith("?scope=all")
    job = Job.objects.get(kind=agreement_store.KIND)
    assert job.params == {"scope": "all"} and job.status == "queued"
    body = client.get(URL).content.decode()
    assert f'id="job-{job.pk}"' in body and 'id="compute-report"' not in body
    client.post(COMPUTE, {"scope": "all"})
    assert Job.objects.filter(kind=agreement_store.KIND).count() == 1  # one computation at a time
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    body = client.get(URL).content.decode()
    assert 'data-fresh="1"' in body and 'id="count-items" data-count="2"' in body and 'id="people"' in body
    assert 'id="report-stale"' not in body


def test_new_labels_mark_the_stored_report_out_of_date(login, researcher, labelled, large):
    agreement_store.compute_and_store("all")
    c1, _c2 = labelled
    labels(c1, PERSON, "bob", ["CS", "CS", "CS"])
    body = login(researcher).get(URL).content.decode()
    assert 'data-fresh="0"' in body and 'id="report-stale"' in body
    assert 'id="count-items" data-count="2"' in body  # the old numbers, said to be old


def test_each_scope_is_stored_on_its_own(login, researcher, labelled, large):
    from pem.models import PEBenchItem

    c1, _c2 = labelled
    PEBenchItem.objects.create(cot=c1)
    agreement_store.compute_and_store("pebench")
    client = login(researcher)
    assert 'id="count-items" data-count="1"' in client.get(URL + "?scope=pebench").content.decode()
    assert 'id="report-missing"' in client.get(URL).content.decode()


def test_annotators_can_neither_read_nor_start_it(login, annotator, labelled):
    client = login(annotator)
    assert client.post(COMPUTE, {"scope": "all"}).status_code == 403
    assert not Job.objects.exists()


def test_the_compute_view_only_takes_posts_and_known_scopes(login, researcher, labelled):
    client = login(researcher)
    assert client.get(COMPUTE).status_code == 405
    client.post(COMPUTE, {"scope": "../../x"})
    assert Job.objects.get().params == {"scope": "all"}


# --- refreshed by what changes labels ---------------------------------------------------------


def agreement_jobs():
    return Job.objects.filter(kind=agreement_store.KIND)


def run_agreement_jobs():
    for job in agreement_jobs().filter(status=Job.Status.QUEUED):
        assert execute_job(job.pk) == Job.Status.SUCCEEDED


def assert_one_refresh_per_scope():
    assert sorted(agreement_jobs().values_list("params__scope", "started_by", "status")) == [
        ("all", None, "queued"), ("pebench", None, "queued")]  # fmt: skip


def test_a_pebench_import_refreshes_the_report_once_and_the_page_then_shows_it(
    login, researcher, labelled, large, settings, tmp_path
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from pem import jobs
    from tests.test_pem_import import reference, write_lines

    settings.MEDIA_ROOT = tmp_path / "media"

    def import_job(*records):
        path = write_lines(tmp_path / "upload.jsonl", records)
        upload = SimpleUploadedFile("upload.jsonl", path.read_bytes())
        job = jobs.start_import(stored_name=jobs.store_upload(upload), name="upload.jsonl", user=researcher)
        assert execute_job(job.pk) == Job.Status.SUCCEEDED

    import_job(reference("p1"))
    assert_one_refresh_per_scope()
    import_job(reference("p2"))  # while those wait: they read the labels when they run, this import's too
    assert_one_refresh_per_scope()
    run_agreement_jobs()
    body = login(researcher).get(URL).content.decode()
    assert 'data-fresh="1"' in body and 'id="report-stale"' not in body and 'id="people"' in body
    import_job(reference("p2"))  # changes nothing: the stored report is still fresh, nothing starts
    assert agreement_jobs().count() == 2


def test_labels_from_scoring_refresh_the_report_once(researcher, large):
    from pem import jobs
    from tests.test_pem_model_labels import GOLD as STEPS
    from tests.test_pem_model_labels import chain_with_judgment

    _cot, scoring_run = chain_with_judgment([(text, "CS", "") for text in STEPS])
    for _ in range(2):
        job = jobs.start_labels_from_scoring_run(scoring_run=scoring_run, user=researcher)
        assert execute_job(job.pk) == Job.Status.SUCCEEDED
        assert_one_refresh_per_scope()


def test_a_storm_of_submissions_refreshes_the_report_at_most_every_so_often(
    login, researcher, annotator, other_annotator, inspector, large, settings
):
    from pem import labelling
    from tests.test_pem_labelling import ALL_CORRECT, label_and_submit, opened_cot

    settings.AGREEMENT_REFRESH_SECONDS = 300
    opened_cot(), opened_cot()
    label_and_submit(labelling.next_task(annotator), ALL_CORRECT)
    assert_one_refresh_per_scope()
    label_and_submit(labelling.next_task(other_annotator), {**ALL_CORRECT, "3": {"label": "CE", "reason": "x"}})
    assert_one_refresh_per_scope()  # one pending: no second
    run_agreement_jobs()
    assert 'data-fresh="1"' in login(researcher).get(URL).content.decode()
    label_and_submit(labelling.next_task(annotator), ALL_CORRECT)
    assert not agreement_jobs().unfinished().exists()  # the stored report is younger than the setting
    settings.AGREEMENT_REFRESH_SECONDS = 0
    disputed = labelling.adjudication_queue().get()  # the two annotators disagreed on step 3
    labelling.adjudicate(cot=disputed, gold_by_position=ALL_CORRECT, by=inspector)
    assert agreement_jobs().unfinished().count() == 2  # an adjudication refreshes it too


def test_a_small_database_starts_no_refresh(labelled):
    assert agreement_store.refresh_after_change() == []  # the page computes it in the request
    assert not agreement_jobs().exists()


def test_every_reader_follows_the_systems_computation_on_the_page(login, researcher, inspector, annotator,
                                                                  labelled, large):  # fmt: skip
    job = agreement_store.refresh_after_change()[0]
    progress = f"/pem/agreement/progress/{job.pk}/"
    for reader in (researcher, inspector):
        body = login(reader).get(URL).content.decode()
        assert f'id="job-{job.pk}"' in body and f'hx-get="{progress}"' in body
        assert "/cancel/" not in body  # the system's job: no reader cancels it
    assert login(researcher).get(f"/jobs/{job.pk}/").status_code == 404  # the generic view hides it
    assert login(annotator).get(progress).status_code == 403
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    done = login(researcher).get(progress, HTTP_HX_REQUEST="true")
    assert done.status_code == 200 and "job-finished" in done["HX-Trigger"]
    assert 'data-fresh="1"' in login(researcher).get(URL).content.decode()


@pytest.mark.django_db(transaction=True)
def test_triggers_at_the_same_moment_start_one_job_per_scope(large):
    import threading

    from django.db import connection

    from tests.test_pem_reports import chain as make_chain
    from tests.test_pem_reports import labels as add_labels

    add_labels(make_chain("c1", 2), PERSON, "alice", ["CS", "CS"])
    start = threading.Barrier(6)
    errors = []

    def trigger():
        try:
            start.wait()
            agreement_store.refresh_after_change()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=trigger) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert_one_refresh_per_scope()
