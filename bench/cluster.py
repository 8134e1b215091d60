"""A simulated GPU cluster: M models x Q questions through real Celery workers, against the ideal (issue 28).

    DATA_DIR=/tmp/k12-cluster SECRET_KEY=... ALLOWED_HOSTS=localhost BEHIND_TLS=0 \\
    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://... \\
        .venv/bin/python -m bench.cluster --models 40 --questions 2000 --replicas 2 --workers 2 \\
        [--kill-replica-at 0.5]

It starts, in this process, one stand-in OpenAI-compatible server per replica (models x replicas
servers, each on its own port, all on one asyncio loop in a thread), registers each model as an
endpoint whose base URL and replica URLs are its servers, starts ``--workers`` real Celery worker
processes on the ``io`` queue (the queue HTTP runs go to), and runs the M models over the Q
questions as campaigns: one campaign per worker, the models dealt out in turn (a campaign is one
job on one worker: its runs are not shared between workers yet, issue 28 item 1).

Each server models a vLLM server with continuous batching: at most ``--max-batch`` requests are
generated at once (more wait in its queue); a request admitted as the b-th of the batch takes the
time to first token plus ``--tokens`` tokens at ``--token-ms x (1 + --batch-growth x (b - 1))``
each; ``--p503`` of the requests are refused at once with a 503 and ``--p-slow`` take
``--slow-factor`` times as long. ``--kill-replica-at F`` kills the second server of the first
model (its port closed, the requests it holds dropped) once F of all calls are answered: its
calls must move to the model's other servers.

The ideal is the lower bound no scheduler can beat: each model's modelled work (its calls, each a
request served in a full batch, the slow ones included at their mean) divided by its servers'
capacity (allowing for the killed server's time alive), the largest over the models; with
equal models that is the total work over the total capacity. It prints the makespan (from the
campaigns' start to the last answer) beside it, each endpoint's utilisation (the mean share of its
servers' batch slots in use over the makespan), the orchestration's CPU per call (the worker
processes'), and checks in the database that every question of every model has exactly one
answer, none lost or failed, and against the servers' own log that no answer was generated
twice. It ends with the line ``makespan/ideal: <ratio>``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")

ROOT = Path(__file__).resolve().parent.parent
MARK = re.compile(rb"\[Q (cl[0-9a-z]+-\d+)\]")  # each question's text carries its id: the servers' log


@dataclass
class Latency:
    ttft: float
    tokens: int
    token_s: float
    growth: float
    max_batch: int
    p503: float
    p_slow: float
    slow_factor: float

    def service(self, batch: int) -> float:
        """Seconds a request takes once admitted as the ``batch``-th in the batch."""
        return self.ttft + self.tokens * self.token_s * (1 + self.growth * (batch - 1))

    def work(self) -> float:
        """Server-seconds one call costs at full batch (a batch slot for its mean service time)."""
        mean = self.service(self.max_batch) * (1 + self.p_slow * (self.slow_factor - 1))
        return mean / self.max_batch


@dataclass
class Replica:
    """One stand-in server: its batch, its counters and the integral of its batch in use."""

    model: str
    latency: Latency
    rng: random.Random
    url: str = ""
    active: int = 0
    served: collections.Counter = field(default_factory=collections.Counter)
    refused: int = 0
    slow: int = 0
    dropped: int = 0
    alive: bool = True
    slot_seconds: float = 0.0
    since: float = field(default_factory=time.monotonic)
    server: asyncio.Server | None = None
    writers: set = field(default_factory=set)
    batch: asyncio.Semaphore | None = None

    def account(self, change: int) -> None:
        now = time.monotonic()
        self.slot_seconds += self.active * (now - self.since)
        self.since = now
        self.active += change

    async def complete(self, body: bytes) -> tuple[int, bytes]:
        if self.rng.random() < self.latency.p503:
            self.refused += 1
            return 503, b'{"error": {"message": "server overloaded", "type": "overloaded", "code": 503}}'
        assert self.batch is not None
        async with self.batch:  # a full batch: the request waits in the server's queue, as in vLLM
            self.account(+1)
            try:
                seconds = self.latency.service(self.active)
                if self.rng.random() < self.latency.p_slow:
                    self.slow += 1
                    seconds *= self.latency.slow_factor
                await asyncio.sleep(seconds)
            finally:
                self.account(-1)
        tokens = self.latency.tokens
        reply = {
            "id": "c", "object": "chat.completion", "created": 0, "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "步骤1：得 $x=2$。\n最终答案：B"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": tokens, "total_tokens": 120 + tokens},
        }  # fmt: skip
        return 200, json.dumps(reply).encode()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """HTTP/1.1 with keep-alive, as much as the OpenAI client speaks."""
        self.writers.add(writer)
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length) if length else b""
                status, payload = await self.complete(body)
                mark = MARK.search(body)
                if writer.is_closing() or not self.alive:
                    self.dropped += 1
                    return
                if status == 200 and mark:
                    self.served[mark.group(1).decode()] += 1
                reason = b"OK" if status == 200 else b"Service Unavailable"
                writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (status, reason, len(payload), payload))  # fmt: skip
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            self.writers.discard(writer)
            writer.close()

    async def start(self) -> None:
        self.batch = asyncio.Semaphore(self.latency.max_batch)
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0, backlog=1024)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def kill(self) -> None:
        """The server dies: its port closes and the requests it holds are dropped."""
        self.alive = False
        self.account(0)
        assert self.server is not None
        self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()


class Farm:
    """Every stand-in server, on one asyncio loop in a thread of this process."""

    def __init__(self, models: list[str], replicas: int, latency: Latency, seed: int) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        rng = random.Random(seed)
        self.replicas = {m: [Replica(m, latency, random.Random(rng.random())) for _ in range(replicas)] for m in models}
        self.call(self._start())

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _start(self) -> None:
        for servers in self.replicas.values():
            for replica in servers:
                await replica.start()

    def kill(self, replica: Replica) -> None:
        self.call(replica.kill())

    def settle(self) -> None:
        """Brings every server's batch integral up to now."""
        self.loop.call_soon_threadsafe(lambda: [r.account(0) for s in self.replicas.values() for r in s if r.alive])
        time.sleep(0.05)


