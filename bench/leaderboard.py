"""Leaderboard over 2.7 million scored responses on PostgreSQL.

    createdb -h 127.0.0.1 -U postgres k12_board_bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/k12_board_bench DATA_DIR=/tmp/k12-boardbench \\
        SECRET_KEY=... ALLOWED_HOSTS=localhost BEHIND_TLS=0 .venv/bin/python -m bench.leaderboard

The paper's scale: 33,660 questions x 40 models x 2 modes = 2,692,800
responses, each with one judgment (80 inference runs, 80 scoring runs), and
for the step-by-step half the judged steps (``--steps``, about 5 a judgment).
Run it with DEBUG off, as production runs.

1. Migrates the database named by DATABASE_URL, which must be PostgreSQL and
   have "bench" in its name: the inference runs already there are truncated.
2. Loads questions (bulk_create), runs and scoring runs (ORM, each with a
   finished job, as the pipeline leaves them), then responses, judgments and
   steps with COPY. As in any bulk load, the three tables' secondary indexes
   and constraints are dropped first and built again after (``--keep-indexes``
   loads into the indexed tables instead); every part is timed, the rebuild
   included; then VACUUM ANALYZE (timed apart).
3. Takes every scoring run's snapshot (what each scoring job does when it
   finishes: its slices into the database) and times it; times, as the
   baseline, the aggregation the page used to run in the request; then the
   leaderboard page cold (cache cleared and a new database connection, as
   after a restart) and warm, ``standings()``, the CSV download and the API,
   all reading the stored slices; and prints the numbers.

``--scale`` takes a fraction of the paper's scale (``--scale 0.1``: 3,366
questions, 269,280 responses); the default 1.0 is the full 2.7 million.

Rows are realistic in shape (statuses, scores, labels: 97 % judged, 2 % not
understood, 1 % failed calls; 74 % correct steps), not in width: answers and
step texts are a few bytes, where real ones are kilobytes kept out of line by
PostgreSQL (TOAST) and never read by the leaderboard.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")

ERRORS = ("ICE", "QM", "LRK", "KAE", "LRE", "HE", "CE", "IAE")
RESPONSE_COLUMNS = (
    "id, run_id, question_id, status, raw_output, latency_ms, prompt_tokens, completion_tokens, finish_reason, "
    "attempts, error, finished, prompt_id"
)
JUDGMENT_COLUMNS = (
    "id, scoring_run_id, response_id, status, score, parsed, parse_status, parse_notes, reference_answers, "
    "model_answers, item_scores, raw_output, latency_ms, prompt_tokens, completion_tokens, finish_reason, attempts, "
    "error, finished"
)
STEP_COLUMNS = "id, judgment_id, position, text, label, reason"
BATCH = 50_000  # lines per COPY write
PAPER_QUESTIONS = 33_660


def load_questions(total: int) -> list[tuple[int, str]]:
    """The bench's questions (hash ids lb00000000...), created once; returns (id, qtype)."""
    from annotation.models import Question
    from bench.generate import make_question
    from k12vista.vocabulary import stage_of_grade

    have = Question.objects.filter(hash_id__startswith="lb").count()
    if have < total:
        pool = [make_question(11, i) for i in range(2000)]
        batch = []
        for index in range(have, total):
            q = pool[index % len(pool)]
            batch.append(Question(hash_id=f"lb{index:08d}", subject=q.subject, grade=q.grade,
                                  stage=stage_of_grade(q.grade), qtype=q.qtype, text=q.text,
                                  answers=q.ground_truth))  # fmt: skip
            if len(batch) == 5000:
                Question.objects.bulk_create(batch)
                batch = []
        Question.objects.bulk_create(batch)
    rows = Question.objects.filter(hash_id__startswith="lb").order_by("id").values_list("id", "qtype")
    return list(rows[:total])


def copy_lines(cursor, table: str, columns: str, lines) -> int:
    """COPY text-format lines into table, in batches; returns the row count."""
    count = 0
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        chunk = []
        for line in lines:
            chunk.append(line)
            if len(chunk) == BATCH:
                copy.write("".join(chunk))
                count += len(chunk)
                chunk = []
        copy.write("".join(chunk))
        count += len(chunk)
    return count


def next_id(cursor, table: str) -> int:
    cursor.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")  # noqa: S608 (our table names)
    return cursor.fetchone()[0]


def reset_sequence(cursor, table: str) -> None:
    sql = f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"  # noqa: S608
    cursor.execute(sql)


TABLES = ("inference_response", "inference_judgment", "inference_judgedstep")


def drop_indexes(cursor) -> list[str]:
    """Drops the loaded tables' unique and foreign-key constraints and other
    secondary indexes (primary keys stay); returns the SQL that restores them."""
    cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid::regclass::text = ANY(%s) AND contype IN ('u', 'f')",
        [list(TABLES)],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) AND indexname NOT IN "
        "(SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))",
        [list(TABLES)],
    )
    indexes = cursor.fetchall()
    for table, name, _definition in constraints:
        cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _definition in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    return [definition for _name, definition in indexes] + [
        f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}' for table, name, definition in constraints
    ]


