"""Times the full agreement report at PEBench's size.

    DATA_DIR=$(mktemp -d) SECRET_KEY=... ALLOWED_HOSTS=localhost BEHIND_TLS=0 \\
        .venv/bin/python -m bench.agreement [--items 3033] [--repeat 5]

Run it against a throwaway database (SQLite under DATA_DIR, or PostgreSQL by
DATABASE_URL): it migrates it and fills it, so it refuses to start unless one of
them is set. It creates, by bulk insert, ``--items`` chains of thought of 3-10
steps (6.3 on average), two annotators' labels per step (from a pool of ten
annotators, as the labelling queue assigns them), a gold label per step, four
judge models' labels (each from its own scoring run, with an alignment row per
item) and times ``pem.reports.agreement_report()`` (queries included), printing
the best and median of ``--repeat`` runs and the headline numbers. The target
(issue 5): under 2 s.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import django

JUDGES = {"K12-PEM": 0.80, "GPT-4o": 0.72, "Qwen2.5-VL-72B": 0.70, "InternVL2.5-78B": 0.65}
ANNOTATORS = [f"annotator{i:02d}" for i in range(10)]
CS_SHARE = 0.59  # PEBench's share of correct steps (docs/benchmarks.md, the generator)


def fill(n_items: int, seed: int) -> None:
    from django.db import transaction

    from inference.models import InferenceRun, ModelEndpoint, ScoringRun
    from k12vista.vocabulary import LABEL_CODES
    from pem.models import Alignment, ChainOfThought, Step, StepLabel

    rng = random.Random(seed)
    errors = LABEL_CODES[1:]

    def gold_label() -> str:
        return "CS" if rng.random() < CS_SHARE else rng.choice(errors)

    def rated(gold: str, accuracy: float) -> str:
        return (
            gold if rng.random() < accuracy else ("CS" if gold != "CS" and rng.random() < 0.5 else rng.choice(errors))
        )

    with transaction.atomic():
        tag = f"bench-{time.time_ns()}"
        endpoints = [ModelEndpoint.objects.create(name=f"{tag}-{name}", model_name=name) for name in JUDGES]
        run = InferenceRun.objects.create(name=tag, endpoint=endpoints[0], mode="step_by_step")
        scoring = {
            name: ScoringRun.objects.create(name=name, inference_run=run, judge=endpoint, method="judge_steps")
            for name, endpoint in zip(JUDGES, endpoints, strict=True)
        }
        cots = ChainOfThought.objects.bulk_create(
            ChainOfThought(key=f"{tag}-{i}", origin="imported", status="gold", subject="math") for i in range(n_items)
        )
        lengths = [rng.choice((3, 4, 5, 6, 7, 8, 9, 10)) if rng.random() < 0.7 else 6 for _ in cots]
        steps = Step.objects.bulk_create(
            (Step(cot=cot, position=p, text=f"step {p}")
             for cot, n in zip(cots, lengths, strict=True) for p in range(1, n + 1)),
            batch_size=5000,
        )  # fmt: skip
        labels, alignments = [], []
        at = 0
        for cot, n in zip(cots, lengths, strict=True):
            pair = rng.sample(ANNOTATORS, 2)
            for step in steps[at : at + n]:
                gold = gold_label()
                labels.append(StepLabel(step=step, source="gold", rater="gold", label=gold))
                labels += [StepLabel(step=step, source="person", rater=who, label=rated(gold, 0.85)) for who in pair]
                labels += [
                    StepLabel(step=step, source="model", rater=name, scoring_run=scoring[name], label=rated(gold, acc))
                    for name, acc in JUDGES.items()
                ]
            at += n
            for name in JUDGES:
                judge_steps = n if rng.random() < 0.8 else n + rng.choice((-1, 1))
                pairs = [
                    [p, min(p, judge_steps), 1.0, "match" if p <= judge_steps else "merged"] for p in range(1, n + 1)
                ]
                pairs += [[None, j, 0.0, "extra"] for j in range(n + 1, judge_steps + 1)]
                alignments.append(
                    Alignment(cot=cot, scoring_run=scoring[name], gold_steps=n, judge_steps=judge_steps, pairs=pairs)
                )
        StepLabel.objects.bulk_create(labels, batch_size=5000)
        Alignment.objects.bulk_create(alignments, batch_size=2000)
    print(f"filled {n_items} items, {len(steps)} steps ({len(steps) / n_items:.2f} a chain), {len(labels)} labels")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agreement", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=3033)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reuse", action="store_true", help="time the report on the data a previous run left")
    parser.add_argument("--page", action="store_true",
                        help="also time the stored report's job and the agreement page reading it, beside the page "
                             "computing the report in the request (the old page)")  # fmt: skip
    args = parser.parse_args(argv)
    if not (os.environ.get("DATA_DIR") or os.environ.get("DATABASE_URL")):
        parser.error("set DATA_DIR (or DATABASE_URL) to a throwaway location; this fills the database")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")
    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from pem.models import ChainOfThought
    from pem.reports import agreement_report

    call_command("migrate", verbosity=0, interactive=False)
    if not args.reuse:
        if ChainOfThought.objects.exists():
            parser.error("the database already holds chains of thought; use a fresh one (or --reuse)")
        started = time.perf_counter()
        fill(args.items, args.seed)
        print(f"fill: {time.perf_counter() - started:.1f} s (not part of the timing)")

    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        report = agreement_report()
        times.append(time.perf_counter() - started)
    people = report["people"]
    print(f"database: {settings.DATABASES['default']['ENGINE']}, DEBUG={settings.DEBUG}")
    print(f"items {report['items']}, steps {report['steps']}, judges {len(report['judges'])}")
    print(
        f"people: kappa {people['cohen_kappa']['value']:.3f}, alpha {people['krippendorff_alpha']['value']:.3f}, "
        f"AC1 {people['gwet_ac1']['value']:.3f}"
    )
    for judge in report["judges"]:
        accuracy, kappa = judge["accuracy"]["value"], judge["cohen_kappa"]["value"]
        print(f"  {judge['rater']:16s} accuracy {accuracy:.3f} kappa {kappa:.3f}")
    print(f"agreement_report: best {min(times):.3f} s, median {statistics.median(times):.3f} s over {args.repeat} runs "
          "(target < 2 s)")  # fmt: skip
    if args.page:
        bench_page(args.repeat)
    return 0


def page_once(client, url: str, *, memory: bool = False) -> tuple[float, float | None, int]:
    """Seconds, queries and (with ``memory``, in a pass of its own: tracing slows Python down
    several times) the peak Python memory in MiB of one GET of the page."""
    import tracemalloc

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if memory:
        tracemalloc.start()
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, HTTP_HOST="localhost")
    took = time.perf_counter() - started
    peak = None
    if memory:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    assert response.status_code == 200, response.status_code
    return took, peak, len(queries)


def bench_page(repeat: int) -> None:
    """The page as it is (reading the stored report) beside the page computing it in the request."""
    from django.conf import settings
    from django.test import override_settings

    # The bench has no collected static files: plain static URLs instead of the manifest's.
    storages = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(STORAGES=storages):
        _bench_page(repeat)


def _bench_page(repeat: int) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings

    from k12vista import services
    from k12vista.roles import Role
    from pem import agreement_store
    from pem.models import StoredAgreement

    user = get_user_model().objects.filter(username="bench-researcher").first() or services.create_user(
        username="bench-researcher", roles=[Role.RESEARCHER], password="bench-password-1234"
    )  # fmt: skip
    client = Client()
    client.force_login(user)
    started = time.perf_counter()
    stored = agreement_store.compute_and_store("all")
    print(f"stored report job (compute_and_store over {stored.fingerprint['labels']} labels): "
          f"{time.perf_counter() - started:.2f} s")  # fmt: skip
    started = time.perf_counter()
    agreement_store.fingerprint()
    print(f"  of which the labels' fingerprint (read by every page view): {time.perf_counter() - started:.3f} s")
    rows: dict[str, list] = {"stored": [], "computed in the request": []}

    def inline(memory: bool = False):
        with override_settings(AGREEMENT_INLINE_LABELS=10**12):
            StoredAgreement.objects.filter(pk=stored.pk).update(fingerprint={})  # out of date: computed inline
            found = page_once(client, "/pem/agreement/", memory=memory)
            StoredAgreement.objects.filter(pk=stored.pk).update(fingerprint=stored.fingerprint)
        return found

    for _ in range(repeat):  # interleaved, so that both see the same (shared, busy) machine
        rows["stored"].append(page_once(client, "/pem/agreement/"))
        rows["computed in the request"].append(inline())
    peaks = {"stored": page_once(client, "/pem/agreement/", memory=True)[1], "computed in the request":
             inline(memory=True)[1]}  # fmt: skip
    for name, found in rows.items():
        times = [t for t, _m, _q in found]
        print(f"agreement page, {name}: best {min(times):.3f} s, median {statistics.median(times):.3f} s, "
              f"{found[0][2]} queries; peak Python memory {peaks[name]:.1f} MiB (traced pass)")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
