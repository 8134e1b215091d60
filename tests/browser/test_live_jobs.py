"""Finished jobs show what they produced without a reload: the job page its download and result,
the import page its report and the questions it made."""

import json

import pytest

from annotation.models import Question, SourceDocument
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def reference_line(n: int) -> str:
    return json.dumps({
        "hash_id": f"live{n}", "question": f"计算 ${n}+1$ 的值", "type": "填空题", "subject": "math-g6",
        "format_answer": {"ground_truth": [str(n + 1)], "format_solution": f"${n}+1={n + 1}$"},
    }, ensure_ascii=False)  # fmt: skip


def test_the_import_page_shows_its_questions_when_the_job_ends(page, tmp_path, settings):
    make_person("rita", Role.RESEARCHER)
    log_in(page, "rita", PASSWORD)
    page.wait_for_url("**/research/")
    path = tmp_path / "bank.jsonl"
    path.write_text("\n".join(reference_line(n) for n in range(3)) + "\n", encoding="utf-8")
    page.goto("/annotate/imports/")
    page.set_input_files("input[name='file-file']", str(path))
    page.locator("input[name='file-file']").evaluate("el => el.form.requestSubmit()")
    page.wait_for_url("**/annotate/imports/*/")
    assert page.locator(".imported-question").count() == 0
    document = SourceDocument.objects.get()
    execute_job(document.job.pk)  # the worker's part, here in the test
    page.locator(".imported-question").nth(2).wait_for(timeout=10000)
    assert Question.objects.count() == 3
    assert page.locator("#import-report").is_visible()
    assert page.problems == []


def test_the_job_page_shows_its_result_when_the_job_ends(page):
    rita = make_person("rita", Role.RESEARCHER)
    log_in(page, "rita", PASSWORD)
    page.wait_for_url("**/research/")
    job = Job.objects.create(kind="k12vista.worker_check", title="检查", started_by=rita, params={"queue": "cpu"})
    page.goto(f"/jobs/{job.pk}/")
    assert page.locator("[data-job-result]").count() == 0
    execute_job(job.pk)
    page.locator("[data-job-result]").wait_for(timeout=10000)
    assert page.locator(f"#job-{job.pk}[data-status=succeeded]").count() == 1
    assert page.problems == []
