import json

import pytest

from annotation.models import Question
from k12vista.roles import Role
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_it_imports_a_reference_file_and_reports_bad_lines(page, worker, tmp_path):
    from bench.generate import iter_questions

    good = [json.dumps(r, ensure_ascii=False) for r in iter_questions(0.0002, seed=5)][:4]
    unknown_type = '{"hash_id": "z9", "question": "?", "type": "判断题", "subject": "math-g9"}'
    lines = [good[0], "{broken json", good[1], unknown_type, good[2], good[3]]
    path = tmp_path / "release.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")

    make_person("chen", Role.RESEARCHER)
    log_in(page, "chen", PASSWORD)
    page.wait_for_url("**/research/")
    page.goto("/annotate/imports/")
    page.set_input_files("#file-upload input[type=file]", str(path))
    page.click("#file-upload button[type=submit]")
    page.wait_for_url("**/annotate/imports/*/")
    page.wait_for_selector("#import-report", timeout=60000)  # the page polls until the worker is done
    rows = page.locator("#line-errors tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).locator("td").first.inner_text() == "2"
    assert rows.nth(1).locator("td").first.inner_text() == "4"
    assert "判断题" in rows.nth(1).inner_text()
    assert Question.objects.count() == 4
    assert page.problems == []
