"""PEBench releases and the stored agreement report in a real browser, with a real worker:
a researcher computes the agreement report as a job and reads it, builds PEBench v1,
publishes and downloads it (checksum as shown), a gold label is corrected, v2 is built and
the comparison shows the changed step; an annotator is kept out of all of it."""

import hashlib
import time

import pytest
from django.utils import timezone

from k12vista.models import Job
from k12vista.roles import Role
from pem.models import Adjudication, ChainOfThought, PEBenchRelease, StepLabel
from tests.browser.conftest import log_in, open_page
from tests.conftest import PASSWORD, make_person
from tests.pem_factories import add_to_pebench, label_steps, make_cot

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def wait_for_job(job_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.is_finished:
            assert job.status == Job.Status.SUCCEEDED, job.error
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish")


def test_a_researcher_reads_the_stored_agreement_and_releases_pebench(browser, live_server, worker, settings):
    settings.AGREEMENT_INLINE_LABELS = 0  # as at a million labels: the page never computes it itself
    make_person("rita", Role.RESEARCHER)
    alice, amy = make_person("alice", Role.ANNOTATOR), make_person("amy", Role.ANNOTATOR)
    ivan = make_person("ivan", Role.INSPECTOR)
    cots = [make_cot(steps=["第一步。", "第二步。"], key=f"q{i}", status=ChainOfThought.Status.GOLD) for i in range(3)]
    add_to_pebench(*cots)
    for cot in cots:
        label_steps(cot, ["CS", "CE"], rater="alice", user=alice)
        label_steps(cot, ["CS", "KAE"], rater="amy", user=amy)
        label_steps(cot, ["CS", "CE"], source="gold", rater="ivan", user=ivan)
        Adjudication.objects.create(cot=cot, decided_by=ivan, decided=timezone.now(), note="CE")

    rita = open_page(browser, live_server.url, timeout_ms=20000)
    log_in(rita, "rita", PASSWORD)
    rita.wait_for_url("**/research/")

    # The agreement report: not computed yet; computing it is a job; the page fills in when it ends.
    rita.goto("/pem/agreement/")
    assert rita.locator("#report-missing").count() == 1
    with rita.expect_navigation():
        rita.click("#compute-report")
    wait_for_job(Job.objects.get(kind="pem.agreement").pk)
    rita.wait_for_selector("#people-stats", timeout=20000)
    assert rita.get_attribute("#report-status", "data-fresh") == "1"
    assert rita.get_attribute("#count-items", "data-count") == "3"

    # PEBench v1: built by a job, published, downloaded with the checksum the page shows.
    rita.goto("/pem/releases/")
    rita.fill("#release-name", "PEBench demo")
    rita.click("#build-release")
    rita.wait_for_url("**/pem/releases/v1/")
    wait_for_job(PEBenchRelease.objects.get(version=1).job_id)
    rita.reload()
    with rita.expect_navigation():
        rita.click("#publish")
    assert rita.get_attribute("#release-summary", "data-status") == "published"
    with rita.expect_download() as download:
        rita.click("#download")
    assert hashlib.sha256(download.value.path().read_bytes()).hexdigest() == rita.text_content(
        "#release-summary code.hash"
    )

    # A gold label corrected after publishing goes into v2; the comparison names the step.
    StepLabel.objects.filter(step__cot=cots[0], source="gold", step__position=2).update(label="KAE")
    rita.goto("/pem/releases/")
    rita.click("#build-release")
    rita.wait_for_url("**/pem/releases/v2/")
    wait_for_job(PEBenchRelease.objects.get(version=2).job_id)
    rita.reload()
    rita.select_option("#compare-old", "1")
    rita.click("#compare")
    rita.wait_for_url("**/releases/compare/**")
    assert rita.get_attribute("#diff-summary", "data-changed") == "1"
    assert "[KAE]" in rita.text_content('.changed[data-key="q0"]')
    assert not rita.problems

    # An annotator reads none of it.
    annotator = open_page(browser, live_server.url, timeout_ms=20000)
    log_in(annotator, "alice", PASSWORD)
    annotator.wait_for_url("**/annotate/**")
    response = annotator.goto(f"{live_server.url}/pem/releases/v1/")
    assert response.status == 403
