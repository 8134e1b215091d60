"""Every bench script runs as docs/benchmarks.md documents it, at a tiny size (issue 27).

Each script runs in a subprocess with the environment its documented command sets (and none of the
settings' variables of the shell that runs the tests: a fresh checkout sets none), in a fresh
DATA_DIR, with tiny sizes in place of the documented ones. It must exit 0 and print its figures
beside its baseline: a script that only runs at full size, or that a changed default breaks (as the
model-URL allowlist once broke bench/inference_overhead.py), fails here first.

The scripts documented on PostgreSQL get a fresh database of their own on the test run's
PostgreSQL server (``<test database>_<script>_bench``) and skip on the embedded default.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.ci import needs

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO.parent / "shared" / "realdata" / "records"
EXAMS = REPO.parent / "shared" / "realdata" / "exams"
KEY = "bench-secret-key-bench-secret-key-bench-secret-key-123"
# What the documented commands set for a production-like run (DEBUG off).
PRODUCTION = {"SECRET_KEY": KEY, "ALLOWED_HOSTS": "localhost", "BEHIND_TLS": "0"}
# Every variable k12vista/settings.py reads: the shell running the tests sets some (DEBUG,
# DATA_DIR, DATABASE_URL...); a documented command on a fresh checkout has only its own.
SETTINGS_VARIABLES = set(re.findall(r'env_\w+\("([A-Z_0-9]+)"', (REPO / "k12vista" / "settings.py").read_text()))

pytestmark = pytest.mark.slow


def run_bench(module: str, *args: str, env: dict[str, str], timeout: int = 280) -> str:
    """``python -m bench.<module> args`` from the repository root with the documented ``env``;
    its standard output, after asserting that it exited 0."""
    clean = {name: value for name, value in os.environ.items() if name not in SETTINGS_VARIABLES}
    result = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=REPO, env={**clean, **env}, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def prints(output: str, *patterns: str) -> None:
    """Each pattern matches a line of the output (its figure, or its baseline)."""
    for pattern in patterns:
        assert re.search(pattern, output, re.MULTILINE), f"no line matches {pattern!r} in:\n{output}"


NUMBER = r"\d+(\.\d+)?"


@pytest.fixture
def bench_database(request):
    """A fresh PostgreSQL database for one bench, dropped afterwards; the name has 'bench' in it
    (bench/bulk_pages.py and bench/leaderboard.py refuse any other)."""
    if connection.vendor != "postgresql":
        pytest.skip("documented on PostgreSQL only; the suite's PostgreSQL run runs it")
    import psycopg

    db = connection.settings_dict
    name = f"{db['NAME']}_{request.node.name.removeprefix('test_')}_bench"[:63]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    server = f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}"

    def drop() -> None:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    drop()
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{server}/{name}"
    drop()


# --- the embedded default (SQLite, no services) ---


def test_inference_overhead(tmp_path):
    """Its instant server listens on a free port, outside the default MODEL_URL_ALLOWLIST."""
    out = run_bench("inference_overhead", "--requests", "20", "--concurrency", "4", "--rounds", "1",
                    env={"DATA_DIR": str(tmp_path), **PRODUCTION})  # fmt: skip
    prints(
        out,
        rf"^run round 1: bare +{NUMBER} req/s .* inference run +{NUMBER} req/s .*'ok': 20",
        rf"^ratio: +{NUMBER} +\(inference run / bare loop",
        rf"^limiter ratio: +{NUMBER}",
        rf"^two runs ratio: +{NUMBER}",
    )


def test_slot_handoff(tmp_path):
    env = {"MODEL_URL_ALLOWLIST": "http://127.0.0.1:*", "DATA_DIR": str(tmp_path), **PRODUCTION}
    out = run_bench("slot_handoff", "--requests", "20", "--rounds", "1", env=env)
    prints(out, rf"^round 1: bare +{NUMBER} req/s, slots busy {NUMBER}", rf"^round 1: two runs +{NUMBER} req/s")


def test_question_list(tmp_path):
    out = run_bench("question_list", "--questions", "150", "--repeat", "2",
                    env={"DATA_DIR": str(tmp_path), **PRODUCTION, "ALLOWED_HOSTS": "testserver"})  # fmt: skip
    prints(out, r"^150 questions", rf"^/annotate/questions/ +p50 +{NUMBER} ms", rf"^/annotate/ +p50 +{NUMBER} ms")


def test_agreement(tmp_path):
    out = run_bench("agreement", "--items", "6", "--repeat", "1", env={"DATA_DIR": str(tmp_path), **PRODUCTION})
    prints(out, r"^filled 6 items", rf"^agreement_report: best {NUMBER} s")


def test_release(tmp_path):
    out = run_bench("release", "--scale", "0.001", env={"DATA_DIR": str(tmp_path), "DEBUG": "1"})
    prints(out, rf"^clustering \d+ points: {NUMBER} s", r"ours \d+ rows/s, pyarrow alone \d+ rows/s")


def test_import_pdf(tmp_path):
    out = run_bench("import_pdf", "--pages", "2", "--per-page", "4", "--scanned", "0",
                    env={"DATA_DIR": str(tmp_path), "DEBUG": "1"})  # fmt: skip
    prints(out, r'"pages": 2,', rf'"pages_per_second": {NUMBER}')


def test_import_jsonl(tmp_path):
    out = run_bench("import_jsonl", "--scale", "0.0005", env={"DATA_DIR": str(tmp_path), "DEBUG": "1"})
    prints(out, r"^created 17,", rf"^import: {NUMBER} s, {NUMBER} questions/s")


def test_generate(tmp_path):
    run_bench("generate", "--scale", "0.0005", "--out", str(tmp_path / "out"), env={})
    written = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert written == ["pebench.jsonl", "pem.jsonl", "questions.jsonl"]


@needs(RECORDS.is_dir(), "needs ../shared/realdata/records")
def test_exam_papers(tmp_path):
    run_bench("exam_papers", "--out", str(tmp_path / "papers"), "--count", "1", env={})
    assert list((tmp_path / "papers").rglob("*.pdf")), "no paper written"


@needs(RECORDS.is_dir(), "needs ../shared/realdata/records")
def test_real_papers_generated(tmp_path):
    out = run_bench("real_papers", "--generated", "1", "--seed", "0", env={"DEBUG": "1", "DATA_DIR": str(tmp_path)})
    prints(out, r"^TOTAL ", r"^baseline on the same text pages: PyMuPDF", rf"recall +{NUMBER} +target")


@needs(EXAMS.is_dir(), "needs ../shared/realdata/exams")
def test_real_papers(tmp_path):
    """The documented run over the real papers, on one text-layer paper."""
    out = run_bench("real_papers", "--only", "physics_2005_quanguo1", env={"DEBUG": "1", "DATA_DIR": str(tmp_path)})
    prints(out, r"^physics_2005_quanguo1\.pdf +\d+ +\d+ ", r"^baseline on the same text pages: PyMuPDF")


# --- documented on PostgreSQL ---


def test_import_pebench(tmp_path, bench_database):
    out = run_bench("import_pebench", "--scale", "0.002",
                    env={"DATABASE_URL": bench_database, "DATA_DIR": str(tmp_path), **PRODUCTION})  # fmt: skip
    prints(out, rf"^import: {NUMBER} s; created 6,", rf"^again: {NUMBER} s; created 0, unchanged 6",
           rf"^raw COPY {NUMBER} s; import / COPY")  # fmt: skip


def test_pem800k(tmp_path, bench_database):
    env = {"DATABASE_URL": bench_database, "DATA_DIR": str(tmp_path), "DEBUG": "1"}
    out = run_bench("pem800k", "--records", "200", env=env)
    prints(out, r"^import: +[\d,]+ records/s vs raw COPY [\d,]+ records/s", r"^export: +TRL [\d,]+ records/s vs COPY")


def test_bulk_pages(tmp_path, bench_database):
    out = run_bench("bulk_pages", "--questions", "300", "--tasks", "5", "--submitted", "5", "--pool", "10",
                    "--reject", "20", "--baseline-sample", "5", "--repeat", "2",
                    env={"DATABASE_URL": bench_database, "DATA_DIR": str(tmp_path), **PRODUCTION,
                         "ALLOWED_HOSTS": "testserver"})  # fmt: skip
    prints(out, rf"p50 +{NUMBER} ms +p95 +{NUMBER} ms", r"baseline: one reject\(\) per question",
           r"confirm_filters \(the job's work\)")  # fmt: skip


def test_leaderboard(tmp_path, bench_database):
    out = run_bench("leaderboard", "--questions", "20", "--models", "2", "--repeat", "1",
                    env={"DATABASE_URL": bench_database, "DATA_DIR": str(tmp_path), **PRODUCTION})  # fmt: skip
    prints(out, r"^20 questions x 2 models x 2 modes = 80", r"take_snapshot")


def test_load(tmp_path, bench_database):
    """A shift of two annotators for a few seconds: services started, faults and all."""
    out = run_bench("load", "--seconds", "20", "--annotators", "2", "--redis-down-seconds", "3",
                    "--database", bench_database, env={}, timeout=290)  # fmt: skip
    prints(out, r"one login alone: ")


# --- the simulated cluster (issue 28): both databases ---


CLUSTER_CALLS = r"^calls: 400 answered, 0 failed, 0 lost, 0 duplicated .*; 0 generated twice, 0 answers no server gen"


# The documented sizes, with a faster latency model: the test's time is the migration and the
# workers' start, which a loaded machine stretches to minutes.
CLUSTER_SMALL = ("--models", "4", "--questions", "100", "--replicas", "2", "--workers", "2", "--ttft", "0.1",
                 "--token-ms", "10")  # fmt: skip


@pytest.mark.timeout(900)
def test_cluster(tmp_path):
    """4 models x 100 questions, 2 servers each, 2 real Celery workers, on SQLite and the filesystem
    broker (the embedded default): no call lost or duplicated, and the makespan beside the ideal."""
    out = run_bench("cluster", *CLUSTER_SMALL, env={"DATA_DIR": str(tmp_path), **PRODUCTION}, timeout=840)
    prints(out, CLUSTER_CALLS, r"^utilisation ", rf"^orchestration CPU: {NUMBER} ms per call",
           rf"^ideal: {NUMBER} s", rf"^makespan/ideal: {NUMBER}$")  # fmt: skip


@pytest.mark.timeout(900)
def test_cluster_postgresql(tmp_path, bench_database, settings):
    """The same on PostgreSQL, with the test run's broker (Redis in the suite's PostgreSQL run)."""
    env = {"DATABASE_URL": bench_database, "DATA_DIR": str(tmp_path), **PRODUCTION}
    if settings.CELERY_BROKER_URL.startswith(("redis", "amqp")):
        env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    out = run_bench("cluster", *CLUSTER_SMALL, env=env, timeout=840)
    prints(out, CLUSTER_CALLS, r"database postgresql", rf"^makespan/ideal: {NUMBER}$")
