"""A model server that is down, seen in the browser: a run against a closed port stops within
seconds with one message naming the URL and the cause; "Test connection" tells a working
endpoint from a dead one before any run starts; job lists name kinds in words."""

import re
import threading
import time

import pytest
from django.db import connection

from inference import services
from inference.models import InferenceRun, ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person
from tests.scripted_models import Servers
from tests.test_unreachable_endpoints import closed_port_url

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


def endpoint(name: str, base_url: str, model_name: str = "scripted-7b") -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=name, base_url=base_url, model_name=model_name, accepts_images=False), user=None
    )


def run_in_a_worker_thread(job_id: int) -> str:
    """The worker's part, in a thread of its own: Playwright's event loop holds this one, and a
    run's calls go through async_to_sync."""
    outcome = []

    def work():
        try:
            outcome.append(execute_job(job_id))
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    return outcome[0] if outcome else "still running"


def log_in_a_researcher(page):
    rita = make_person("rita", Role.RESEARCHER)
    log_in(page, "rita", PASSWORD)
    page.wait_for_url("**/research/")
    return rita


def test_a_run_against_a_closed_port_fails_fast_with_its_message(page):
    for _ in range(12):
        make_question()
    url = closed_port_url()
    endpoint("down", url)  # production's retries, backoff and threshold: nothing made faster for the test
    log_in_a_researcher(page)
    page.goto("/research/runs/new/")
    page.fill("#run-form #id_name", "停机测试")
    page.select_option("#run-form #id_endpoint", label="down")
    page.select_option("#run-form #id_mode", "direct")
    submitted = time.monotonic()
    page.click("#run-form button[type=submit]")
    page.wait_for_url(re.compile(r"/research/runs/\d+/$"))
    run = InferenceRun.objects.get()
    assert run_in_a_worker_thread(run.job_id) == Job.Status.FAILED  # the worker's part, here in the test
    error = page.locator("#run-status .job-progress[data-status=failed] [data-job-error]")
    error.wait_for(timeout=5000)
    assert time.monotonic() - submitted < 10
    assert error.inner_text().startswith(f"无法连接模型服务 {url}：连接被拒绝。")
    assert "APIConnectionError" not in page.inner_text("body")
    assert run.counts() == {"total": 12, "ok": 0, "failed": 0, "pending": 12}
    # The job page says the same, with the job's kind in words.
    page.goto(f"/jobs/{run.job_id}/")
    assert page.inner_text("[data-job-error]").startswith(f"无法连接模型服务 {url}：连接被拒绝。")
    assert page.inner_text("#job-facts [data-kind]") == "推理运行"
    assert page.problems == []


def test_test_connection_tells_a_working_endpoint_from_a_dead_one(page, servers):
    up = endpoint("up", servers.start({"scripted-7b": lambda body: (200, "pong")}))
    url = closed_port_url()
    down = endpoint("down", url)
    log_in_a_researcher(page)
    page.goto("/research/endpoints/")
    page.click(f"#endpoint-{up.pk} [data-test-endpoint]")
    ok = page.locator(f"#endpoint-test-{up.pk}[data-probe=ok]")
    ok.wait_for(timeout=5000)
    assert re.search(r"模型 scripted-7b 已应答，用时 \d+ 毫秒。", ok.inner_text()), ok.inner_text()
    page.click(f"#endpoint-{down.pk} [data-test-endpoint]")
    failed = page.locator(f"#endpoint-test-{down.pk}[data-probe=failed]")
    failed.wait_for(timeout=5000)
    assert f"无法连接模型服务 {url}：连接被拒绝。" in failed.inner_text()
    # Also on the endpoint's own page, below its settings.
    page.goto(f"/research/endpoints/{up.pk}/")
    page.click("#endpoint-test-card [data-test-endpoint]")
    page.locator(f"#endpoint-test-{up.pk}[data-probe=ok]").wait_for(timeout=5000)
    assert page.problems == []


def test_the_job_list_names_kinds_in_chinese(page):
    rita = log_in_a_researcher(page)
    for kind in ("annotation.export_questions", "inference.score", "pem.build_pebench"):
        Job.objects.create(kind=kind, title=kind, started_by=rita, status=Job.Status.SUCCEEDED)
    page.goto("/jobs/")
    kinds = page.locator("tbody [data-kind]").all_inner_texts()
    assert sorted(kinds) == sorted(["导出题目", "评分运行", "构建 PEBench"])
    titles = page.locator("tbody tr td:nth-child(2)").all_inner_texts()
    assert sorted(titles) == sorted(kinds)  # started without a title: the label stands in
    assert "annotation.export_questions" not in page.inner_text("body")
    assert page.problems == []
