"""A shift of the whole team against the studio, with its services failing on schedule.

    nice -n 10 .venv/bin/python -m bench.load --seconds 120 \
        --database postgres://postgres@127.0.0.1:5432/k12_ops_bench

Production-like: DEBUG off, gunicorn (k12vista/gunicorn_conf.py, 3 workers x 4
threads) on loopback, PostgreSQL (the database named is DROPPED and created
afresh, demo data loaded), a Redis of its own on a free port (broker and cache,
AOF on), one Celery worker. Twenty annotators log in at once, then label
PEBench items (half on the pages, half through the API: next, draft, submit)
and review OCR (claim, autosave, accept); two inspectors and a researcher read
their pages and the API. Scheduled faults, at fractions of the run:

- 15 %: the Celery worker is SIGKILLed mid-job and restarted (as systemd would);
  the job must be taken over within JOB_STALE_AFTER_SECONDS plus one sweep.
- 40 %: Redis is killed for 30 s (cache and broker); a job is started from the
  Settings page during the outage and must finish after it.
- 75 %: gunicorn is reloaded (HUP); no page may take over a second.

It prints per-endpoint p50/p95/p99, errors by kind inside and outside the fault
windows, login p95 for twenty at once, the takeover time, and a data check:
every acknowledged submit and accept is in the database exactly once.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-shift-password-7"  # noqa: S105 (throwaway accounts in a throwaway database)
STALE = 20  # JOB_STALE_AFTER_SECONDS for the run
SWEEP = 5  # JOB_SWEEP_INTERVAL_SECONDS
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


# --- what was measured ---------------------------------------------------------


@dataclass
class Record:
    lock: threading.Lock = field(default_factory=threading.Lock)
    times: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    errors: collections.Counter = field(default_factory=collections.Counter)
    windows: list[tuple[str, float, float]] = field(default_factory=list)  # (fault, start, end) monotonic
    submitted: list[tuple[str, int]] = field(default_factory=list)  # (username, labelling task id)
    accepted: list[tuple[str, int]] = field(default_factory=list)  # (username, assignment id)
    logins: list[float] = field(default_factory=list)
    slow_pages_in_reload: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    takeover_job: int | None = None
    page_times: list[tuple[float, float]] = field(default_factory=list)  # (started, seconds) of every page

    def in_window(self, at: float) -> str | None:
        for name, start, end in self.windows:
            if start <= at <= end:
                return name
        return None

    def add(self, endpoint: str, started: float, seconds: float, error: str | None) -> None:
        with self.lock:
            if error:
                self.errors[(self.in_window(started) or "outside faults", endpoint, error)] += 1
            else:
                self.times[endpoint].append(seconds)
            if not error and not endpoint.startswith("api"):
                self.page_times.append((started, seconds))
            if self.in_window(started) == "gunicorn reload" and seconds > 1 and not endpoint.startswith("api"):
                self.slow_pages_in_reload.append((endpoint, seconds))


class Client:
    """One person's browser (cookies, CSRF) or script (token)."""

    def __init__(self, base: str, record: Record, token: str | None = None) -> None:
        self.base = base
        self.record = record
        self.http = requests.Session()
        if token:
            self.http.headers["Authorization"] = f"Token {token}"

    def call(self, endpoint: str, method: str, path: str, *, ok=(200, 302), **kwargs) -> requests.Response | None:
        kwargs.setdefault("allow_redirects", False)
        kwargs.setdefault("timeout", 30)
        started = time.monotonic()
        try:
            response = self.http.request(method, self.base + path, **kwargs)
        except requests.RequestException as exc:
            self.record.add(endpoint, started, 0, f"connection: {type(exc).__name__}")
            return None
        seconds = time.monotonic() - started
        if response.status_code not in ok:
            self.record.add(endpoint, started, seconds, f"HTTP {response.status_code}")
            return None
        self.record.add(endpoint, started, seconds, None)
        return response

    def csrf(self, html: str) -> str:
        found = CSRF.search(html)
        return found.group(1) if found else self.http.cookies.get("csrftoken", "")

    def login(self, username: str) -> bool:
        page = self.call("login page", "GET", "/login/")
        if page is None:
            return False
        started = time.monotonic()
        done = self.call("login", "POST", "/login/", data={"username": username, "password": PASSWORD,
                                                            "csrfmiddlewaretoken": self.csrf(page.text)})  # fmt: skip
        with self.record.lock:
            self.record.logins.append(time.monotonic() - started)
        return done is not None and done.status_code == 302


