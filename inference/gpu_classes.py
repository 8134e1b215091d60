"""GPU classes: which gpu queue an offline-engine run goes to.

A cluster's GPU machines come in a few shapes (one 80 GiB card, four of them, eight 141 GiB
cards...). The settings name them (``GPU_CLASSES = ["1x80g", "4x80g"]``) and each gpu worker is
started on the queue of its class (``celery -A k12vista worker -Q gpu-4x80g``). An offline-engine
endpoint says what it needs (``gpu_count`` GPUs with at least ``gpu_memory_gib`` GiB each; a
tensor-parallel engine needs at least its ``tensor_parallel_size x pipeline_parallel_size``), and
its runs' jobs go to the smallest class that fits, so a 7B model does not hold a four-card machine.
A run whose endpoint fits no class is refused when it is created, before any job is queued.

Celery routes the message; nothing here schedules: the queue name is stored on the Job row, so a
re-sent message (jobs.sweep) goes to the same class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.core import checks
from django.utils.translation import gettext

from inference.client import EndpointError
from inference.models import ModelEndpoint
from k12vista.models import Job

_CLASS = re.compile(r"^([1-9][0-9]{0,2})x([1-9][0-9]{0,3})g$")


@dataclass(frozen=True, order=True)
class GpuClass:
    """``count`` GPUs of ``memory_gib`` GiB each; ordered smallest first (total memory, then count)."""

    total_gib: int
    count: int
    memory_gib: int

    @property
    def name(self) -> str:
        return f"{self.count}x{self.memory_gib}g"

    @property
    def queue(self) -> str:
        return f"{Job.Queue.GPU}-{self.name}"

    def fits(self, count: int, memory_gib: int) -> bool:
        return self.count >= count and self.memory_gib >= memory_gib


def parse(name: str) -> GpuClass:
    """ "4x80g" -> four GPUs of 80 GiB; ValueError for anything else."""
    found = _CLASS.match(name.strip().lower())
    if found is None:
        raise ValueError(f"{name!r} is not a GPU class: write <count>x<GiB per GPU>g, such as 1x80g or 4x80g")
    count, memory = int(found[1]), int(found[2])
    return GpuClass(total_gib=count * memory, count=count, memory_gib=memory)


def configured() -> list[GpuClass]:
    """The cluster's classes, smallest first; a malformed entry is left out (check_gpu_classes says so)."""
    classes = set()
    for name in settings.GPU_CLASSES:
        try:
            classes.add(parse(name))
        except ValueError:
            continue
    return sorted(classes)


def queues() -> list[str]:
    """The queues of the configured classes, smallest first: each has its own workers to check."""
    return [gpu_class.queue for gpu_class in configured()]


def need(endpoint: ModelEndpoint) -> tuple[int, int]:
    """(GPUs, GiB per GPU) the endpoint's engine needs: the larger of what it names and what its
    engine options ask for (a tensor-parallel engine on 4 GPUs cannot start on fewer)."""
    engine = (endpoint.default_params or {}).get("engine") or {}
    parallel = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        value = engine.get(key) if isinstance(engine, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            parallel *= value
    return max(endpoint.gpu_count, parallel, 1), endpoint.gpu_memory_gib


def queue_for(endpoint: ModelEndpoint) -> str:
    """The queue an offline-engine run of the endpoint goes to: the smallest configured class that
    fits, or the one "gpu" queue when no classes are configured. EndpointError when none fits."""
    classes = configured()
    if not classes:
        return Job.Queue.GPU
    count, memory = need(endpoint)
    for gpu_class in classes:
        if gpu_class.fits(count, memory):
            return gpu_class.queue
    raise EndpointError(
        gettext(
            "endpoint %(name)s needs %(count)s GPU(s) with %(memory)s GiB each, and no GPU class of the cluster "
            "has that (%(classes)s): lower its needs or add a class to GPU_CLASSES and start its workers"
        )
        % {
            "name": endpoint.name,
            "count": count,
            "memory": memory,
            "classes": ", ".join(c.name for c in classes),
        }  # fmt: skip
    )


def check_gpu_classes(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A malformed GPU_CLASSES entry would silently leave a class without runs; say so at start-up."""
    problems: list[checks.CheckMessage] = []
    for name in settings.GPU_CLASSES:
        try:
            parse(name)
        except ValueError as exc:
            problems.append(checks.Error(f"GPU_CLASSES: {exc}", id="inference.E004"))
    return problems
