"""What a cluster operator's Prometheus reads at /metrics (prometheus-client).

* **Request latencies**, by method, view name and status (``RequestLatencyMiddleware``).
* **Model calls** counted where they are made, in the one model-call layer
  (``inference.calls``, and ``inference.engines`` for in-worker engines): calls in
  flight, calls by outcome and tokens, per endpoint and replica (the base URL asked;
  ``offline`` for an engine in the worker). Each process counts its own; with several
  gunicorn or Celery processes on a machine set ``PROMETHEUS_MULTIPROC_DIR`` to an
  empty folder they all share (emptied at each start), and /metrics adds up every
  process's files (prometheus-client's multiprocess mode).
* **Jobs by kind and state, queue depth per queue**, read from the Job table at
  scrape time (``JobCollector``): the table is the truth about jobs, so every web
  process answers the same, whichever one Prometheus reaches.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REQUEST_SECONDS = Histogram(
    "k12vista_http_request_duration_seconds",
    "Time to answer a request, by method, view name and status",
    ["method", "view", "status"],
)
MODEL_CALLS_IN_FLIGHT = Gauge(
    "k12vista_model_calls_in_flight",
    "Model calls (HTTP requests) waiting for their answer",
    ["endpoint", "replica"],
    multiprocess_mode="livesum",  # only living processes: a killed worker's calls are not in flight
)
MODEL_CALLS = Counter(
    "k12vista_model_calls",
    "Model calls (HTTP requests, retries each counted) by outcome: ok, or failed (an error or no answer)",
    ["endpoint", "replica", "outcome"],
)
MODEL_TOKENS = Counter(
    "k12vista_model_tokens",
    "Tokens of answered model calls as the server reported them, by kind: prompt or completion",
    ["endpoint", "replica", "kind"],
)

CONTENT_TYPE = CONTENT_TYPE_LATEST
# A request's method is the client's to choose: any other counts as "other", so that
# nobody can grow the histogram's label sets without end.
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class CallRecord:
    """What a call (or a batch) answered with, told by the caller inside ``model_call``."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def used(self, usage: Any) -> None:
        """Adds ``usage`` as the OpenAI client parses it (None when the server sent none),
        or as a Completion carries it."""
        self.prompt_tokens += getattr(usage, "prompt_tokens", None) or 0
        self.completion_tokens += getattr(usage, "completion_tokens", None) or 0


@contextlib.contextmanager
def model_call(*, endpoint: str, replica: str, calls: int = 1) -> Iterator[CallRecord]:
    """Counts ``calls`` model calls (one HTTP request, or an offline engine's batch): in
    flight while the block runs, then ok (with their tokens) or failed when the block
    raises. A cancelled call (the run stopped) is neither."""
    in_flight = MODEL_CALLS_IN_FLIGHT.labels(endpoint, replica)
    in_flight.inc(calls)
    record = CallRecord()
    try:
        yield record
    except Exception:
        MODEL_CALLS.labels(endpoint, replica, "failed").inc(calls)
        raise
    else:
        MODEL_CALLS.labels(endpoint, replica, "ok").inc(calls)
        for kind, tokens in (("prompt", record.prompt_tokens), ("completion", record.completion_tokens)):
            if tokens:
                MODEL_TOKENS.labels(endpoint, replica, kind).inc(tokens)
    finally:
        in_flight.dec(calls)


class JobCollector(Collector):
    """Jobs by kind and status, and jobs waiting per queue, counted by the database when scraped."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db.models import Count

        from k12vista.models import Job  # settings load this module (the middleware) before the models

        jobs = GaugeMetricFamily("k12vista_jobs", "Jobs in the Job table by kind and status", labels=["kind", "status"])
        rows = Job.objects.order_by().values_list("kind", "status").annotate(n=Count("id"))
        for kind, status, count in rows:
            jobs.add_metric([kind, status], count)
        yield jobs
        depth = GaugeMetricFamily(
            "k12vista_queue_depth", "Jobs queued and not yet started, per Celery queue", labels=["queue"]
        )
        waiting = dict(
            Job.objects.filter(status=Job.Status.QUEUED).order_by().values_list("queue").annotate(n=Count("id"))
        )
        # Every queue, so an empty one reads 0 rather than nothing; and a GPU class's queue
        # ("gpu-4x80g", not one of the choices) whenever jobs wait on it.
        for queue in sorted(set(Job.Queue.values) | set(waiting)):
            depth.add_metric([queue], waiting.get(queue, 0))
        yield depth


_state = CollectorRegistry(auto_describe=False)
_state.register(JobCollector())


def exposition() -> bytes:
    """The text Prometheus scrapes: this process's counters (or, in multiprocess mode,
    every process's that shares PROMETHEUS_MULTIPROC_DIR), then the jobs from the database."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        counters = CollectorRegistry()
        multiprocess.MultiProcessCollector(counters)
    else:
        counters = REGISTRY
    return generate_latest(counters) + generate_latest(_state)


# Functions from a moment to (endpoint name, model calls that ended since then), one per
# kind of row a call leaves; apps register theirs (the studio core knows no model calls).
CallCounter = Callable[[datetime], Iterable[tuple[str, int]]]
_call_counters: list[CallCounter] = []


def count_calls_with(counter: CallCounter) -> None:
    if counter not in _call_counters:
        _call_counters.append(counter)


def calls_per_second(*, seconds: int = 60) -> list[tuple[str, float]]:
    """Model calls a second per endpoint over the last ``seconds``, busiest first: the
    jobs page's dashboard. From the database, so the same whichever process answers."""
    from django.utils import timezone

    since = timezone.now() - timedelta(seconds=seconds)
    tally: Tally[str] = Tally()
    for counter in _call_counters:
        for endpoint, calls in counter(since):
            tally[endpoint] += calls
    return [(endpoint, calls / seconds) for endpoint, calls in tally.most_common()]


class RequestLatencyMiddleware:
    """Times every request; labelled by the view's URL name (bounded), never by its path."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or match.route) if match else "unmatched"
        method = request.method if request.method in METHODS else "other"
        REQUEST_SECONDS.labels(method, view, str(response.status_code)).observe(time.perf_counter() - started)
        return response
