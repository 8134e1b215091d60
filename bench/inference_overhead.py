"""Orchestration overhead of an inference run against a bare async client loop.

    DATA_DIR=/tmp/k12-infbench SECRET_KEY=... ALLOWED_HOSTS=localhost BEHIND_TLS=0 \\
        .venv/bin/python -m bench.inference_overhead --requests 2000 --concurrency 16

A local OpenAI-compatible server (aiohttp-free: a threaded http.server answering
instantly with a fixed completion) takes both loads in the same process run:
first a bare ``openai.AsyncOpenAI`` loop with a semaphore, then a real inference
run over the same number of questions through the job handler (rows, prompts,
retries, saving every answer, progress). It prints both throughputs and their
ratio (in rounds, each a bare loop then a fresh run); the target is at least 0.9.

It also measures the shared per-endpoint limiter (inference.calls.SharedSlots,
database leases held across runs) on the same bare loop: ``limited loop`` is the
bare loop with every request taking a shared slot instead of a local
semaphore; its ratio to the bare loop is the limiter's cost (target: at least
0.9, i.e. no more than 10%).

``two runs`` is the campaign case (issue 12): two runs on one endpoint, each
with its own SharedSlots (so each leases its fair share from the database and
gives slots back as the other wants them), sending half the requests each at
once; their combined throughput against one bare loop is the cost of sharing
the limit across runs (target: at least 0.9).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")

REPLY = json.dumps({
    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "步骤1：得 $x=2$。\\n最终答案：B"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132},
}).encode()  # fmt: skip


class Instant(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as vllm serve does

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 refuses bursts of new connections
    daemon_threads = True


def serve() -> str:
    """Starts the instant server on a free port and admits that one server to MODEL_URL_ALLOWLIST
    (in this process only): the default list names the ports of local model servers (8000-8010),
    which a free port is not, and the endpoint must pass the studio's checks like any other."""
    from django.conf import settings

    server = Server(("127.0.0.1", 0), Instant)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_port}/v1"
    settings.MODEL_URL_ALLOWLIST = [*settings.MODEL_URL_ALLOWLIST, base_url]
    return base_url


# CPU milliseconds per request of the last loop (this process: client, limiter and
# the in-process server). Less moved by other processes on the machine than
# wall-clock throughput, so the limiter's cost is also given as a CPU ratio.
LAST_CPU_MS = [0.0]


async def bare_loop(base_url: str, requests: int, concurrency: int) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    limit = asyncio.Semaphore(concurrency)
    messages = [{"role": "user", "content": "已知 $x^2=4$，$x>0$，求 $x$。"}]

    async def one():
        async with limit:
            await client.chat.completions.create(model="m", messages=messages, max_tokens=16)

    started, cpu = time.perf_counter(), time.process_time()
    async with asyncio.TaskGroup() as group:
        for _ in range(requests):
            group.create_task(one())
    elapsed = time.perf_counter() - started
    LAST_CPU_MS[0] = (time.process_time() - cpu) * 1000 / requests
    await client.close()
    return requests / elapsed


async def limited_loop(base_url: str, requests: int, endpoint) -> float:
    """The bare loop, with the shared limiter in place of the local semaphore."""
    import openai

    from inference import calls

    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    slots = calls.SharedSlots(endpoint)
    messages = [{"role": "user", "content": "已知 $x^2=4$，$x>0$，求 $x$。"}]

    async def one():
        async with slots:
            await client.chat.completions.create(model="m", messages=messages, max_tokens=16)

    started, cpu = time.perf_counter(), time.process_time()
    async with asyncio.TaskGroup() as group:
        for _ in range(requests):
            group.create_task(one())
    elapsed = time.perf_counter() - started
    LAST_CPU_MS[0] = (time.process_time() - cpu) * 1000 / requests
    await slots.close()
    await client.close()
    return requests / elapsed


