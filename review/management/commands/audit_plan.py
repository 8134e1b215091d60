import json

from django.core.management.base import BaseCommand, CommandError

from review.sampling import AQL_HEADINGS, single_sampling_plan


class Command(BaseCommand):
    help = (
        "Prints the ISO 2859-1 / ANSI Z1.4 single sampling plan (normal inspection, general level II) "
        "for a lot size and an AQL as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("--lot-size", type=int, required=True, help="Number of items in the lot (stratum).")
        parser.add_argument("--aql", type=float, required=True, help=f"One of {', '.join(AQL_HEADINGS)}.")

    def handle(self, *args, lot_size, aql, **options):
        try:
            plan = single_sampling_plan(lot_size, aql)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(plan.as_dict(), indent=2))