# --- the people ------------------------------------------------------------------


def label_on_pages(client: Client, username: str, rng: random.Random) -> None:
    queue = client.call("label queue", "GET", "/pem/label/")
    if queue is None:
        return
    taken = client.call("label next", "POST", "/pem/label/next/", data={"csrfmiddlewaretoken": client.csrf(queue.text)})
    if (
        taken is None
        or "/pem/label/" not in taken.headers.get("Location", "")
        or taken.headers["Location"].endswith("/pem/label/")
    ):
        return
    path = urlsplit(taken.headers["Location"]).path
    page = client.call("label task", "GET", path)
    if page is None:
        return
    positions = sorted({int(p) for p in re.findall(r'name="label-(\d+)"', page.text)})
    version = re.search(r'name="version" value="(\d+)"', page.text)
    if not positions or not version:
        return
    form = {"csrfmiddlewaretoken": client.csrf(page.text), "version": version.group(1), "action": "save"}
    form |= {f"label-{p}": "CS" for p in positions[:-1]}
    time.sleep(rng.uniform(1, 3))  # reading the steps
    saved = client.call("label draft", "POST", path, data=form)
    if saved is None:
        return
    page = client.call("label task", "GET", path)
    version = re.search(r'name="version" value="(\d+)"', page.text) if page else None
    if not version:
        return
    form |= {"version": version.group(1), "action": "submit", f"label-{positions[-1]}": "CS"}
    time.sleep(rng.uniform(0.5, 2))
    done = client.call("label submit", "POST", path, data=form)
    if done is not None and done.status_code == 302 and done.headers["Location"].endswith("/pem/label/"):
        with client.record.lock:
            client.record.submitted.append((username, int(path.rstrip("/").rsplit("/", 1)[-1])))


def label_through_the_api(client: Client, username: str, rng: random.Random) -> None:
    taken = client.call("api task next", "POST", "/api/pem/tasks/next/", ok=(200, 204))
    if taken is None or taken.status_code == 204:
        return
    task = taken.json()
    positions = [step["position"] for step in task["item"]["steps"]]
    draft = {str(p): {"label": "CS", "reason": ""} for p in positions[:-1]}
    time.sleep(rng.uniform(1, 3))
    saved = client.call("api task draft", "PUT", f"/api/pem/tasks/{task['id']}/draft/",
                        json={"version": task["version"], "draft": draft})  # fmt: skip
    if saved is None:
        return
    draft[str(positions[-1])] = {"label": "CS", "reason": ""}
    time.sleep(rng.uniform(0.5, 2))
    done = client.call("api task submit", "POST", f"/api/pem/tasks/{task['id']}/submit/",
                       json={"version": saved.json()["version"], "draft": draft})  # fmt: skip
    if done is not None:
        with client.record.lock:
            client.record.submitted.append((username, task["id"]))