async def two_runs_loop(base_url: str, requests: int, endpoint) -> float:
    """Two runs sharing the endpoint's limit, each with half the requests, at the same time."""
    import openai

    from inference import calls

    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    runs = [calls.SharedSlots(endpoint), calls.SharedSlots(endpoint)]
    messages = [{"role": "user", "content": "已知 $x^2=4$，$x>0$，求 $x$。"}]

    async def one(slots):
        async with slots:
            await client.chat.completions.create(model="m", messages=messages, max_tokens=16)

    started, cpu = time.perf_counter(), time.process_time()
    async with asyncio.TaskGroup() as group:
        for n in range(requests):
            group.create_task(one(runs[n % 2]))
    elapsed = time.perf_counter() - started
    LAST_CPU_MS[0] = (time.process_time() - cpu) * 1000 / requests
    for slots in runs:
        await slots.close()
    await client.close()
    return requests / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5, help="bare / limited pairs for the limiter's cost")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from annotation.models import Question
    from inference import services
    from inference.models import InferenceRun, ModelEndpoint
    from k12vista.jobs import execute_job
    from k12vista.vocabulary import stage_of_grade

    call_command("migrate", verbosity=0)
    have = Question.objects.count()
    Question.objects.bulk_create(
        Question(hash_id=f"ovh{i:07d}", subject="math", grade=9, stage=stage_of_grade(9), qtype="multiple_choice",
                 text="已知 $x^2=4$，$x>0$，求 $x$。", answers=["B"],
                 options=[{"label": c, "text": f"${n}$"} for c, n in zip("ABCD", (1, 2, 3, 4), strict=True)])
        for i in range(have, args.requests)
    )  # fmt: skip
    base_url = serve()
    bare = asyncio.run(bare_loop(base_url, args.requests, args.concurrency))
    endpoint = services.save_endpoint(
        endpoint=ModelEndpoint(name=f"bench-{time.time_ns()}", base_url=base_url, model_name="m",
                               max_concurrency=args.concurrency, accepts_images=False,
                               default_params={"max_tokens": 16}),
        user=None,
    )  # fmt: skip
    from asgiref.sync import async_to_sync

    # The machine's load drifts within a run: the limiter is measured in rounds,
    # each a bare loop then a limited loop back to back, alternating which goes
    # first; the ratio is the median of the rounds'.
    rounds, shared_rounds = [], []
    for n in range(args.rounds):

        def measure_bare():
            return asyncio.run(bare_loop(base_url, args.requests, args.concurrency)), LAST_CPU_MS[0]

        def measure_limited():
            return async_to_sync(limited_loop)(base_url, args.requests, endpoint), LAST_CPU_MS[0]

        def measure_two():
            return async_to_sync(two_runs_loop)(base_url, args.requests, endpoint), LAST_CPU_MS[0]

        if n % 2:
            two, two_cpu = measure_two()
            limited, limited_cpu = measure_limited()
            plain, plain_cpu = measure_bare()
        else:
            plain, plain_cpu = measure_bare()
            limited, limited_cpu = measure_limited()
            two, two_cpu = measure_two()
        rounds.append((plain, limited, plain_cpu, limited_cpu))
        shared_rounds.append((plain, two, plain_cpu, two_cpu))
    from unittest import mock

    # The whole run, also in rounds: a bare loop, then a fresh run over the same
    # questions, back to back (one bare loop at the start drifted from the run
    # measured minutes later with the machine's load).
    run_rounds = []
    for _ in range(args.rounds):
        plain = asyncio.run(bare_loop(base_url, args.requests, args.concurrency))
        plain_cpu = LAST_CPU_MS[0]
        with mock.patch("k12vista.tasks.run_job.apply_async"):  # run the job here, not on a worker
            run = services.start_inference_run(endpoint=endpoint, mode="direct", filters={"q": ""}, user=None)
        started, cpu = time.perf_counter(), time.process_time()
        execute_job(run.job_id)
        elapsed = time.perf_counter() - started
        counts = InferenceRun.objects.get(pk=run.pk).counts()
        run_cpu = (time.process_time() - cpu) * 1000 / args.requests
        run_rounds.append((plain, counts["ok"] / elapsed, plain_cpu, run_cpu, counts))
    engine = django.conf.settings.DATABASES["default"]["ENGINE"]
    print(f"requests {args.requests}, concurrency {args.concurrency}, database {engine}")
    print(f"bare async loop:  {bare:8.1f} requests/s (first, alone)")
    for n, (plain, studio, plain_cpu, run_cpu, counts) in enumerate(run_rounds, 1):
        print(
            f"run round {n}: bare {plain:7.1f} req/s {plain_cpu:5.2f} CPU ms/req; inference run {studio:7.1f} req/s "
            f"{run_cpu:5.2f} CPU ms/req ({counts})"
        )
    run_ratio = statistics.median(studio / plain for plain, studio, _, _, _ in run_rounds)
    run_cpu_ratio = statistics.median(plain_cpu / run_cpu for _, _, plain_cpu, run_cpu, _ in run_rounds)
    print(f"ratio:            {run_ratio:8.2f}  (inference run / bare loop, median of the rounds; target >= 0.9)")
    print(f"run CPU ratio:    {run_cpu_ratio:8.2f}  (bare CPU per request / the run's, median)")
    for n, (plain, limited, plain_cpu, limited_cpu) in enumerate(rounds, 1):
        print(
            f"round {n}: bare {plain:7.1f} req/s {plain_cpu:5.2f} CPU ms/req; with the shared limiter "
            f"{limited:7.1f} req/s {limited_cpu:5.2f} CPU ms/req"
        )
    ratio = statistics.median(limited / plain for plain, limited, _, _ in rounds)
    cpu_ratio = statistics.median(plain_cpu / limited_cpu for _, _, plain_cpu, limited_cpu in rounds)
    print(f"limiter ratio:    {ratio:8.2f}  (wall-clock throughput, median of the rounds; target >= 0.9)")
    print(f"limiter CPU ratio:{cpu_ratio:8.2f}  (bare CPU per request / limited, median; target >= 0.9)")
    for n, (_plain, two, _plain_cpu, two_cpu) in enumerate(shared_rounds, 1):
        print(f"round {n}: two runs sharing the limit {two:7.1f} req/s {two_cpu:5.2f} CPU ms/req")
    two_ratio = statistics.median(two / plain for plain, two, _, _ in shared_rounds)
    two_cpu_ratio = statistics.median(plain_cpu / two_cpu for _, _, plain_cpu, two_cpu in shared_rounds)
    print(f"two runs ratio:   {two_ratio:8.2f}  (two runs sharing the limit / one bare loop, median; target >= 0.9)")
    print(f"two runs CPU ratio:{two_cpu_ratio:7.2f}  (bare CPU per request / two runs', median)")


if __name__ == "__main__":
    main()
