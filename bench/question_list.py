"""Server time of the question list, the annotator queue and the question API at
300,000 questions.

    DATA_DIR=/tmp/k12-listbench SECRET_KEY=... ALLOWED_HOSTS=testserver BEHIND_TLS=0 \
        .venv/bin/python -m bench.question_list --questions 300000

Run it with DEBUG off, as production runs: DEBUG turns off the cached
template loader and records every query, which is not what users get.

It migrates the database named by DATABASE_URL (the SQLite file under DATA_DIR by
default; use a throwaway one), fills it with synthetic questions by bulk insert
(no figures: the pages measured do not read them), then requests each page
through Django's test client and prints p50/p95/max milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")


def fill(total: int) -> None:
    from annotation.models import Question
    from bench.generate import make_question
    from k12vista.vocabulary import stage_of_grade

    have = Question.objects.count()
    if have >= total:
        return
    batch, started = [], time.perf_counter()
    statuses = [s for s, _ in Question.Status.choices]
    pool = [make_question(7, i) for i in range(2000)]
    for index in range(have, total):
        q = pool[index % len(pool)]  # a pool of texts; hash ids stay unique
        batch.append(Question(
            hash_id=f"bench{index:08d}", subject=q.subject, grade=q.grade, stage=stage_of_grade(q.grade),
            qtype=q.qtype, text=q.text, answers=q.ground_truth, status=statuses[index % len(statuses)],
        ))  # fmt: skip
        if len(batch) == 5000:
            Question.objects.bulk_create(batch)
            batch = []
    if batch:
        Question.objects.bulk_create(batch)
    print(f"filled {total - have} questions in {time.perf_counter() - started:.1f}s")


def measure(client, url: str, repeat: int) -> str:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    times.sort()
    p95 = times[int(0.95 * (len(times) - 1))]
    return f"{url:60s} p50 {statistics.median(times):6.1f} ms  p95 {p95:6.1f} ms  max {times[-1]:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from annotation.models import Question
    from k12vista import services
    from k12vista.roles import Role

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # the manifest production serves from
    fill(args.questions)
    from django.conf import settings
    from django.contrib.auth import get_user_model

    User = get_user_model()
    researcher = User.objects.filter(username="bench-researcher").first() or services.create_user(
        username="bench-researcher", roles=[Role.RESEARCHER], password="bench-password-1"
    )
    annotator = User.objects.filter(username="bench-annotator").first() or services.create_user(
        username="bench-annotator", roles=[Role.ANNOTATOR], password="bench-password-1"
    )
    deep = Question.objects.order_by("-id").values_list("id", flat=True)[100]
    client = Client()
    client.force_login(researcher, backend="django.contrib.auth.backends.ModelBackend")
    print(f"{Question.objects.count():,} questions, database {settings.DATABASES['default']['ENGINE']}")
    for url in (
        "/annotate/questions/",
        f"/annotate/questions/?after={deep}",
        "/annotate/questions/?subject=physics&grade=12&qtype=free_response",
        "/annotate/questions/?status=ocr_reviewed&stage=middle",
        "/api/questions/?subject=math&page_size=100",
    ):
        print(measure(client, url, args.repeat))
    client.force_login(annotator, backend="django.contrib.auth.backends.ModelBackend")
    print(measure(client, "/annotate/", args.repeat))


if __name__ == "__main__":
    main()
