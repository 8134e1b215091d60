"""How fast two runs sharing one endpoint's limit hand slots to each other.

    MODEL_URL_ALLOWLIST='http://127.0.0.1:*' DATA_DIR=/tmp/k12-handoff SECRET_KEY=... ALLOWED_HOSTS=localhost \\
        BEHIND_TLS=0 .venv/bin/python -m bench.slot_handoff --requests 2000 --rounds 2

The same instant local server as bench/inference_overhead.py; in each round a
bare ``openai.AsyncOpenAI`` loop under a semaphore, then two runs with their own
``calls.SharedSlots`` on one endpoint (half the requests each, all queued at
once, as in that bench). Every request's start and end are recorded, which gives
numbers less moved by the machine's load than throughput:

* slots busy: the share of the limit's slot-seconds spent inside requests;
* the second run's wait: from the first request sent to the other run's first;
* the tail: from the first run's last answer until the other run has more than
  half the limit in flight (it may then take every slot).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")

MESSAGES = [{"role": "user", "content": "已知 $x^2=4$，$x>0$，求 $x$。"}]


async def bare(base_url: str, requests: int, limit: int) -> list[tuple[int, float, float]]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    slots = asyncio.Semaphore(limit)
    log: list[tuple[int, float, float]] = []

    async def one():
        async with slots:
            started = time.perf_counter()
            await client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=16)
            log.append((0, started, time.perf_counter()))

    async with asyncio.TaskGroup() as group:
        for _ in range(requests):
            group.create_task(one())
    await client.close()
    return log


async def two_runs(base_url: str, requests: int, endpoint) -> list[tuple[int, float, float]]:
    import openai

    from inference import calls

    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    runs = [calls.SharedSlots(endpoint), calls.SharedSlots(endpoint)]
    log: list[tuple[int, float, float]] = []

    async def one(n: int):
        async with runs[n]:
            started = time.perf_counter()
            await client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=16)
            log.append((n, started, time.perf_counter()))

    async with asyncio.TaskGroup() as group:
        for n in range(requests):
            group.create_task(one(n % 2))
    for slots in runs:
        await slots.close()
    await client.close()
    return log


def in_flight(log, run: int, moment: float) -> int:
    return sum(1 for n, start, end in log if n == run and start <= moment < end)


def describe(name: str, log, limit: int, two: bool) -> str:
    first, last = min(s for _, s, _ in log), max(e for _, _, e in log)
    busy = sum(e - s for _, s, e in log) / ((last - first) * limit)
    line = f"{name:9s} {len(log) / (last - first):7.1f} req/s, slots busy {busy:4.2f}"
    if two:
        starts = {n: min(s for k, s, _ in log if k == n) for n in (0, 1)}
        ends = {n: max(e for k, _, e in log if k == n) for n in (0, 1)}
        early, late = sorted((0, 1), key=lambda n: ends[n])
        # The later run's in-flight count, sampled every 10 ms after the earlier one's end.
        moments = [ends[early] + k * 0.01 for k in range(int((ends[late] - ends[early]) / 0.01))]
        grown = next((t for t in moments if in_flight(log, late, t) > limit // 2), None)
        tail = f"{grown - ends[early]:5.2f} s" if grown is not None else "never"
        line += (f"; second run's wait {abs(starts[1] - starts[0]):5.2f} s; tail {tail} "
                 f"(runs ended {abs(ends[1] - ends[0]):4.2f} s apart)")  # fmt: skip
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    import django

    django.setup()
    from asgiref.sync import async_to_sync
    from django.core.management import call_command

    from bench.inference_overhead import serve
    from inference import services
    from inference.models import ModelEndpoint

    call_command("migrate", verbosity=0)
    base_url = serve()
    endpoint = services.save_endpoint(
        endpoint=ModelEndpoint(name=f"handoff-{time.time_ns()}", base_url=base_url, model_name="m",
                               max_concurrency=args.concurrency, accepts_images=False),
        user=None,
    )  # fmt: skip
    asyncio.run(bare(base_url, 200, args.concurrency))  # warm: the first connections
    for n in range(1, args.rounds + 1):
        plain = asyncio.run(bare(base_url, args.requests, args.concurrency))
        print(f"round {n}: " + describe("bare", plain, args.concurrency, two=False))
        shared = async_to_sync(two_runs)(base_url, args.requests, endpoint)
        print(f"round {n}: " + describe("two runs", shared, args.concurrency, two=True))


if __name__ == "__main__":
    main()
