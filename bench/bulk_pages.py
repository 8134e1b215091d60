"""Issue 15's page and job rows on PostgreSQL, each beside its baseline in one run:

- status counts on the annotator's queue right after a bulk load of 300,000
  questions (COPY, autovacuum off for the table so nothing tidies up behind
  the measurement), before and after the importers' ``k12vista.bulk.analyze``;
  the baseline is a full ``count()`` per status (what the page did before the
  capped counts);
- the labelling queue of an annotator holding 500 open tasks (keyset pages of
  50) and 500 submitted ones, with 5,000 other items waiting in the pool (over
  the count's cap); the baseline is reading all 500 open tasks, as the page did
  before, and the question queue page is measured beside it;
- the difficulty-filter confirm over 10,000 questions (two small-model filter
  runs that answered all of them right), through ``inference.difficulty.confirm_filters``,
  the job's service (set-based ``reject_many``); the baseline is one
  ``annotation.services.reject`` per question, timed on 500 other questions
  and multiplied out.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<a database with bench in its name> DATA_DIR=$(mktemp -d) \\
        SECRET_KEY=... ALLOWED_HOSTS=testserver BEHIND_TLS=0 .venv/bin/python -m bench.bulk_pages

Run it with DEBUG off, as production runs. It migrates the database and fills it
(a fresh database each time). ``--only label`` runs the label queue alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")


def timings(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """p50 and p95 milliseconds of ``call``."""
    seen = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        seen.append(1000 * (time.perf_counter() - start))
    seen.sort()
    return statistics.median(seen), seen[min(len(seen) - 1, round(0.95 * (len(seen) - 1)))]


def in_turn(calls: list[Callable[[], object]], repeat: int) -> list[tuple[float, float]]:
    """p50 and p95 milliseconds of each call, the calls taken in turn: on a shared machine a
    change of load then falls on all of them alike."""
    seen: list[list[float]] = [[] for _ in calls]
    for _ in range(repeat):
        for call, times in zip(calls, seen, strict=True):
            start = time.perf_counter()
            call()
            times.append(1000 * (time.perf_counter() - start))
    return [(statistics.median(t), sorted(t)[min(len(t) - 1, round(0.95 * (len(t) - 1)))]) for t in seen]


def row(label: str, p50: float, p95: float) -> None:
    print(f"  {label:<66} p50 {p50:8.2f} ms   p95 {p95:8.2f} ms", flush=True)


def fill_questions(total: int, prefix: str, status: str) -> list[int]:
    from django.db import transaction
    from django.utils import timezone

    from annotation.models import Question
    from bench.generate import make_question
    from k12vista import bulk
    from k12vista.vocabulary import stage_of_grade

    texts = [make_question(7, i) for i in range(500)]
    ids: list[int] = []
    now = timezone.now()
    for start in range(0, total, 10_000):
        values = []
        for index in range(start, min(total, start + 10_000)):
            q = texts[index % len(texts)]
            values.append({"hash_id": f"{prefix}{index:08d}", "subject": q.subject.value, "grade": q.grade,
                           "stage": stage_of_grade(q.grade).value, "qtype": q.qtype.value, "text": q.text,
                           "options": [], "answers": q.ground_truth, "raw_solution": "",
                           "solution_steps": q.solution_steps,
                           "difficulty": None, "source": "bench", "status": status, "content_hash": "",
                           "created": now, "updated": now})  # fmt: skip
        with transaction.atomic():
            ids += bulk.insert_rows(Question, values, ids=True)
    return ids


def status_counts(args) -> None:
    from django.db import connection
    from django.test import Client

    from annotation import queues, views
    from annotation.models import Question
    from k12vista import bulk
    from k12vista.roles import Role
    from k12vista.services import create_user

    table = connection.ops.quote_name(Question._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    start = time.perf_counter()
    fill_questions(args.questions, "load", Question.Status.IMPORTED)
    print(f"status counts: {args.questions:,} questions loaded by COPY in {time.perf_counter() - start:.1f} s "
          "(autovacuum off for the table)", flush=True)  # fmt: skip
    user = create_user(username="bench-annotator", roles=[Role.ANNOTATOR])
    client = Client()
    client.force_login(user)
    within = queues.queue_filter({})

    def full_counts():
        return [Question.objects.filter(status=s).count() for s in queues.TASK_INPUT.values()]

    def capped():
        return queues.waiting_counts(within, cap=views.WAITING_CAP)

    def page():
        assert client.get("/annotate/").status_code == 200

    for when in ("right after the load", "after k12vista.bulk.analyze (the importers run it)"):
        print(f" {when}:")
        row("baseline: full count() per status", *timings(full_counts, args.repeat))
        row("queue counts (capped at 1,000, as the page counts)", *timings(capped, args.repeat))
        row("GET /annotate/ (the whole queue page)", *timings(page, args.repeat))
        if "right after" in when:
            start = time.perf_counter()
            bulk.analyze(Question)
            print(f"  (VACUUM (ANALYZE) of the table: {time.perf_counter() - start:.1f} s)")
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")


def label_queue(args) -> None:
    from datetime import timedelta

    from django.test import Client
    from django.utils import timezone

    from annotation.models import Question
    from k12vista import bulk
    from k12vista.roles import Role
    from k12vista.services import create_user
    from pem.models import ChainOfThought, LabellingTask

    user = create_user(username="bench-labeller", roles=[Role.ANNOTATOR])
    other = create_user(username="bench-other-labeller", roles=[Role.ANNOTATOR])
    now = timezone.now()
    # Texts the size of a real chain of thought: the page must not read them.
    response = "设 $x^2-5x+6=0$，则 $(x-2)(x-3)=0$。" * 40
    total = args.tasks + args.submitted + args.pool
    cot_ids = bulk.insert_rows(ChainOfThought, [
        {"key": f"bench-cot-{i}", "origin": ChainOfThought.Origin.IMPORTED.value, "question_text": "题目" * 100,
         "response_text": response, "reference_solution": response,
         "status": ChainOfThought.Status.LABELLING.value, "created": now}
        for i in range(total)
    ], ids=True)  # fmt: skip
    mine, done = cot_ids[: args.tasks], cot_ids[args.tasks : args.tasks + args.submitted]
    pool = cot_ids[args.tasks + args.submitted :]
    bulk.insert_rows(LabellingTask, [
        *({"cot_id": pk, "annotator_id": user.pk, "created": now} for pk in mine),
        *({"cot_id": pk, "annotator_id": user.pk, "created": now - timedelta(days=1),
           "submitted": now - timedelta(seconds=i)} for i, pk in enumerate(done)),
        # A third of the pool already has someone on it: those items come first.
        *({"cot_id": pk, "annotator_id": other.pk, "created": now} for pk in pool[::3]),
    ])  # fmt: skip
    bulk.analyze(ChainOfThought, LabellingTask, Question)
    client = Client()
    client.force_login(user)
    tasks = LabellingTask.objects.for_annotator(user).select_related("cot")

    def every_open_task():
        return list(tasks.open().order_by("created", "id"))

    def page():
        assert client.get("/pem/label/").status_code == 200

    def question_queue():
        assert client.get("/annotate/").status_code == 200

    def frame():  # every page's frame: middleware, session, permissions, the base template
        assert client.get("/account/").status_code == 200

    print(f"label queue: one annotator with {args.tasks} open tasks, {args.submitted} submitted; "
          f"{args.pool} other items waiting in the pool (the four rows measured in turn)")  # fmt: skip
    baseline, label, annotate, account = in_turn([every_open_task, page, question_queue, frame], args.repeat)
    row(f"baseline: reading all {args.tasks} open tasks (the page before keyset pages)", *baseline)
    row("GET /pem/label/ (first keyset page of 50, counts capped)", *label)
    # On a shared machine the frame moves with the load: the question queue page and the account
    # page, measured beside it, are the yardsticks.
    row("for comparison: GET /annotate/ (the question queue page)", *annotate)
    row("for comparison: GET /account/ (little but every page's frame)", *account)


def difficulty_confirm(args) -> None:
    from annotation import services as bank
    from annotation.models import Question
    from inference import assist, difficulty
    from inference.models import AssistResult, AssistRun, ModelEndpoint
    from k12vista import bulk
    from k12vista.models import Job
    from k12vista.roles import Role
    from k12vista.services import create_user

    user = create_user(username="bench-researcher", roles=[Role.RESEARCHER])
    ids = fill_questions(args.reject, "easy", Question.Status.IMPORTED)
    runs = []
    for name in ("small-a", "small-b"):
        endpoint = ModelEndpoint.objects.create(name=name, base_url="http://127.0.0.1:8000/v1", model_name=name)
        job = Job.objects.create(kind=assist.JOB_KIND, status=Job.Status.SUCCEEDED, started_by=user)
        run = AssistRun.objects.create(name=name, kind=AssistRun.Kind.SMALL_MODEL_FILTER, endpoint=endpoint,
                                       created_by=user, job=job)  # fmt: skip
        bulk.insert_rows(AssistResult, [
            {"run_id": run.pk, "question_id": pk, "status": AssistResult.Status.OK.value,
             "parsed": {"correct": True, "final_answer": "B"}}
            for pk in ids
        ])  # fmt: skip
        runs.append(run)
    bulk.analyze(Question, AssistResult)
    sample = fill_questions(args.baseline_sample, "slow", Question.Status.IMPORTED)
    print(f"difficulty-filter confirm: {args.reject:,} questions every small model answered right")
    start = time.perf_counter()
    for question in Question.objects.filter(pk__in=sample):
        bank.reject(question=question, reason="baseline: one reject per question", user=user)
    per_question = (time.perf_counter() - start) / len(sample)
    print(f"  baseline: one reject() per question: {1000 * per_question:.2f} ms each (on {len(sample)}), "
          f"so {per_question * args.reject:.1f} s for {args.reject:,}", flush=True)  # fmt: skip
    start = time.perf_counter()
    preview = difficulty.preview_filters(runs, None)
    previewed = time.perf_counter() - start
    start = time.perf_counter()
    rejected = difficulty.confirm_filters(
        small_runs=runs, text_only_run=None, fingerprint=preview.fingerprint, user=user
    )
    confirmed = time.perf_counter() - start
    print(f"  preview {previewed:.2f} s; confirm_filters (the job's work): {confirmed:.2f} s for {rejected:,} "
          f"rejected ({per_question * args.reject / confirmed:.0f}x the baseline)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=300_000)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--submitted", type=int, default=500, help="tasks the labeller already submitted")
    parser.add_argument("--pool", type=int, default=5000, help="other items waiting for labels")
    parser.add_argument("--reject", type=int, default=10_000)
    parser.add_argument("--baseline-sample", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument(
        "--only",
        choices=["counts", "label", "confirm"],
        help="run one of the three parts (label: the label queue alone, without the 300K load)",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql" or "bench" not in settings.DATABASES["default"]["NAME"]:
        raise SystemExit("point DATABASE_URL at a throwaway PostgreSQL database with 'bench' in its name")
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # the manifest production serves from
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores); "
          f"DEBUG {settings.DEBUG}")  # fmt: skip
    for name, part in (("counts", status_counts), ("label", label_queue), ("confirm", difficulty_confirm)):
        if args.only in (None, name):
            part(args)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