def form_fields(html: str, form_id: str) -> dict[str, str]:
    """The values a browser would post from the form with this id."""
    start = html.find(f'id="{form_id}"')
    body = html[start : html.find("</form>", start)]
    fields: dict[str, str] = {}
    for tag in re.finditer(r"<input\b[^>]*>", body):
        name = re.search(r'name="([^"]+)"', tag.group(0))
        kind = re.search(r'type="([^"]+)"', tag.group(0))
        if not name or (kind and kind.group(1) in ("submit", "button", "file")):
            continue
        if kind and kind.group(1) in ("checkbox", "radio") and "checked" not in tag.group(0):
            continue
        value = re.search(r'value="([^"]*)"', tag.group(0))
        fields[name.group(1)] = unescape(value.group(1)) if value else ""
    for tag in re.finditer(r'<textarea\b[^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', body, re.S):
        fields[tag.group(1)] = unescape(tag.group(2))
    for tag in re.finditer(r'<select\b[^>]*name="([^"]+)"[^>]*>(.*?)</select>', body, re.S):
        chosen = re.search(r'<option value="([^"]*)"[^>]*selected', tag.group(2)) or re.search(
            r'<option value="([^"]*)"', tag.group(2)
        )
        fields[tag.group(1)] = unescape(chosen.group(1)) if chosen else ""
    return fields


def unescape(text: str) -> str:
    import html

    return html.unescape(text)


def review_ocr(client: Client, username: str, rng: random.Random) -> None:
    queue = client.call("annotate queue", "GET", "/annotate/")
    if queue is None:
        return
    claimed = client.call("ocr claim", "POST", "/annotate/claim/",
                          data={"task": "ocr_review", "csrfmiddlewaretoken": client.csrf(queue.text)})  # fmt: skip
    if claimed is None or "/review/" not in claimed.headers.get("Location", ""):
        return
    path = urlsplit(claimed.headers["Location"]).path
    page = client.call("ocr review", "GET", path)
    if page is None:
        return
    form = form_fields(page.text, "question-form")
    form["text"] = form.get("text", "") + " "  # a small correction, autosaved as a browser would
    time.sleep(rng.uniform(1, 3))
    saved = client.call("ocr autosave", "POST", path, data={**form, "action": "autosave"},
                        headers={"HX-Request": "true", "X-CSRFToken": form.get("csrfmiddlewaretoken", "")})  # fmt: skip
    if saved is None:
        return
    version = re.search(r'name="version"[^>]*value="(\d+)"|"version":\s*(\d+)', saved.text)
    if version:
        form["version"] = version.group(1) or version.group(2)
    else:
        page = client.call("ocr review", "GET", path)
        form = form_fields(page.text, "question-form") if page else form
    time.sleep(rng.uniform(0.5, 2))
    done = client.call("ocr accept", "POST", path, data={**form, "action": "accept"})
    # Accepted: a redirect away from this question (to the next one, or to the queue when none is left).
    if done is not None and done.status_code == 302 and urlsplit(done.headers["Location"]).path != path:
        with client.record.lock:
            client.record.accepted.append((username, int(path.rstrip("/").rsplit("/", 1)[-1])))


def annotator(client: Client, username: str, stop: threading.Event, seed: int, *, api: bool) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        if rng.random() < 0.6:
            (label_through_the_api if api else label_on_pages)(client, username, rng)
        else:
            review_ocr(client, username, rng)
        stop.wait(rng.uniform(0.5, 2))


