"""Running a job that starts parts (a run's part-jobs, a panel's judges) here and now, as workers would."""

from k12vista.jobs import execute_job
from k12vista.models import Job


def tree_of(job_id: int) -> list[int]:
    """The job's parts, their parts and so on, in id order."""
    found, frontier = [], [job_id]
    while frontier:
        below = list(Job.objects.filter(params__part_of__in=frontier).values_list("pk", flat=True))
        found += below
        frontier = below
    return sorted(found)


def run_with_parts(job_id: int, *, rounds: int = 20) -> str:
    """Runs the job, then whatever of its tree has not ended (a parked whole is run again, as its
    wake-up would), until it ends; its final status. Messages are not needed: tests that mock the
    broker (or run without on_commit callbacks) still see every part run once."""
    status = execute_job(job_id)
    for _ in range(rounds):
        if status != "parked":
            return status
        for pk in Job.objects.unfinished().filter(pk__in=tree_of(job_id)).order_by("id").values_list("pk", flat=True):
            execute_job(pk)
        status = execute_job(job_id)
    raise AssertionError(f"job {job_id} still waits for its parts after {rounds} rounds")