def attach_jobs() -> None:
    """A finished job on every run without one, as the pipeline leaves them."""
    from django.utils import timezone

    from inference.models import InferenceRun, ScoringRun
    from k12vista.models import Job

    for model, kind in ((InferenceRun, "inference.run"), (ScoringRun, "inference.score")):
        for run in model.objects.filter(job__isnull=True):
            run.job = Job.objects.create(kind=kind, status=Job.Status.SUCCEEDED, finished_at=timezone.now())
            run.save(update_fields=["job"])


def load(args) -> dict[str, float]:
    from django.db import connection

    from inference.models import InferenceRun, ModelEndpoint, ScoringRun

    timings: dict[str, float] = {}
    started = time.perf_counter()
    questions = load_questions(args.questions)
    timings["questions"] = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE inference_inferencerun CASCADE")

    started = time.perf_counter()
    endpoints = [
        ModelEndpoint.objects.update_or_create(
            name=f"bench-model-{m:02d}", defaults={"base_url": "http://127.0.0.1:9/v1", "model_name": f"m{m}"}
        )[0]
        for m in range(args.models)
    ]
    plan = []  # (inference run, scoring run, mode)
    for endpoint in endpoints:
        for mode, method in (("direct", "judge_direct"), ("step_by_step", "judge_steps")):
            run = InferenceRun.objects.create(name=f"{endpoint.name} {mode}", endpoint=endpoint, mode=mode)
            scoring = ScoringRun.objects.create(name=f"{run.name} scored", inference_run=run, judge=endpoint,
                                                method=method)  # fmt: skip
            plan.append((run.pk, scoring.pk, mode))
    timings["runs"] = time.perf_counter() - started

    rng = random.Random(args.seed)
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # the psycopg cursor, for COPY
        cursor.execute("SET maintenance_work_mem = '512MB'")  # for the index builds
        started = time.perf_counter()
        restore = [] if args.keep_indexes else drop_indexes(cursor)
        timings["drop_indexes"] = time.perf_counter() - started
        first_response, first_judgment, first_step = (
            next_id(cursor, "inference_response"),
            next_id(cursor, "inference_judgment"),
            next_id(cursor, "inference_judgedstep"),
        )

        def responses():
            rid = first_response
            for run_id, _scoring, _mode in plan:
                for question_id, _qtype in questions:
                    yield (
                        f"{rid}\t{run_id}\t{question_id}\tok\t最终答案：B\t850\t300\t120\tstop\t1\t\t"
                        "2026-11-29 12:00:00+00\t\\N\n"
                    )
                    rid += 1

        # Judgments and their steps are drawn together, so that step-by-step
        # scores equal correct steps / steps, as the PEM's do.
        steps_per_judgment: list[tuple[int, list[str]]] = []

        def judgments():
            jid, rid = first_judgment, first_response
            for _run, scoring_id, mode in plan:
                for _question in questions:
                    draw = rng.random()
                    status = "ok" if draw < 0.97 else ("parse_failed" if draw < 0.99 else "call_failed")
                    score = "\\N"
                    if status == "ok":
                        if mode == "direct":
                            marks = [rng.random() < 0.55 for _ in range(rng.randint(1, 5))]
                            score = repr(sum(marks) / len(marks))
                        else:
                            labels = [
                                "CS" if rng.random() < 0.74 else rng.choice(ERRORS)
                                for _ in range(max(1, round(rng.gauss(args.steps, 1.5))))
                            ]
                            steps_per_judgment.append((jid, labels))
                            score = repr(labels.count("CS") / len(labels))
                    parse = "ok" if status == "ok" else ("failed" if status == "parse_failed" else "")
                    yield (
                        f"{jid}\t{scoring_id}\t{rid}\t{status}\t{score}\t\\N\t{parse}\t[]\t[]\t[]\t[]\t{{}}\t900\t400\t"
                        f"60\tstop\t1\t\t2026-11-29 13:00:00+00\n"
                    )
                    jid += 1
                    rid += 1

        def steps():
            sid = first_step
            for jid, labels in steps_per_judgment:
                for position, label in enumerate(labels):
                    yield f"{sid}\t{jid}\t{position}\tstep {position}\t{label}\t\n"
                    sid += 1

        for table, columns, lines in (
            ("inference_response", RESPONSE_COLUMNS, responses),
            ("inference_judgment", JUDGMENT_COLUMNS, judgments),
            ("inference_judgedstep", STEP_COLUMNS, steps),
        ):
            started = time.perf_counter()
            rows = copy_lines(cursor, table, columns, lines())  # autocommit: each COPY commits
            timings[table] = time.perf_counter() - started
            print(f"  COPY {table}: {rows:,} rows in {timings[table]:.1f} s ({rows / timings[table]:,.0f} rows/s)")
            reset_sequence(cursor, table)
        steps_per_judgment.clear()

        started = time.perf_counter()
        for sql in restore:
            cursor.execute(sql)
        timings["indexes"] = time.perf_counter() - started
        print(f"  indexes and constraints: dropped in {timings['drop_indexes']:.1f} s, "
              f"built and checked in {timings['indexes']:.1f} s")  # fmt: skip

        started = time.perf_counter()
        for table in TABLES:
            cursor.execute(f"VACUUM (ANALYZE) {table}")
        timings["vacuum_analyze"] = time.perf_counter() - started
    return timings


