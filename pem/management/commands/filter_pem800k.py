import json

from django.core.management.base import BaseCommand, CommandError

from pem.training import filters


class Command(BaseCommand):
    help = ("Runs the four PEM-800K filters (format, consistency, coverage, balance) over the chains labelled by one "
            "label source, in this process, and prints the filter run's id and funnel as JSON.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--source", default="imported", help="Label source: imported, panel, model or gold.")
        parser.add_argument("--rater", required=True, help="The import's, judge's or panel's name.")
        parser.add_argument("--params", default="{}", help='Thresholds as JSON, e.g. {"coverage": {"min_models": 3}}')

    def handle(self, *args, source, rater, params, **options):
        try:
            given = json.loads(params)
            run = filters.start_filter_run(source=source, rater=rater, params=given, user=None)
        except (ValueError, filters.FilterError) as exc:
            raise CommandError(str(exc)) from None
        filters.run_filters(run)
        self.stdout.write(json.dumps({"filter_run": run.pk, "kept": run.kept, "funnel": run.funnel}, indent=2))
