from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from k12vista.demo import demo_loader
from pem.build import build_pebench
from pem.models import ChainOfThought
from pem.pebench_import import import_records

DEMO_CHAINS = Path(settings.BASE_DIR) / "fixtures" / "pebench-demo.jsonl"
MIN_STEPS = 3


@demo_loader(order=30)
def demo_pebench() -> str:
    """Eight labelled chains of thought about demo questions (bench/generate.py, seed 2026),
    put in PEBench so that the labelling screens have work. Runs after the questions (order 20)
    so that the chains link to them."""
    report = import_records(path=DEMO_CHAINS, name="pebench-demo")
    eligible = ChainOfThought.objects.eligible_for_pebench(MIN_STEPS).count()
    built = ""
    if eligible:
        admin = get_user_model().objects.filter(username="admin").first()
        build = build_pebench(target_size=eligible, min_steps=MIN_STEPS, seed=0, user=admin)
        built = f", {build.counts['taken']} put in PEBench"
    return f"demo chains of thought: {report.created} created, {report.unchanged} already there{built}"