def reader(client: Client, pages: list[tuple[str, str]], stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        name, path = rng.choice(pages)
        client.call(name, "GET", path)
        stop.wait(rng.uniform(1, 3))


INSPECTOR_PAGES = [("inspect home", "/inspect/"), ("adjudication queue", "/pem/adjudication/"),
                   ("api audits", "/api/inspect/audits/"), ("api me", "/api/me/")]  # fmt: skip
RESEARCHER_PAGES = [("research home", "/research/"), ("question list", "/annotate/questions/"),
                    ("api questions", "/api/questions/"), ("api jobs", "/api/jobs/"), ("pem data", "/pem/data/"),
                    ("agreement", "/pem/agreement/")]  # fmt: skip


# --- the services --------------------------------------------------------------------


class Services:
    def __init__(self, args, work: Path) -> None:
        self.work = work
        self.redis_port = free_port()
        self.web_port = args.port or free_port()
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")},
            "DEBUG": "0",
            "DEMO_MODE": "1",
            "SECRET_KEY": "bench-" + "x7Q!" * 16,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "BEHIND_TLS": "0",
            "DATA_DIR": str(work / "data"),
            "DATABASE_URL": args.database,
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "CACHE_URL": f"redis://127.0.0.1:{self.redis_port}/1",
            "JOB_STALE_AFTER_SECONDS": str(STALE),
            "JOB_SWEEP_INTERVAL_SECONDS": str(SWEEP),
            "GUNICORN_BIND": f"127.0.0.1:{self.web_port}",
            "GUNICORN_WORKERS": str(args.web_workers),
            "GUNICORN_THREADS": str(args.web_threads),
            "LOG_LEVEL": "WARNING",
        }
        self.redis: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self.worker_lock = threading.Lock()
        self.web: subprocess.Popen | None = None
        self.logs = open(work / "services.log", "ab")  # noqa: SIM115

    def manage(self, *args: str) -> None:
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True,
                       stdout=self.logs, stderr=self.logs)  # fmt: skip

    def start_redis(self) -> None:
        # AOF, as the README asks of a broker with late acknowledgement: unacked
        # messages survive the outage. (The sweeper covers a Redis without it.)
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir", str(self.work),
             "--appendonly", "yes", "--save", ""],
            stdout=self.logs, stderr=self.logs,
        )  # fmt: skip
        wait_for_port(self.redis_port)

    def kill_redis(self) -> None:
        if self.redis:
            self.redis.kill()
            self.redis.wait()

    def start_worker(self) -> None:
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "k12vista", "worker", "-Q", "cpu,io", "--concurrency", "2",
             "--without-gossip", "--without-mingle", "--loglevel", "WARNING", "--hostname", f"bench-{time.time()}@%h"],
            cwd=ROOT, env=self.env, stdout=self.logs, stderr=self.logs, start_new_session=True,
        )  # fmt: skip

    def kill_worker(self) -> None:
        with self.worker_lock:
            if self.worker and self.worker.poll() is None:
                os.killpg(self.worker.pid, signal.SIGKILL)  # the main process and its pool, as an OOM kill would
                self.worker.wait()
            self.start_worker()

    def supervise_worker(self, record: Record, stop: threading.Event) -> None:
        """Restarts the worker when it exits, as systemd's Restart=always does: Celery 5.7's worker exits
        ("Unrecoverable error") when it loses its Redis connection."""
        while not stop.wait(1):
            with self.worker_lock:
                if self.worker and self.worker.poll() is not None:
                    record.notes.append(f"worker exited by itself (code {self.worker.returncode}); restarted")
                    self.start_worker()

    def start_web(self) -> None:
        self.web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:k12vista.gunicorn_conf", "k12vista.wsgi"],
            cwd=ROOT, env=self.env, stdout=self.logs, stderr=self.logs,
        )  # fmt: skip
        wait_for_port(self.web_port)

    def stop(self) -> None:
        for process in (self.web, self.worker):
            if process and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.kill_redis()


def fresh_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not re.fullmatch(r"[a-z0-9_]+", name) or "bench" not in name:
        raise SystemExit(f"refusing to drop {name!r}: name a throwaway database with 'bench' in its name")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")


