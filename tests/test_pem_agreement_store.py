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
