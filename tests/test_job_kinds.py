"""Every kind of job reads in words (k12vista.job_text): job lists, job pages, the admin
and the API say "导出题目", never ``annotation.export_questions``."""

import re

import pytest
from django.urls import reverse
from django.utils import translation

from k12vista import jobs
from k12vista.job_text import KIND_LABELS, failure_message, kind_label
from k12vista.models import Job


def test_every_registered_kind_has_a_label_in_both_languages():
    kinds = [kind for kind in jobs.registered_kinds() if not kind.startswith("tests.")]  # test modules' own
    assert len(kinds) >= 20
    missing = [kind for kind in kinds if kind not in KIND_LABELS]
    assert not missing, f"add these kinds to k12vista.job_text.KIND_LABELS: {missing}"
    for kind in kinds:
        with translation.override("en"):
            english = kind_label(kind)
        with translation.override("zh-hans"):
            chinese = kind_label(kind)
        assert english != kind and re.search(r"[\u4e00-\u9fff]", chinese), (kind, english, chinese)
    assert set(KIND_LABELS) <= set(kinds)  # no label for a kind that no longer exists


def test_a_kind_nobody_labelled_shows_as_written_and_an_unknown_failure_as_stored():
    assert kind_label("someapp.new_kind") == "someapp.new_kind"
    assert failure_message("no.such.code", {}) == ""
    job = Job(kind="x", error="plain text", error_code="no.such.code")
    assert job.error_message == "plain text"
    # Parameters that do not fit the wording: the stored English text, never a 500.
    job = Job(kind="x", error="English copy", error_code="inference.endpoint_unreachable", error_params={"u": 1})
    assert job.error_message == "English copy"


@pytest.fixture
def export_job(researcher):
    # Started without a title: as start_job stores it, the title is the kind.
    return Job.objects.create(
        kind="annotation.export_questions", title="annotation.export_questions", started_by=researcher,
        status=Job.Status.SUCCEEDED, params={"format": "jsonl", "filters": {"subject": "math"}}, result={"count": 3},
    )  # fmt: skip


def visible_text(html: str) -> str:
    """What a person reads: the page without tags and attributes."""
    return re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", " ", html, flags=re.S))


def test_job_lists_and_pages_show_the_label_in_chinese(export_job, researcher, administrator, login):
    web = login(researcher)
    detail_url = reverse("k12vista:job_detail", args=[export_job.pk])
    for url in (reverse("k12vista:job_list"), reverse("inference:home"), detail_url):
        text = visible_text(web.get(url).content.decode())
        assert "导出题目" in text, url
        assert "annotation.export_questions" not in text and "{'" not in text, url
    detail = visible_text(web.get(detail_url).content.decode())
    assert "类型" in detail and "格式" in detail  # parameters as named rows
    admin_settings = visible_text(login(administrator).get(reverse("k12vista:settings")).content.decode())
    assert "导出题目" in admin_settings and "annotation.export_questions" not in admin_settings


def test_the_api_gives_kind_label_beside_kind(export_job, researcher, login):
    web = login(researcher)
    data = web.get(f"/api/jobs/{export_job.pk}/").json()
    assert (data["kind"], data["kind_label"], data["title"]) == ("annotation.export_questions", "导出题目", "导出题目")
    web.cookies["k12vista_language"] = "en"
    listed = web.get("/api/jobs/").json()["results"][0]
    assert (listed["kind_label"], listed["title"]) == ("Export questions", "Export questions")


def test_a_title_given_at_start_is_kept(researcher, login):
    job = Job.objects.create(kind="inference.run", title="qwen-72b 直接作答", started_by=researcher)
    data = login(researcher).get(f"/api/jobs/{job.pk}/").json()
    assert (data["title"], data["kind_label"]) == ("qwen-72b 直接作答", "推理运行")


def test_the_admin_lists_jobs_by_label(export_job, administrator, login):
    administrator.is_superuser = True  # Django's admin lists models to those holding their permissions
    administrator.save(update_fields=["is_superuser"])
    web = login(administrator)
    text = visible_text(web.get("/admin/k12vista/job/").content.decode())
    assert "导出题目" in text