def prepare(annotators: int, questions: int, items: int) -> dict[str, str]:
    """The team's accounts (with API tokens for the script users) and enough work for the shift."""
    from rest_framework.authtoken.models import Token

    from annotation.services import QuestionData, create_question
    from k12vista import services
    from k12vista.roles import Role
    from pem import labelling
    from pem.models import ChainOfThought, Step

    tokens = {}
    for i in range(1, annotators + 1):
        user = services.create_user(username=f"ann{i:02d}", roles=[Role.ANNOTATOR], password=PASSWORD)
        tokens[user.username] = Token.objects.create(user=user).key
    for username, role in [("insp1", Role.INSPECTOR), ("insp2", Role.INSPECTOR), ("res1", Role.RESEARCHER),
                           ("adm1", Role.ADMIN)]:  # fmt: skip
        services.create_user(username=username, roles=[role], password=PASSWORD)
    for i in range(questions):
        create_question(data=QuestionData(
            hash_id=f"bench-q{i:05d}", subject="math", grade=8, qtype="multiple_choice",
            text=f"第 {i} 题：已知 $x^2={i + 1}$，求 $x$。", options=[{"label": "A", "text": "$1$"},
                                                                    {"label": "B", "text": "$2$"}],
            answers=["A"], raw_solution="由题意得。", solution_steps=["由题意得。", "故选 A。"],
        ))  # fmt: skip
    for i in range(items):
        cot = ChainOfThought.objects.create(
            key=f"bench-cot-{i:05d}", origin=ChainOfThought.Origin.IMPORTED, subject="math", grade=9,
            stage="middle", qtype="multiple_choice", question_text=f"题目 {i}", response_text="……",
        )  # fmt: skip
        Step.objects.bulk_create(Step(cot=cot, position=p, text=f"第 {p} 步：$a_{p}={p}$。") for p in (1, 2, 3))
        labelling.open_labelling(cot)
    return tokens


# --- faults ------------------------------------------------------------------------


def measure_takeover(svc: Services, record: Record, admin_user) -> None:
    from k12vista import jobs
    from k12vista.models import Job

    job = jobs.start_job(kind="k12vista.worker_check", user=admin_user, params={"hold_seconds": 2 * STALE})
    deadline = time.monotonic() + 60
    while not Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, done__gte=2).exists():
        if time.monotonic() > deadline:
            record.notes.append("takeover: the job never started")
            return
        time.sleep(0.5)
    started = time.monotonic()
    svc.kill_worker()  # and start it again, as its service manager would
    record.windows.append(("worker killed", started, started + STALE + SWEEP + 30))
    while time.monotonic() - started < STALE + SWEEP + 120:
        job.refresh_from_db()
        if job.attempts >= 2:
            record.notes.append(f"killed worker's job taken over after {time.monotonic() - started:.1f} s "
                                f"(JOB_STALE_AFTER_SECONDS={STALE}, sweep every {SWEEP} s)")  # fmt: skip
            break
        time.sleep(0.5)
    else:
        record.notes.append("killed worker's job NOT taken over")
    record.takeover_job = job.pk


def redis_outage(svc: Services, record: Record, base: str, seconds: float) -> None:
    from k12vista.models import Job

    admin = Client(base, record)
    if not admin.login("adm1"):
        record.notes.append("outage: the admin could not log in")
    started = time.monotonic()
    record.windows.append(("redis down", started, started + seconds + 5))
    svc.kill_redis()
    time.sleep(2)
    settings_page = admin.call("settings page", "GET", "/manage/settings/")
    before = set(Job.objects.values_list("pk", flat=True))
    response = admin.call("start job (broker down)", "POST", "/manage/settings/",
                          data={"queue": "cpu", "csrfmiddlewaretoken": admin.csrf(settings_page.text if settings_page
                                                                                  else "")})  # fmt: skip
    new = Job.objects.exclude(pk__in=before).order_by("pk").last()
    answer = response.status_code if response else "error"
    waiting = new.waiting_for_broker if new else None
    record.notes.append(
        f"job start while Redis is down: HTTP {answer}, job {new and new.pk} waiting_for_broker={waiting}"
    )
    time.sleep(max(0, seconds - (time.monotonic() - started)))
    svc.start_redis()
    back = time.monotonic()
    record.notes.append(f"Redis down for {back - started:.1f} s")
    if new is None:
        return
    while time.monotonic() - back < 120:
        new.refresh_from_db()
        if new.is_finished:
            record.notes.append(f"job #{new.pk} started during the outage: {new.status} "
                                f"{time.monotonic() - back:.1f} s after Redis was back")  # fmt: skip
            return
        time.sleep(0.5)
    record.notes.append(f"job #{new.pk} started during the outage did NOT finish ({new.status})")