def ideal_seconds(calls: int, latency: Latency, servers: int, killed_at: float | None) -> float:
    """The shortest time ``calls`` can take on ``servers`` servers, one of which dies at ``killed_at``."""
    work = calls * latency.work()
    if killed_at is None or work <= servers * killed_at or servers == 1:
        return work / servers
    return killed_at + (work - servers * killed_at) / (servers - 1)


def start_worker(n: int, logs: Path, env: dict[str, str], profile: str | None) -> subprocess.Popen:
    log = (logs / f"worker-{n}.log").open("wb")
    # --profile: each worker under cProfile (its statistics written when it stops).
    profiled = ["-m", "cProfile", "-o", str(Path(profile) / f"worker-{n}.prof")] if profile else []
    return subprocess.Popen(
        [sys.executable, *profiled, "-m", "celery", "-A", "k12vista", "worker", "-Q", "io", "--pool", "solo",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO",
         "--hostname", f"cluster-{n}-{os.getpid()}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def wait_ready(workers: list[subprocess.Popen], logs: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    for n, process in enumerate(workers):
        while b" ready." not in (logs / f"worker-{n}.log").read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"worker {n} did not start:\n{(logs / f'worker-{n}.log').read_text()[-3000:]}")
            time.sleep(0.2)


def cpu_seconds(process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def main() -> None:  # noqa: PLR0915 (one linear script: set up, run, check, print)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--replicas", type=int, default=2, help="servers per model")
    parser.add_argument("--workers", type=int, default=2, help="Celery io worker processes")
    parser.add_argument("--kill-replica-at", type=float, default=None, help="fraction of the calls answered")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--ttft", type=float, default=0.2, help="seconds to the first token")
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per call")
    parser.add_argument("--token-ms", type=float, default=40.0, help="ms per token alone in the batch")
    parser.add_argument("--batch-growth", type=float, default=0.1, help="per-token time growth per request")
    parser.add_argument("--p503", type=float, default=0.005)
    parser.add_argument("--p-slow", type=float, default=0.01)
    parser.add_argument("--slow-factor", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", metavar="DIR", help="run the workers under cProfile, statistics into DIR")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before giving up")
    args = parser.parse_args()
    if args.kill_replica_at is not None and (args.replicas < 2 or not 0 < args.kill_replica_at < 1):
        parser.error("--kill-replica-at needs --replicas 2 or more and a fraction between 0 and 1")
    if min(args.models, args.questions, args.replicas, args.workers, args.max_batch, args.tokens) < 1:
        parser.error("sizes are at least 1")

    import django

    django.setup()
    import psutil
    from django.conf import settings
    from django.core.management import call_command
    from django.db import transaction
    from django.db.models import Count

    from annotation.models import Question
    from inference.campaigns import start_campaign
    from inference.models import ModelEndpoint, Response
    from inference.services import save_endpoint
    from k12vista.models import Job
    from k12vista.vocabulary import stage_of_grade

    call_command("migrate", verbosity=0)
    latency = Latency(
        ttft=args.ttft, tokens=args.tokens, token_s=args.token_ms / 1000, growth=args.batch_growth,
        max_batch=args.max_batch, p503=args.p503, p_slow=args.p_slow, slow_factor=args.slow_factor,
    )  # fmt: skip
    tag = f"cl{time.time_ns() // 1000:x}"
    Question.objects.bulk_create(
        [Question(hash_id=f"{tag}-{i:06d}", subject="math", grade=9, stage=stage_of_grade(9),
                  qtype="multiple_choice", text=f"[Q {tag}-{i:06d}] 已知 $x^2=4$，$x>0$，求 $x$。", answers=["B"],
                  options=[{"label": c, "text": f"${n}$"} for c, n in zip("ABCD", (1, 2, 3, 4), strict=True)])
         for i in range(args.questions)],
        batch_size=2000,
    )  # fmt: skip
    names = [f"{tag}-m{m:02d}" for m in range(args.models)]
    farm = Farm(names, args.replicas, latency, args.seed)
    urls = [replica.url for servers in farm.replicas.values() for replica in servers]
    # The stand-ins listen on free ports, outside the default allowlist: admitted by name, here and
    # on the workers, so every URL still passes the studio's checks.
    settings.MODEL_URL_ALLOWLIST = [*settings.MODEL_URL_ALLOWLIST, *urls]
    endpoints = [
        save_endpoint(endpoint=ModelEndpoint(
            name=name, base_url=servers[0].url, replica_urls=[r.url for r in servers[1:]], model_name=name,
            max_concurrency=args.max_batch, accepts_images=False, supports_json_schema=False,
            default_params={"max_tokens": args.tokens}, timeout_seconds=600,
        ), user=None)
        for name, servers in farm.replicas.items()
    ]  # fmt: skip

    logs = Path(tempfile.mkdtemp(prefix="k12vista-cluster-"))
    env = {**os.environ, "MODEL_URL_ALLOWLIST": ",".join(settings.MODEL_URL_ALLOWLIST)}
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)  # else cProfile cannot write and says nothing
    workers = [start_worker(n, logs, env, args.profile) for n in range(args.workers)]
    try:
        wait_ready(workers, logs)
        processes = [psutil.Process(worker.pid) for worker in workers]
        cpu_before = [cpu_seconds(p) for p in processes]
        here_before = cpu_seconds(psutil.Process())
        total = args.models * args.questions
        started = time.monotonic()
        with transaction.atomic():  # the jobs are queued when this commits
            campaigns = [
                start_campaign(name=f"{tag} part {w}", endpoints=endpoints[w :: args.workers], mode="direct",
                               filters={"q": f"[Q {tag}-"}, user=None)
                for w in range(min(args.workers, args.models))
            ]  # fmt: skip
        job_ids = [c.job_id for c in campaigns]
        answered = Response.objects.filter(run__campaign__in=campaigns).exclude(status=Response.Status.PENDING)
        killed, killed_at, last_print = None, None, started
        while True:
            time.sleep(0.25)
            jobs = list(Job.objects.filter(pk__in=job_ids).values_list("status", flat=True))
            if all(status in (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED) for status in jobs):
                break
            now = time.monotonic()
            if now - started > args.timeout:
                sys.exit(f"gave up after {args.timeout:.0f} s")
            due = args.kill_replica_at is not None and killed is None
            if due or now - last_print >= 15:
                done = answered.count()
                if now - last_print >= 15:
                    print(f"  {now - started:6.1f} s: {done:,} of {total:,} answered", flush=True)
                    last_print = now
                if due and done >= args.kill_replica_at * total:
                    killed, killed_at = farm.replicas[names[0]][1], now - started
                    farm.kill(killed)
                    print(f"  {killed_at:6.1f} s: killed {names[0]}'s second server ({killed.url})", flush=True)
        makespan = time.monotonic() - started
        farm.settle()
        worker_cpu = sum(cpu_seconds(p) - before for p, before in zip(processes, cpu_before, strict=True))
        here_cpu = cpu_seconds(psutil.Process()) - here_before
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()

    # --- the database's count: exactly one answer per model and question, none failed ---
    rows = Response.objects.filter(run__campaign__in=campaigns)
    per_pair = rows.values("run", "question").annotate(n=Count("id"))
    duplicated = sum(row["n"] - 1 for row in per_pair if row["n"] > 1)
    statuses = dict(rows.values_list("status").annotate(n=Count("id")))
    ok = statuses.get(Response.Status.OK, 0)
    failed = statuses.get(Response.Status.FAILED, 0)
    pairs = len(per_pair)
    lost = total - ok
    # --- the servers' log: each answer generated once (none computed twice and thrown away) ---
    generated = collections.Counter()
    for servers in farm.replicas.values():
        for replica in servers:
            generated.update({(replica.model, q): n for q, n in replica.served.items()})
    regenerated = sum(n - 1 for n in generated.values() if n > 1)
    endpoints_by_run = dict(rows.values_list("run", "run__endpoint__name").distinct())
    ok_pairs = rows.filter(status=Response.Status.OK).values_list("run", "question__hash_id")
    unserved = sum(1 for run, q in ok_pairs.iterator() if (endpoints_by_run[run], q) not in generated)
    statuses_jobs = dict(Job.objects.filter(pk__in=job_ids).values_list("status").annotate(n=Count("id")))

    servers = args.replicas
    ideals = [ideal_seconds(args.questions, latency, servers, killed_at if name == names[0] else None)
              for name in names]  # fmt: skip
    ideal = max(ideals)
    plain_ideal = total * latency.work() / (args.models * servers)
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
    print(f"{args.models} models x {args.questions} questions = {total:,} calls; {servers} servers per model, "
          f"{args.workers} io workers; database {engine}, broker {broker}")  # fmt: skip
    print(f"latency model: ttft {latency.ttft * 1000:.0f} ms + {latency.tokens} tokens x {args.token_ms:.0f} ms "
          f"x (1 + {latency.growth} (b-1)), max batch {latency.max_batch}, 503 {latency.p503:.1%}, "
          f"slow {latency.p_slow:.1%} x{latency.slow_factor:g}: "
          f"{latency.work() * 1000:.1f} server-ms per call")  # fmt: skip
    if killed is not None:
        print(f"killed {names[0]}'s second server at {killed_at:.1f} s: {killed.dropped} requests dropped")
    print(f"jobs: {statuses_jobs}")
    print(f"calls: {ok:,} answered, {failed} failed, {lost} lost, {duplicated} duplicated (database: {pairs:,} "
          f"model x question rows of {total:,}); {regenerated} generated twice, {unserved} answers no server "
          f"generated (servers' log)")  # fmt: skip
    refused = sum(r.refused for s in farm.replicas.values() for r in s)
    slow = sum(r.slow for s in farm.replicas.values() for r in s)
    print(f"servers: {refused} refused with 503, {slow} slow replies")
    print("utilisation (batch slots in use over the makespan):")
    for name, group in farm.replicas.items():
        shares = [r.slot_seconds / (latency.max_batch * makespan) for r in group]
        print(f"  {name}: {sum(shares) / len(shares):6.1%}  ({', '.join(f'{s:.0%}' for s in shares)})")
    print(f"orchestration CPU: {worker_cpu * 1000 / total:.2f} ms per call in the workers "
          f"({worker_cpu:.1f} s); stand-in servers and this script "
          f"{here_cpu * 1000 / total:.2f} ms per call")  # fmt: skip
    print(f"ideal: {ideal:.1f} s (work / capacity{', allowing for the killed server' if killed else ''}; "
          f"{plain_ideal:.1f} s with every server alive)")  # fmt: skip
    print(f"makespan: {makespan:.1f} s")
    if failed or lost or duplicated or regenerated or unserved:
        print("FAULT: calls lost, failed or duplicated")
    print(f"makespan/ideal: {makespan / ideal:.2f}")
    if failed or lost or duplicated or regenerated or unserved:
        sys.exit(1)


if __name__ == "__main__":
    main()
