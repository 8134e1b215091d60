"""Choosing PEBench: a stratified, seeded sample of eligible chains of thought,
whose labelling is opened as it is chosen."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils.translation import gettext_noop

from k12vista.line_reasons import reason, reason_templates
from pem.models import ChainOfThought, PEBenchBuild, PEBenchItem
from pem.services import PEBenchError

# What build_pebench may stratify on: ChainOfThought fields with few values.
STRATUM_FIELDS = ("subject", "qtype", "stage", "grade", "model_name", "origin")
DEFAULT_STRATA = ("subject", "qtype", "stage")

# Why a build is refused: the build runs as a job, so its refusal is kept as a code and worded in each
# reader's language (k12vista.line_reasons; k12vista.jobs stores it on the failed job).
reason_templates({
    "build_strata": gettext_noop("cannot stratify on %(names)s (choose from %(choices)s)"),
    "build_sizes": gettext_noop("the target size and the minimum step count must be at least 1"),
    "build_none_eligible": gettext_noop(
        "no chain of thought is eligible (at least %(min_steps)s steps, not in PEBench, not used for PEM training)"
    ),
    "build_chain_in_training": gettext_noop("a chosen chain was marked as PEM training data meanwhile; build again"),
    "build_chains_taken": gettext_noop(
        "another PEBench build took some of the same chains at the same time; build again"
    ),
})  # fmt: skip


def largest_remainder(available: dict[str, int], target: int) -> dict[str, int]:
    """Seats per stratum in proportion to its size (Hamilton's method).

    Each stratum gets the whole part of its share of the target, and the
    seats left go to the largest fractional parts; equal parts go by stratum
    name, so the allocation is the same every time. A share never exceeds
    the stratum's size, and a stratum whose share is under one seat may get
    none: the build's counts show it.
    """
    total = sum(available.values())
    target = min(target, total)
    if not total:
        return dict.fromkeys(available, 0)
    # Integer arithmetic: remainders compare exactly, with no floating-point ties.
    seats = {k: target * n // total for k, n in available.items()}
    by_remainder = sorted(available, key=lambda k: (-(target * available[k] % total), k))
    for k in by_remainder[: target - sum(seats.values())]:
        seats[k] += 1
    return seats


def stratum_of(cot: dict, strata: Sequence[str]) -> str:
    return "|".join(str(cot[name] or "-") for name in strata)


def _open_labelling(cots: Iterable[ChainOfThought]) -> None:
    from pem.labelling import open_labelling  # the labelling screen's module decides who labels what

    for cot in cots:
        open_labelling(cot)


def build_pebench(
    *, target_size: int, min_steps: int, strata: Sequence[str] = DEFAULT_STRATA, seed: int, user: Any,
    job: Any = None,
) -> PEBenchBuild:  # fmt: skip
    """Chooses chains of thought into PEBench and opens their labelling.

    Eligible: at least ``min_steps`` steps, not in PEBench yet, never used as
    PEM training data. The target is shared among strata in proportion to
    their size (largest remainder), and each stratum is sampled with a random
    generator seeded by ``seed`` and the stratum, so the same data and seed
    give the same choice. Asking for more than is eligible takes everything
    and records the shortfall.
    """
    strata = list(dict.fromkeys(strata))
    unknown = [name for name in strata if name not in STRATUM_FIELDS]
    if unknown:
        raise PEBenchError(reason("build_strata", names=", ".join(unknown), choices=", ".join(STRATUM_FIELDS)))
    if target_size < 1 or min_steps < 1:
        raise PEBenchError(reason("build_sizes"))
    eligible = ChainOfThought.objects.eligible_for_pebench(min_steps).order_by("id")
    by_stratum: dict[str, list[int]] = defaultdict(list)
    for row in eligible.values("id", *strata):
        by_stratum[stratum_of(row, strata)].append(row["id"])
    if not by_stratum:
        raise PEBenchError(reason("build_none_eligible", min_steps=min_steps))
    seats = largest_remainder({k: len(v) for k, v in by_stratum.items()}, target_size)
    chosen: list[int] = []
    counts: dict[str, dict[str, int]] = {}
    for stratum in sorted(by_stratum):
        ids = by_stratum[stratum]
        rng = random.Random(f"{seed}|{stratum}")  # noqa: S311 - a reproducible sample, not a secret
        picked = sorted(rng.sample(ids, seats[stratum]))
        chosen += picked
        counts[stratum] = {"available": len(ids), "taken": len(picked)}
    try:
        with transaction.atomic():
            build = PEBenchBuild.objects.create(
                target_size=target_size, min_steps=min_steps, strata=strata, seed=seed, created_by=user, job=job,
                counts={"strata": counts, "taken": len(chosen), "shortfall": max(0, target_size - len(chosen))},
            )  # fmt: skip
            # Checked again under the insert: a chain flagged for training meanwhile is refused here.
            if ChainOfThought.objects.filter(pk__in=chosen, in_training_data=True).exists():
                raise PEBenchError(reason("build_chain_in_training"))
            PEBenchItem.objects.bulk_create(PEBenchItem(cot_id=pk, build=build) for pk in chosen)
            _open_labelling(ChainOfThought.objects.filter(pk__in=chosen).order_by("id"))
    except IntegrityError:
        raise PEBenchError(reason("build_chains_taken")) from None
    return build
