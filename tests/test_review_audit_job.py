"""Creating an audit over a large population runs as a job: the form and the API start it,
its page shows the progress and then the audit, and it draws exactly what an audit made at
once would draw (same seed, same sample), once, even when run again."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from k12vista.jobs import execute_job
from k12vista.models import Job
from review import services
from review.models import Audit, Rating
from tests.review_factories import bulk_questions, three_inspectors
from tests.test_review_audits import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def large(settings):
    settings.AUDIT_INLINE_POPULATION = 5  # six questions count as a large population here


def test_the_form_starts_a_job_over_a_large_population(login, inspector, large):
    bulk_questions(3, subjects=["math", "physics"])
    people = three_inspectors(inspector)
    client = login(inspector)
    response = client.post(reverse("review:audit_create"), form_data(people, per_stratum="2", seed="5"))
    job = Job.objects.get(kind=services.CREATE_JOB)
    assert response.status_code == 302 and response["Location"] == reverse("review:audit_creating", args=[job.pk])
    assert not Audit.objects.exists()  # nothing drawn in the request
    page = client.get(response["Location"]).content.decode()
    assert f'id="job-{job.pk}"' in page and 'id="open-audit"' not in page
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    audit = Audit.objects.get()
    assert audit.job == job and audit.seed == 5 and audit.created_by == inspector and audit.items.count() == 4
    assert Rating.objects.filter(item__audit=audit).count() == 12
    assert job.__class__.objects.get(pk=job.pk).result == {"audit": audit.pk, "items": 4}
    page = client.get(response["Location"]).content.decode()
    assert f'href="{reverse("review:audit", args=[audit.pk])}"' in page


def test_the_job_draws_what_an_audit_made_at_once_draws(inspector, settings):
    bulk_questions(20, subjects=["math", "physics"])
    people = three_inspectors(inspector)
    arguments = {"name": "a", "population": {"kind": "status", "status": "solution_corrected"},
                 "strata": ["subject"], "per_stratum": 7, "seed": 11, "inspectors": people}  # fmt: skip
    at_once = services.start_audit(**arguments, by=inspector)
    assert isinstance(at_once, Audit)
    settings.AUDIT_INLINE_POPULATION = 5
    job = services.start_audit(**arguments, by=inspector)
    assert isinstance(job, Job)
    execute_job(job.pk)
    by_job = Audit.objects.get(job=job)
    assert sorted(by_job.items.values_list("question_id", flat=True)) == sorted(
        at_once.items.values_list("question_id", flat=True)
    )
    assert by_job.strata_counts == at_once.strata_counts


def test_a_rerun_of_the_job_finds_its_audit(inspector, large):
    bulk_questions(4, subjects=["math", "physics"])
    job = services.start_audit(name="", population={"kind": "status", "status": "solution_corrected"},
                               strata=["subject"], per_stratum=2, inspectors=three_inspectors(inspector),
                               by=inspector)  # fmt: skip
    assert job.params["seed"] is not None  # fixed when asked, not when run
    execute_job(job.pk)
    again = services.create_audit_from_job(Job.objects.get(pk=job.pk), progress=None)
    assert Audit.objects.count() == 1 and again == Audit.objects.get()


def test_bad_settings_are_refused_before_any_job_starts(inspector, large, english):
    bulk_questions(4, subjects=["math"])
    with pytest.raises(services.AuditError, match="inspectors"):
        services.start_audit(name="", population={"kind": "status", "status": "solution_corrected"},
                             strata=["subject"], per_stratum=2, inspectors=[inspector], by=inspector)  # fmt: skip
    with pytest.raises(services.AuditError, match="empty"):
        services.start_audit(name="", population={"kind": "status", "status": "rejected"}, strata=["subject"],
                             per_stratum=2, inspectors=three_inspectors(inspector), by=inspector)  # fmt: skip
    assert not Job.objects.exists()


def test_the_api_answers_202_with_the_job(inspector, large):
    bulk_questions(4, subjects=["math", "physics"])
    people = three_inspectors(inspector)
    api = APIClient()
    api.force_authenticate(inspector)
    body = {"name": "api", "population": {"kind": "status", "status": "solution_corrected"}, "strata": ["subject"],
            "per_stratum": 2, "inspectors": [p.username for p in people], "inspectors_per_item": 3}  # fmt: skip
    response = api.post("/api/inspect/audits/", body, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["job"])
    assert job.kind == services.CREATE_JOB and api.get(f"/api/jobs/{job.pk}/").status_code == 200


def test_someone_elses_job_page_is_not_found(login, inspector, large):
    from k12vista.roles import Role
    from tests.conftest import make_person

    bulk_questions(4, subjects=["math"])
    job = services.start_audit(name="", population={"kind": "status", "status": "solution_corrected"},
                               strata=["subject"], per_stratum=2, inspectors=three_inspectors(inspector),
                               by=inspector)  # fmt: skip
    other = make_person("outsider-inspector", Role.INSPECTOR)
    assert login(other).get(reverse("review:audit_creating", args=[job.pk])).status_code == 404
