from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from k12vista import jobs
from k12vista.models import Job


@shared_task(name=jobs.RUN_JOB, bind=True, acks_late=True, max_retries=5, ignore_result=True)
def run_job(self, job_id: int) -> str:
    """Runs one Job. Safe to deliver twice: the job is claimed with a
    conditional UPDATE before any work starts (see Job.claim)."""
    try:
        return jobs.execute_job(job_id)
    except jobs.TransientJobError as exc:
        if self.request.retries >= self.max_retries:
            jobs.fail_job(job_id, f"Gave up after {self.request.retries + 1} attempts: {exc}")
            return "failed"
        countdown = min(600, 10 * 2**self.request.retries)
        # The retry's message is due after its countdown; until then the sweeper leaves the job alone.
        due = timezone.now() + timedelta(seconds=countdown)
        Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(message_due_at=due)
        raise self.retry(exc=exc, countdown=countdown) from exc
