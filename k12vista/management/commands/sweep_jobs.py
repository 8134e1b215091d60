from django.core.management.base import BaseCommand

from k12vista import jobs


class Command(BaseCommand):
    help = (
        "Sweeps the Job table once: sends jobs whose broker message was never sent or was lost, hands jobs of "
        "dead workers to live ones and finishes cancels whose worker is gone. Every worker does this on its own "
        "every JOB_SWEEP_INTERVAL_SECONDS; this is for a deployment without workers running, or by hand."
    )

    def handle(self, *args, **options):
        outcome = jobs.sweep()
        self.stdout.write(f"{outcome['sent']} message(s) sent, {outcome['cancelled']} orphaned job(s) cancelled")