def measure(label: str, call, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    print(f"{label:58s} median {statistics.median(times):6.2f} s  min {min(times):6.2f} s  max {max(times):6.2f} s")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of the paper's 33,660 questions (1.0: 2.7M responses, 40 models)")  # fmt: skip
    parser.add_argument("--questions", type=int, default=None, help="questions (overrides --scale)")
    parser.add_argument("--models", type=int, default=40, help="each answers in both modes")
    parser.add_argument("--steps", type=float, default=5.0, help="mean judged steps per step-by-step judgment")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-load", action="store_true", help="measure the data already loaded")
    parser.add_argument("--keep-indexes", action="store_true", help="COPY into the indexed tables")
    args = parser.parse_args()
    if args.questions is None:
        args.questions = max(1, round(PAPER_QUESTIONS * args.scale))
    print(f"{args.questions:,} questions x {args.models} models x 2 modes = {args.questions * args.models * 2:,} "
          "responses")  # fmt: skip

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from inference.models import JudgedStep, Judgment, Response
    from inference.standings import standings
    from k12vista import services
    from k12vista.roles import Role

    if connection.vendor != "postgresql" or "bench" not in settings.DATABASES["default"]["NAME"]:
        raise SystemExit("point DATABASE_URL at a throwaway PostgreSQL database with 'bench' in its name")
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # the manifest production serves from
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")

    if not args.skip_load:
        started = time.perf_counter()
        timings = load(args)
        total = time.perf_counter() - started
        rows = timings["inference_response"] + timings["inference_judgment"]
        print(f"questions {timings['questions']:.1f} s, runs {timings['runs']:.1f} s, "
              f"responses + judgments (COPY) {rows:.1f} s, steps (COPY) {timings['inference_judgedstep']:.1f} s, "
              f"indexes {timings['drop_indexes'] + timings['indexes']:.1f} s, "
              f"VACUUM ANALYZE {timings['vacuum_analyze']:.1f} s; all {total:.1f} s")  # fmt: skip
    attach_jobs()
    print(
        f"{Response.objects.count():,} responses, {Judgment.objects.count():,} judgments, "
        f"{JudgedStep.objects.count():,} judged steps; load average now "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )

    from django.contrib.auth import get_user_model

    researcher = get_user_model().objects.filter(username="bench-researcher").first() or services.create_user(
        username="bench-researcher", roles=[Role.RESEARCHER], password="bench-password-1"
    )
    client = Client(HTTP_HOST="localhost")  # the ALLOWED_HOSTS of the docs' command
    client.force_login(researcher, backend="django.contrib.auth.backends.ModelBackend")

    def page(url: str):
        def get():
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return get

    from django.core.cache import cache
    from django.db import connection as db

    from inference import standings as board
    from inference.models import ScoringRun

    # What a scoring job now does when it finishes: store its run's slices.
    runs = list(ScoringRun.objects.select_related("inference_run").order_by("id"))
    snapshot_times = []
    for run in runs:
        started = time.perf_counter()
        board.take_snapshot(run)
        snapshot_times.append(time.perf_counter() - started)
    print(f"{'take_snapshot (end of each scoring job), ' + str(len(runs)) + ' runs':58s} median "
          f"{statistics.median(snapshot_times):6.2f} s  min {min(snapshot_times):6.2f} s  "
          f"max {max(snapshot_times):6.2f} s  all {sum(snapshot_times):6.1f} s")  # fmt: skip

    # The baseline, in the same run: the old page aggregated every run's rows in the request.
    for mode in ("direct", "step_by_step"):
        chosen = [run for run in runs if board.MODE_OF_METHOD[run.method] == mode]
        measure(f"baseline: aggregate in the request ({mode})", lambda c=chosen: board.slice_stats(c), 1)

    def restarted(url: str):
        def call():
            cache.clear()  # a restart: no cache, a new database connection
            db.close()
            page(url)()

        return call

    for mode in ("direct", "step_by_step"):
        measure(f"standings(mode={mode!r}) from stored slices", lambda mode=mode: standings(mode=mode), args.repeat)
    for url in ("/research/leaderboard/?mode=direct", "/research/leaderboard/?mode=step_by_step"):
        measure(f"GET {url}, cold (after a restart)", restarted(url), args.repeat)
        measure(f"GET {url}, warm", page(url), args.repeat)
    measure("GET /research/leaderboard/download/csv/ (both modes)", page("/research/leaderboard/download/csv/"), 2)
    measure("GET /api/leaderboard/", page("/api/leaderboard/"), 2)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
