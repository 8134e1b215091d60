"""The review app's background work: creating an audit over a large population."""

from __future__ import annotations

from k12vista.jobs import Progress, job_handler
from k12vista.models import Job
from review import services
from review.job_shapes import CreateAuditParams, CreateAuditResult


@job_handler(services.CREATE_JOB, queue=Job.Queue.CPU, params=CreateAuditParams, result=CreateAuditResult)
def create_audit_job(job: Job, progress: Progress) -> dict:
    """Safe to run again: one transaction makes the audit, and a rerun finds it."""
    audit = services.create_audit_from_job(job, progress)
    return {"audit": audit.pk, "items": audit.items.count()}
