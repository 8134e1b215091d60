import json

from django.core.management.base import BaseCommand, CommandError

from inference.models import ModelEndpoint
from inference.services import EndpointError
from pem import given_steps


class Command(BaseCommand):
    help = (
        "PEBench as the paper measures it: starts a job in which a judge labels the gold step list of every "
        "PEBench item with the registered reference PEBench prompt (labels compared by position); or, with "
        "--report, prints that judge's per-label and overall accuracy. Prints JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("judge", help="The judge endpoint's name.")
        parser.add_argument("--prompt-set", default="", help="A registered reference set (default: the newest).")
        parser.add_argument("--report", action="store_true", help="Print the metric instead of starting a job.")

    def handle(self, *args, judge, prompt_set, report, **options):
        endpoint = ModelEndpoint.objects.filter(name=judge).first()
        if endpoint is None:
            raise CommandError(f"no endpoint named {judge}")
        if report:
            self.stdout.write(json.dumps(given_steps.report(given_steps.rater_for(endpoint)), ensure_ascii=False))
            return
        try:
            job = given_steps.start(judge=endpoint, user=None, prompt_set=prompt_set)
        except (given_steps.GivenStepsError, EndpointError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps({"job": job.pk, "rater": given_steps.rater_for(endpoint)}, ensure_ascii=False))
