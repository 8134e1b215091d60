import pytest

from k12vista.roles import Role
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOMES = {
    Role.ANNOTATOR: ("/annotate/", "我的任务"),
    Role.INSPECTOR: ("/inspect/", "我的质检"),
    Role.RESEARCHER: ("/research/", "运行、数据集与导出"),
    Role.ADMIN: ("/manage/users/", "用户"),
}


@pytest.mark.parametrize("role", list(Role))
def test_it_logs_each_role_in_to_its_home(page, role):
    make_person(f"p-{role.value}", role)
    log_in(page, f"p-{role.value}", PASSWORD)
    path, heading = HOMES[role]
    page.wait_for_url(f"**{path}")
    assert page.locator("h1").inner_text() == heading
    assert page.problems == []


def test_it_switches_the_interface_language(page):
    make_person("lang", Role.ANNOTATOR)
    log_in(page, "lang", PASSWORD)
    page.wait_for_url("**/annotate/")
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    page.select_option("select[name=language]", "en")
    page.wait_for_load_state("load")
    page.wait_for_function("document.documentElement.lang === 'en'")
    assert page.locator("h1").inner_text() == "My queue"
    assert page.url.endswith("/annotate/")
    page.goto("/labels/")  # the choice sticks across pages
    assert page.locator("h1").inner_text() == "The nine step labels"
    assert page.problems == []


def test_it_renders_latex_with_katex(page):
    make_person("tex", Role.ANNOTATOR)
    log_in(page, "tex", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.goto("/preview/")
    output = page.locator("#preview-output")
    output.locator(".katex").first.wait_for()
    assert output.locator(".katex-display").count() == 1  # $$...$$
    assert output.locator(".katex").count() >= 4  # three inline formulas and the display one
    assert output.locator(".mord.mathnormal", has_text="f").count() >= 1
    assert "已知函数" in output.inner_text()  # the Chinese text around the formulas stays
    page.fill("#preview-source", r"电场强度 \(E=\frac{F}{q}\) 与 \[ \ce{H2O} \] <img src=x onerror=alert(1)>")
    output.locator(".mfrac").wait_for()
    assert output.locator("img").count() == 0  # user text is text, never HTML
    assert "<img src=x" in output.inner_text()
    assert page.problems == []


def test_it_polls_a_job_until_it_finishes(page):
    from k12vista.models import Job

    admin = make_person("boss", Role.ADMIN)
    job = Job.objects.create(kind="k12vista.worker_check", title="poll me", started_by=admin, total=2)
    log_in(page, "boss", PASSWORD)
    page.wait_for_url("**/manage/users/")
    page.goto(f"/jobs/{job.pk}/")
    assert page.locator(f"#job-{job.pk}").get_attribute("data-status") == "queued"
    Job.objects.filter(pk=job.pk).update(status=Job.Status.SUCCEEDED, done=2)
    page.wait_for_selector(f"#job-{job.pk}[data-status=succeeded]", timeout=10000)
    assert page.locator(".progress > div").get_attribute("style") == "width: 100%"
    assert page.problems == []