def gunicorn_reload(svc: Services, record: Record) -> None:
    started = time.monotonic()
    record.windows.append(("gunicorn reload", started, started + 15))
    svc.web.send_signal(signal.SIGHUP)


# --- the run ---------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def data_check(record: Record) -> list[str]:
    from annotation.models import Assignment
    from pem.models import LabellingTask, StepLabel

    lines, problems = [], 0
    for username, task_id in record.submitted:
        task = LabellingTask.objects.select_related("cot").get(pk=task_id)
        labels = StepLabel.objects.filter(step__cot=task.cot, rater=username).count()
        steps = task.cot.steps.count()
        if task.submitted is None or labels != steps:
            problems += 1
            lines.append(f"  label task {task_id} of {username}: submitted={task.submitted} labels={labels}/{steps}")
    for username, assignment_id in record.accepted:
        assignment = Assignment.objects.select_related("question", "annotator").get(pk=assignment_id)
        if assignment.done_at is None or assignment.question.status == "imported":
            problems += 1
            lines.append(f"  OCR assignment {assignment_id} of {username}: done={assignment.done_at}")
    duplicates = (
        StepLabel.objects.filter(source=StepLabel.Source.PERSON).values("step", "rater").order_by()
        .annotate(n=__import__("django.db.models", fromlist=["Count"]).Count("id")).filter(n__gt=1).count()
    )  # fmt: skip
    lines.insert(0, f"data check: {len(record.submitted)} acknowledged submits, {len(record.accepted)} accepts; "
                    f"{problems} missing, {duplicates} duplicated step labels")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/k12_ops_bench")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--web-threads", type=int, default=4)
    parser.add_argument("--redis-down-seconds", type=float, default=30)
    parser.add_argument("--no-faults", action="store_true")
    args = parser.parse_args()
    if not shutil.which("redis-server"):
        raise SystemExit("redis-server is not installed")

    work = Path(tempfile.mkdtemp(prefix="k12-load-"))
    svc = Services(args, work)
    print(f"work folder {work}; load average at start {os.getloadavg()}")
    fresh_database(args.database)
    svc.start_redis()
    os.environ.update(svc.env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "k12vista.settings"
    try:
        svc.manage("migrate", "--noinput")
        svc.manage("collectstatic", "--noinput")
        svc.manage("load_demo")
        import django

        django.setup()
        from django.contrib.auth import get_user_model

        tokens = prepare(args.annotators, questions=15 * args.annotators, items=15 * args.annotators)
        svc.start_worker()
        svc.start_web()
        base = f"http://127.0.0.1:{svc.web_port}"
        record = Record()
        run(args, svc, record, base, tokens, get_user_model().objects.get(username="adm1"))
    finally:
        svc.stop()
    report(record, args)
    print(f"load average at end {os.getloadavg()}; logs in {work / 'services.log'}")


def run(args, svc: Services, record: Record, base: str, tokens: dict[str, str], admin_user) -> None:
    people = [Client(base, record) for _ in range(args.annotators)]
    barrier = threading.Barrier(args.annotators)

    def log_in(i: int) -> None:
        barrier.wait()
        people[i].login(f"ann{i + 1:02d}")

    alone = Client(base, record)
    for _ in range(3):  # the cost of one login with nothing else running: the baseline
        alone.http.cookies.clear()
        alone.login("res1")
    single = sorted(record.logins)
    record.logins.clear()
    print(f"one login alone: {single[1]:.2f} s (median of 3)")
    threads = [threading.Thread(target=log_in, args=(i,)) for i in range(args.annotators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{args.annotators} logins at once: p50 {percentile(record.logins, 0.5):.2f} s, "
          f"p95 {percentile(record.logins, 0.95):.2f} s, max {max(record.logins):.2f} s")  # fmt: skip

    stop = threading.Event()
    workers = []
    for i, client in enumerate(people):
        username = f"ann{i + 1:02d}"
        api = i % 2 == 1
        if api:  # a script for labelling (token); the pages, with the session, for OCR review
            client.http.headers["Authorization"] = f"Token {tokens[username]}"
        workers.append(threading.Thread(target=annotator, args=(client, username, stop, i), kwargs={"api": api}))
    for i, (username, pages) in enumerate([("insp1", INSPECTOR_PAGES), ("insp2", INSPECTOR_PAGES),
                                           ("res1", RESEARCHER_PAGES)]):  # fmt: skip
        client = Client(base, record)
        client.login(username)
        workers.append(threading.Thread(target=reader, args=(client, pages, stop, 100 + i)))
    began = time.monotonic()
    for t in workers:
        t.start()
    supervisor = threading.Event()
    threading.Thread(target=svc.supervise_worker, args=(record, supervisor), daemon=True).start()
    faults = [] if args.no_faults else [
        (0.15, lambda: measure_takeover(svc, record, admin_user)),
        (0.40, lambda: redis_outage(svc, record, base, args.redis_down_seconds)),
        (0.75, lambda: gunicorn_reload(svc, record)),
    ]  # fmt: skip
    fault_threads = []
    for at, fault in faults:
        time.sleep(max(0, began + at * args.seconds - time.monotonic()))
        print(f"t={time.monotonic() - began:5.1f}s fault: {fault.__code__.co_names[0]}")
        fault_threads.append(threading.Thread(target=fault))
        fault_threads[-1].start()
    time.sleep(max(0, began + args.seconds - time.monotonic()))
    stop.set()
    for t in workers:
        t.join(timeout=60)
    for t in fault_threads:
        t.join(timeout=180)
    supervisor.set()


def report(record: Record, args) -> None:
    total = sum(len(v) for v in record.times.values()) + sum(record.errors.values())
    print(f"\n{total} requests in {args.seconds:.0f} s by {args.annotators} annotators, 2 inspectors, 1 researcher")
    print(f"{'endpoint':28s} {'n':>6s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}")
    for name in sorted(record.times):
        t = record.times[name]
        print(f"{name:28s} {len(t):6d} {percentile(t, 0.5) * 1000:8.0f} {percentile(t, 0.95) * 1000:8.0f} "
              f"{percentile(t, 0.99) * 1000:8.0f} {max(t) * 1000:8.0f}")  # fmt: skip
    print("errors:" if record.errors else "errors: none")
    for (window, endpoint, kind), n in sorted(record.errors.items()):
        print(f"  {window:16s} {endpoint:28s} {kind:30s} {n}")
    api_500_in_outage = sum(n for (w, e, k), n in record.errors.items() if w == "redis down" and k == "HTTP 500")
    print(f"HTTP 500 while Redis was down: {api_500_in_outage}")
    slow = record.slow_pages_in_reload
    worst = f" (worst {max(s for _, s in slow):.2f} s: {max(slow, key=lambda x: x[1])[0]})" if slow else ""
    print(f"pages over 1 s during the gunicorn reload: {len(slow)}{worst}")
    reload = [w for w in record.windows if w[0] == "gunicorn reload"]
    if reload:
        _, start, end = reload[0]
        during = [t for at, t in record.page_times if start <= at <= end]
        before = [t for at, t in record.page_times if start - 15 <= at < start]
        print(f"page p95 in the 15 s after the reload {percentile(during, 0.95):.2f} s (max {max(during or [0]):.2f}), "
              f"in the 15 s before it {percentile(before, 0.95):.2f} s (max {max(before or [0]):.2f})")  # fmt: skip
    for note in record.notes:
        print(note)
    if record.takeover_job:
        from k12vista.models import Job

        job = Job.objects.get(pk=record.takeover_job)
        print(f"takeover job #{job.pk} at the end: {job.status}, {job.attempts} attempts")
    for line in data_check(record):
        print(line)


if __name__ == "__main__":
    main()
