"""Issue 12 in a browser: a researcher builds PEM-800K training data from a campaign, with a progress
bar at every step (campaign, model split, judge panel, the four filters with their funnel, the
training export), a real Celery worker doing the jobs and scripted models answering over HTTP."""

import json
import re

import pytest

from inference import services
from inference.models import ModelEndpoint
from k12vista.roles import Role
from pem.models import TrainingExport
from pem.training import exports, formats
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person
from tests.scripted_models import Servers, user_text

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

JOB_TIMEOUT_MS = 120_000
ANSWERS = {
    "right": "步骤1：由题意 $x=2$。\n步骤2：代入得 $y=4$。\n最终答案：B",
    "other": "步骤1：移项得 $x=2$。\n步骤2：所以 $y=4$。\n最终答案：B",
    "wrong": "步骤1：设 $x=3$。\n步骤2：计算得 $2x=5$。\n最终答案：B",
}


def judge(body):
    text = user_text(body)
    chain = next(answer for answer in ANSWERS.values() if answer.split("\n")[1] in text)
    wrong = "$2x=5$" in chain
    steps = [{"step": s, "label": "CE" if wrong and n == 1 else "CS", "reason": "计算错误" if wrong and n == 1 else ""}
             for n, s in enumerate(chain.split("\n"))]  # fmt: skip
    return 200, json.dumps({"steps": steps}, ensure_ascii=False)


def splitter(body):
    text = user_text(body)
    chain = next(answer for answer in ANSWERS.values() if answer.split("\n")[1] in text)
    return 200, json.dumps({"steps": chain.split("\n")}, ensure_ascii=False)


def answering(answer):
    return lambda body: (200, answer)


@pytest.fixture
def scripted():
    servers = Servers()
    replies = {name: answering(answer) for name, answer in ANSWERS.items()}
    replies |= {"splitter": splitter} | {f"j{n}": judge for n in range(1, 5)}
    url = servers.start(replies)
    yield {
        name: services.save_endpoint(
            endpoint=ModelEndpoint(name=name, base_url=url, model_name=name, accepts_images=False), user=None
        )  # fmt: skip
        for name in replies
    }
    servers.stop()


def wait_for_job(page, card: str = "") -> None:
    """The job's progress bar polls itself until the job is finished, then shows 100."""
    page.wait_for_selector(f"{card} .job-progress[data-status=succeeded]", timeout=JOB_TIMEOUT_MS)
    assert page.locator(f"{card} .job-progress [role=progressbar]").first.get_attribute("aria-valuenow") == "100"


def check(page, form: str, endpoints) -> None:
    for endpoint in endpoints:
        page.check(f"{form} input[type=checkbox][value='{endpoint.pk}']")


def test_a_researcher_builds_pem800k_training_data_in_the_browser(page, worker, scripted):
    for _ in range(2):
        make_question(answers=["B"])
    make_person("rita", Role.RESEARCHER)
    log_in(page, "rita", PASSWORD)
    page.wait_for_url("**/research/")

    # The campaign: three models, step by step, one job with a bar over all runs.
    page.goto("/research/campaigns/new/")
    page.fill("#campaign-form #id_name", "PEM 浏览器")
    check(page, "#campaign-form", [scripted[name] for name in ANSWERS])
    page.select_option("#campaign-form #id_mode", "step_by_step")
    page.click("#campaign-form button[type=submit]")
    page.wait_for_url(re.compile(r"/research/campaigns/\d+/$"))
    wait_for_job(page, "#campaign-job")
    page.wait_for_selector("#campaign-progress[data-finished=true]", timeout=JOB_TIMEOUT_MS)
    assert page.locator("#campaign-progress > .progress").get_attribute("aria-valuenow") == "100"
    assert page.locator("#campaign-runs tr[data-endpoint]").count() == 3
    links = page.locator("#campaign-runs a[href*='/research/runs/']").evaluate_all("els => els.map(e => e.href)")
    runs = [int(href.rstrip("/").rsplit("/", 1)[1]) for href in links]

    # The model split.
    page.goto("/pem/splits/")
    page.select_option("#split-form #id_splitter", label="splitter")
    for run in runs:
        page.check(f"#split-form input[name=runs][value='{run}']")
    page.click("#split-form button[type=submit]")
    page.wait_for_url(re.compile(r"/pem/splits/\d+/$"))
    wait_for_job(page)

    # Four judges, a strict majority.
    page.goto("/pem/panels/")
    page.fill("#panel-form #id_name", "四位评委")
    check(page, "#panel-form", [scripted[f"j{n}"] for n in range(1, 5)])
    for run in runs:
        page.check(f"#panel-form input[name=runs][value='{run}']")
    page.click("#panel-form button[type=submit]")
    page.wait_for_url(re.compile(r"/pem/panels/\d+/$"))
    wait_for_job(page)

    # The four filters on the panel's labels, and their funnel.
    page.goto("/pem/training/")
    page.select_option("#pem800k-filter-form #id_labels", "panel|四位评委")
    page.fill("#pem800k-filter-form #id_target", "")
    page.click("#pem800k-filter-form button[type=submit]")
    page.wait_for_url(re.compile(r"/pem/training/filters/\d+/$"))
    wait_for_job(page)
    page.reload()
    assert page.locator("#funnel tbody tr").count() >= 4
    assert "6" in page.locator("#funnel").inner_text()

    # The export in all four formats.
    page.goto("/pem/training/")
    page.select_option("#pem800k-export-form #id_filter_run", index=1)
    page.click("#pem800k-export-form button[type=submit]")
    page.wait_for_url(re.compile(r"/pem/training/exports/\d+/$"))
    wait_for_job(page)
    export = TrainingExport.objects.get()
    assert export.status == TrainingExport.Status.DONE
    assert exports.verify_export(export) == dict.fromkeys(formats.FORMATS, 6)
