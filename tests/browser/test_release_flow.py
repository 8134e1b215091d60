"""From a checked bank to a released benchmark in a real browser, with a real
worker: cluster knowledge points, merge two units, draw a candidate set and read
its per-cell report, an inspector's accepted audit moves the questions to
audited, publish v1, download the three forms, edit a question, publish v2 and
read the diff."""

import hashlib
import time

import pytest
from django.utils import timezone

from annotation import services as bank
from annotation.models import Assignment, CandidateSet, CoreUnit, Question, Release
from k12vista.models import Job
from k12vista.roles import Role
from review import services as audits
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in, open_page
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

POINTS = ["勾股定理", "勾股定理的应用", "解一元二次方程", "一元二次方程的解法"]


def wait_for_job(job_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED):
            assert job.status == Job.Status.SUCCEEDED, job.error
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish")


def person_page(browser, live_server, username, landing):
    page = open_page(browser, live_server.url, timeout_ms=20000)
    log_in(page, username, PASSWORD)
    page.wait_for_url(landing)
    return page


def test_a_researcher_takes_the_bank_to_two_releases(browser, live_server, worker):
    make_person("rita", Role.RESEARCHER)
    alice = make_person("alice", Role.ANNOTATOR)
    questions = [make_question(alice, knowledge_points=[POINTS[i % 4]]) for i in range(8)]
    Question.objects.update(status=Question.Status.SOLUTION_CORRECTED)
    now = timezone.now()
    Assignment.objects.bulk_create(Assignment(question=q, annotator=alice, task=task, locked_until=now, done_at=now)
                                   for q in questions for task in Assignment.Task.values)  # fmt: skip

    rita = person_page(browser, live_server, "rita", "**/research/")
    # Cluster the math points, then merge two units on the review screen.
    rita.goto("/annotate/benchmark/units/?subject=math")
    rita.fill("input[name=points_per_unit]", "2")
    rita.click("#cluster")
    rita.wait_for_url("**/jobs/*/")
    wait_for_job(Job.objects.filter(kind="annotation.cluster_knowledge").get().pk)
    rita.goto("/annotate/benchmark/units/?subject=math")
    assert rita.locator(".unit").count() == 2
    first = rita.locator(".unit").first
    first.locator("select[name=other]").select_option(index=0)
    with rita.expect_navigation():
        first.locator("button[value=merge]").click()
    assert rita.locator(".unit").count() == 1 == CoreUnit.objects.count()
    assert rita.locator(".unit").first.get_attribute("data-points") == "4"

    # Preview the allocation, then draw with a seed and read the per-cell report.
    rita.goto("/annotate/benchmark/")
    rita.fill("#per-cell", "10")
    rita.click("#preview")
    rita.wait_for_selector("#allocation")
    assert rita.get_attribute('#allocation tr[data-cell="math/9/multiple_choice"]', "data-shortfall") == "2"
    rita.fill("#draw-seed", "7")
    rita.click("#draw")
    rita.wait_for_url("**/benchmark/draws/*/")
    candidate = CandidateSet.objects.get()
    wait_for_job(candidate.job_id)
    rita.reload()
    assert rita.get_attribute('#cells tr[data-cell="math/9/multiple_choice"]', "data-drawn") == "8"
    assert rita.text_content("#seed") == "7" and rita.text_content("#not-audited") == "8"

    # The inspector rates the audit of the candidate set and applies the plan's decision.
    inspector = make_person("irene", Role.INSPECTOR)
    audit = audits.create_audit(
        name="candidate audit", population={"kind": "batch", "hash_ids": [q.hash_id for q in questions]},
        strata=["subject"], inspectors=[inspector], by=inspector, aql=6.5, inspectors_per_item=1,
    )  # fmt: skip
    irene = person_page(browser, live_server, "irene", "**/inspect/")
    irene.goto(f"/inspect/audits/{audit.pk}/")
    irene.click("#rate-next")
    while "/rate/" in irene.url:
        for dimension in ("question", "answer", "solution"):
            irene.check(f"input[name={dimension}][value=pass]")
        with irene.expect_navigation():
            irene.click("#save-rating")
    with irene.expect_navigation():
        irene.click("#apply-decision")
    assert irene.get_attribute("#lot-decisions tr[data-stratum=math]", "data-decision") == "accept"
    assert Question.objects.filter(status=Question.Status.AUDITED).count() == 8

    # Build and publish v1, then download the three forms and check their checksums.
    rita.reload()
    rita.fill("#release-name", "K12Vista demo")
    rita.click("#build-release")
    rita.wait_for_url("**/benchmark/releases/v1/")
    wait_for_job(Release.objects.get(version=1).job_id)
    rita.reload()
    with rita.expect_navigation():
        rita.click("#publish")
    assert rita.get_attribute("#release-summary", "data-status") == "published"
    assert Question.objects.filter(status=Question.Status.RELEASED).count() == 8
    for form in ("reference", "studio", "huggingface"):
        with rita.expect_download() as download:
            rita.click(f"#download-{form}")
        content = download.value.path().read_bytes()
        shown = rita.text_content(f'#release-files tr[data-form="{form}"] code')
        assert hashlib.sha256(content).hexdigest() == shown

    # A later edit goes into v2; v1 keeps what it published; the diff shows the change.
    question = Question.objects.order_by("id").first()
    bank.edit_question(question=question, changes={"text": "改正后的题干：求 $x$。"}, user=alice,
                       expected_version=question.version)  # fmt: skip
    rita.goto(f"/annotate/benchmark/draws/{candidate.pk}/")
    rita.click("#build-release")
    rita.wait_for_url("**/benchmark/releases/v2/")
    wait_for_job(Release.objects.get(version=2).job_id)
    rita.reload()
    with rita.expect_navigation():
        rita.click("#publish")
    rita.select_option("#compare-old", "1")
    rita.click("#compare")
    rita.wait_for_url("**/releases/compare/**")
    assert rita.get_attribute("#diff-summary", "data-changed") == "1"
    assert "改正后的题干" in rita.text_content(f'.changed[data-hash-id="{question.hash_id}"]')
    assert not rita.problems and not irene.problems
