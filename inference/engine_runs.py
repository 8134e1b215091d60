"""In-worker engine runs: an inference run answered by vLLM's offline engine (GPU worker) or by
transformers (CPU worker), a batch at a time. They build on inference.services (the runs and their
answers) and sit above it because a run that is part of a campaign moves the campaign's bar, and
inference.campaigns builds on services too."""

from __future__ import annotations

from inference import campaigns, engines, run_parts
from inference.job_shapes import RunCounts, RunParams
from inference.models import InferenceRun, Protocol, Response
from inference.services import (
    ALLOWED_PARAMS,
    MissingCaption,
    in_parts,
    request_for,
    save_answer,
)
from k12vista.jobs import Progress, job_handler
from k12vista.models import Job

OFFLINE_BATCH = 256  # conversations per engine call: large enough to keep the GPU busy, small for progress


@job_handler("inference.run_offline", queue=Job.Queue.GPU, params=RunParams, result=RunCounts)
def run_offline_job(job: Job, progress: Progress) -> dict:
    """The same run with vLLM's offline engine on this (GPU) worker, in batches."""
    return _run_in_batches(job, progress, engines.chat_batch, OFFLINE_BATCH)


LOCAL_BATCH = 16  # small CPU models: a batch is minutes of work at most, so progress stays live


@job_handler("inference.run_local", queue=Job.Queue.CPU, params=RunParams, result=RunCounts)
def run_local_job(job: Job, progress: Progress) -> dict:
    """The same run with transformers on this worker's CPU (small models), in batches."""
    return _run_in_batches(job, progress, engines.local_chat_batch, LOCAL_BATCH)


def _run_in_batches(job: Job, progress: Progress, chat_batch, batch_size: int) -> dict:
    """Feeds pending responses to an in-worker engine a batch at a time; each
    batch is saved before the next, so a killed worker loses at most one. A large
    run is split into parts (run_parts), each fed the same way by a worker of its own."""
    run = InferenceRun.objects.select_related("endpoint").get(pk=job.params["run_id"])
    span = run_parts.span_of(job)
    if span is None and in_parts(run, job):
        return run_parts.finish_whole(run, job, progress)  # parks until its parts have ended
    progress = run_parts.progress_of(job, progress)
    responses = run_parts.rows_of(run, span)
    total = responses.count()
    done = responses.exclude(status=Response.Status.PENDING).count()
    progress(done, total)
    params = {k: v for k, v in run.params.items() if k in ALLOWED_PARAMS}
    pending = responses.filter(status=Response.Status.PENDING).select_related("question").order_by("id")
    while batch := list(pending[:batch_size]):
        ready, conversations = [], []
        for response in batch:
            try:
                conversations.append(request_for(run, response)[1])
                ready.append(response)
            except MissingCaption as exc:
                save_answer(response, completion=None, error=str(exc))
        # The reference protocol leaves what the run does not set to the engine's own defaults.
        options = {"engine_defaults": True} if run.protocol == Protocol.REFERENCE else {}
        answers = chat_batch(run.endpoint, conversations, params, run.seed, **options)
        for response, completion in zip(ready, answers, strict=True):
            save_answer(response, completion=completion)
        done += len(batch)
        progress(done, total)
        if run.campaign_id is not None:
            campaigns.report_waiting(run.campaign_id)  # its bar covers this run too
    return run_parts.counts(run, span)
