"""Issue 25's faults 8 and 9 in Chromium: a job started from the Chinese pages reads in English on the English
jobs page (its title is stored as a code and worded for each reader), and with DEBUG on (``make run``) a missing
page is the studio's own 404, not Django's technical page listing every URL."""

import pytest

from k12vista.models import Job
from k12vista.roles import Role
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_job_started_from_the_chinese_pages_is_titled_in_english_on_the_english_jobs_page(page):
    make_person("ada", Role.ADMIN)
    log_in(page, "ada", PASSWORD)
    page.wait_for_load_state("load")
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    page.goto("/manage/settings/")
    page.click("button[name=queue][value=cpu]")  # 检查 cpu 队列
    page.wait_for_selector("#worker-check :text('后台进程检查（cpu）')")
    job = Job.objects.get(title_code="worker_check")

    page.select_option("select[name=language]", "en")
    page.wait_for_function("() => document.documentElement.lang === 'en'")
    page.goto("/jobs/")
    row = page.locator(f"tr:has(a[href='/jobs/{job.pk}/'])")
    assert row.locator("td").nth(1).inner_text() == "Worker check (cpu)"
    assert "后台" not in page.locator("main").inner_text()
    page.goto(f"/jobs/{job.pk}/")
    assert "Worker check (cpu)" in page.locator("h1").inner_text()
    assert page.problems == []


@pytest.mark.parametrize("path", ["/no-such-page/", "/jobs/999999/"])
def test_with_debug_on_a_missing_page_is_the_studios_own_404(page, settings, path):
    settings.DEBUG = True  # as make run serves
    make_person("wang", Role.ANNOTATOR)
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    response = page.goto(path)
    assert response.status == 404
    page.wait_for_selector("#error-404")
    text = page.locator("body").inner_text()
    assert "URLconf" not in text and "k12vista.urls" not in text and "Page not found" not in text
    # The studio's page: its menu and a way back, in the reader's language.
    assert page.locator("#main-nav").count() == 1 and page.locator("#error-404 a[href='/']").count() >= 1
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    # The document's own 404 is the only thing the console reports: the page's styles and scripts load.
    assert all("404" in problem for problem in page.problems), page.problems
