"""Stores the leaderboard slices of finished scoring runs that have none (runs
scored before the board kept them), or of every finished run with --all."""

from django.core.management.base import BaseCommand

from inference import standings
from inference.models import ScoringRun
from k12vista.models import Job


class Command(BaseCommand):
    help = "Store leaderboard slices for finished scoring runs that have none (or, with --all, retake every one)."

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="retake the snapshot of every finished scoring run")

    def handle(self, *args, **options):
        if options["all"]:
            runs = [
                r for r in ScoringRun.objects.select_related("job") if standings.status_of(r) == Job.Status.SUCCEEDED
            ]
        else:
            runs = standings.runs_without_snapshot()
        for run in runs:
            standings.take_snapshot(run)
            self.stdout.write(f"scoring run {run.pk}: slices stored")
        self.stdout.write(self.style.SUCCESS(f"{len(runs)} snapshot(s) taken"))
