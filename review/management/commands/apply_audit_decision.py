from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from review import decisions, services
from review.models import Audit


class Command(BaseCommand):
    help = "Applies an audit's sampling-plan decision: accepted lots move to audited, rejected lots go to rework."

    def add_arguments(self, parser):
        parser.add_argument("audit", type=int, help="The audit's id.")
        parser.add_argument("--by", required=True, help="Username of the inspector applying it (in the history).")

    def handle(self, *args, audit, by, **options):
        found = Audit.objects.filter(pk=audit).first()
        person = get_user_model().objects.filter(username=by).first()
        if found is None or person is None:
            raise CommandError("no such audit or user")
        try:
            lots = decisions.apply_decision(audit=found, by=person)
        except services.AuditError as exc:
            raise CommandError(str(exc)) from None
        for lot in lots:
            self.stdout.write(f"{lot.stratum}: {lot.decision}, {lot.moved} audited, {lot.reworked} sent back")
