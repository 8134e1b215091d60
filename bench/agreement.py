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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
