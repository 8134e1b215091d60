import json
from unittest import mock

import pytest

from k12vista import jobs
from k12vista.models import Job


@pytest.fixture
def job(researcher):
    return Job.objects.create(kind="k12vista.worker_check", title="check", started_by=researcher, total=4, done=1)


def test_it_shows_a_job_to_its_owner(job, researcher, login):
    response = login(researcher).get(f"/jobs/{job.pk}/")
    assert response.status_code == 200
    assert b"check" in response.content and b"<html" in response.content


def test_it_returns_the_polling_fragment_to_htmx(job, researcher, login):
    response = login(researcher).get(f"/jobs/{job.pk}/", headers={"HX-Request": "true"})
    body = response.content.decode()
    assert "<html" not in body
    assert 'hx-trigger="every 1s"' in body
    assert 'aria-valuenow="25"' in body
    assert "HX-Request" in response.headers["Vary"]


def test_it_stops_polling_once_the_job_finished(job, researcher, login):
    Job.objects.filter(pk=job.pk).update(status=Job.Status.SUCCEEDED, done=4)
    body = login(researcher).get(f"/jobs/{job.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in body
    assert 'aria-valuenow="100"' in body


def test_it_hides_another_users_job(job, annotator, login):
    client = login(annotator)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.post(f"/jobs/{job.pk}/cancel/").status_code == 404
    job.refresh_from_db()
    assert not job.cancel_requested


def test_it_shows_every_job_to_an_administrator(job, administrator, login):
    assert login(administrator).get(f"/jobs/{job.pk}/").status_code == 200


def test_it_cancels_from_the_fragment(job, researcher, login):
    response = login(researcher).post(f"/jobs/{job.pk}/cancel/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED


def test_it_redirects_a_plain_cancel_post(job, researcher, login):
    response = login(researcher).post(f"/jobs/{job.pk}/cancel/")
    assert response.status_code == 302 and response.url == f"/jobs/{job.pk}/"


def test_it_does_not_cancel_on_get(job, researcher, login):
    assert login(researcher).get(f"/jobs/{job.pk}/cancel/").status_code == 405


def test_it_starts_a_worker_check_from_settings(administrator, login, django_capture_on_commit_callbacks):
    with (
        mock.patch("k12vista.tasks.run_job.apply_async") as apply_async,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = login(administrator).post("/manage/settings/", {"queue": "io"}, headers={"HX-Request": "true"})
    job = Job.objects.get()
    assert response.status_code == 200 and f'id="job-{job.pk}"' in response.content.decode()
    apply_async.assert_called_once_with((job.pk,), queue="io")
    assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result["queue"] == "io"


def test_it_checks_the_workers_of_each_gpu_class(administrator, login, settings, django_capture_on_commit_callbacks):
    settings.GPU_CLASSES = ["4x80g", "1x80g"]
    client = login(administrator)
    page = client.get("/manage/settings/").content.decode()
    for queue in ("cpu", "io", "gpu", "gpu-1x80g", "gpu-4x80g"):
        assert f'name="queue" value="{queue}"' in page
    with (
        mock.patch("k12vista.tasks.run_job.apply_async") as apply_async,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post("/manage/settings/", {"queue": "gpu-4x80g"}, headers={"HX-Request": "true"})
    job = Job.objects.get()
    assert response.status_code == 200 and (job.kind, job.queue) == ("k12vista.worker_check_gpu", "gpu-4x80g")
    apply_async.assert_called_once_with((job.pk,), queue="gpu-4x80g")
    assert jobs.execute_job(job.pk) == Job.Status.SUCCEEDED  # as a worker of that class would
    job.refresh_from_db()
    assert job.result["queue"] == "gpu-4x80g"
    # A queue no worker is started on (a class no longer configured) is refused, not left waiting.
    for name in ("gpu-8x141g", "", "<b>x</b>"):
        refused = client.post("/manage/settings/", {"queue": name})
        assert refused.status_code == 400 and b"<b>" not in refused.content
    assert Job.objects.count() == 1


def test_it_keeps_settings_from_non_admins(researcher, login):
    client = login(researcher)
    assert client.get("/manage/settings/").status_code == 403
    assert client.post("/manage/settings/", {"queue": "cpu"}).status_code == 403
    assert not Job.objects.exists()


def test_it_tells_the_page_when_the_job_has_ended(job, researcher, login):
    client = login(researcher)
    running = client.get(f"/jobs/{job.pk}/", headers={"HX-Request": "true"})
    assert "HX-Trigger" not in running.headers
    Job.objects.filter(pk=job.pk).update(status=Job.Status.SUCCEEDED)
    ended = client.get(f"/jobs/{job.pk}/", headers={"HX-Request": "true"})
    assert json.loads(ended.headers["HX-Trigger"]) == {"job-finished": {"job": job.pk}}


def test_it_shows_parameters_and_results_as_named_rows_in_local_time(job, researcher, login, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.SUCCEEDED,
        params={"format": "jsonl", "filters": {"subject": "math"}},
        result={"count": 1200, "bytes": 2048, "created": "2026-12-01T01:02:03.456789+00:00"},
    )
    body = login(researcher).get(f"/jobs/{job.pk}/").content.decode()
    assert "{&#x27;" not in body and "{'" not in body  # no Python dicts on the page
    assert "2026-12-01 09:02:03" in body and ".456789" not in body  # local time, no microseconds
    assert "2.0 KB" in body.replace("\xa0", " ") and "data-job-result" in body
