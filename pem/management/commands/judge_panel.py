import json

from django.core.management.base import BaseCommand, CommandError

from inference.models import InferenceRun, ModelEndpoint, Protocol
from inference.scoring import ScoringError
from inference.services import EndpointError
from pem import panel
from pem.models import PanelRun


class Command(BaseCommand):
    help = (
        "Starts a judge panel (one step-by-step scoring run per inference run and judge, then the vote), queued as "
        "a job like the panel screen does; or, with --vote PANEL, counts an existing panel's vote again in this "
        "process. Prints JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", default="")
        parser.add_argument("--judge", action="append", default=[], help="A judge endpoint's name; repeat.")
        parser.add_argument("--run", type=int, action="append", default=[], help="An inference run id; repeat.")
        parser.add_argument("--threshold", type=int, help="Votes a label needs (default: a strict majority).")
        parser.add_argument("--explainer", default="", help="The judge whose explanations are used.")
        parser.add_argument("--vote", metavar="PANEL", help="Vote again for the panel with this name.")
        parser.add_argument("--protocol", choices=Protocol.values, default=Protocol.STUDIO,
                            help="How every judge is asked and read: the studio's or the reference's.")  # fmt: skip

    def handle(self, *args, name, judge, run, threshold, explainer, vote, protocol, **options):
        if vote:
            found = PanelRun.objects.filter(name=vote).first()
            if found is None:
                raise CommandError(f"no panel named {vote}")
            self.stdout.write(json.dumps(panel.vote(found), ensure_ascii=False, indent=2))
            return
        judges = {e.name: e for e in ModelEndpoint.objects.filter(name__in=judge)}
        missing = [n for n in judge if n not in judges]
        if missing:
            raise CommandError(f"no endpoint named {', '.join(missing)}")
        runs = list(InferenceRun.objects.filter(pk__in=run))
        if len(runs) != len(set(run)):
            raise CommandError("some inference run ids do not exist")
        try:
            started = panel.start_panel(name=name, inference_runs=runs, judges=[judges[n] for n in judge], user=None,
                                        threshold=threshold, explainer=explainer, protocol=protocol)  # fmt: skip
        except (panel.PanelError, ScoringError, EndpointError) as exc:
            raise CommandError(str(exc)) from None
        summary = {"panel": started.pk, "job": started.job_id, "threshold": started.threshold, "protocol": protocol}
        self.stdout.write(json.dumps(summary))
