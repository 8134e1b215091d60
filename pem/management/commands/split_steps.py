import json

from django.core.management.base import BaseCommand, CommandError

from inference.models import InferenceRun, ModelEndpoint
from inference.services import EndpointError
from pem import splitting


class Command(BaseCommand):
    help = (
        "Starts a splitting run: the splitting model splits the chains of the given inference runs into steps "
        "(the rule split stays where the model's does not reproduce the text), queued as a job like the "
        "splitting screen does. Prints the run's id and job as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("--splitter", required=True, help="The splitting model's endpoint name.")
        parser.add_argument("--run", type=int, action="append", required=True, help="An inference run id; repeat.")
        parser.add_argument("--name", default="")
        parser.add_argument("--min-coverage", type=float, default=splitting.SPLIT_MIN_COVERAGE)

    def handle(self, *args, splitter, run, name, min_coverage, **options):
        endpoint = ModelEndpoint.objects.filter(name=splitter).first()
        if endpoint is None:
            raise CommandError(f"no endpoint named {splitter}")
        runs = list(InferenceRun.objects.filter(pk__in=run))
        if len(runs) != len(set(run)):
            raise CommandError("some inference run ids do not exist")
        try:
            split_run = splitting.start_split_run(splitter=endpoint, inference_runs=runs, user=None, name=name,
                                                  min_coverage=min_coverage)  # fmt: skip
        except (splitting.SplitError, EndpointError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps({"split_run": split_run.pk, "job": split_run.job_id}))
