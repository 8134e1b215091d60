import json

from django.core.management.base import BaseCommand, CommandError

from inference import campaigns, services
from inference.models import InferenceRun, ModelEndpoint, Protocol


class Command(BaseCommand):
    help = (
        "Starts a campaign: one inference run per endpoint over the same questions (the question bank's filters), "
        "queued as jobs like the campaign screen does, and prints the campaign's id and runs as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--endpoint", action="append", required=True, help="An endpoint's name; repeat for each.")
        parser.add_argument("--mode", choices=InferenceRun.Mode.values, default=InferenceRun.Mode.STEP_BY_STEP)
        parser.add_argument("--input-form", choices=InferenceRun.InputForm.values, default="images")
        for name in ("subject", "grade", "stage", "qtype", "status"):
            parser.add_argument(f"--{name}", help=f"Only questions with this {name}.")
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--top-p", type=float)
        parser.add_argument("--seed", type=int)
        parser.add_argument(
            "--protocol",
            choices=Protocol.values,
            default=Protocol.STUDIO,
            help="How the runs ask their models (reference: as the K12Vista reference code).",
        )
        parser.add_argument("--prompt-set", default="", help="The registered reference prompt set (default newest).")

    def handle(self, *args, name, endpoint, mode, input_form, seed, protocol, prompt_set, **options):
        found = {e.name: e for e in ModelEndpoint.objects.filter(name__in=endpoint)}
        missing = [n for n in endpoint if n not in found]
        if missing:
            raise CommandError(f"no endpoint named {', '.join(missing)}")
        filters = {k: options[k] for k in ("subject", "grade", "stage", "qtype", "status") if options.get(k)}
        params = {k: options[k] for k in ("temperature", "max_tokens", "top_p") if options.get(k) is not None}
        try:
            campaign = campaigns.start_campaign(name=name, endpoints=[found[n] for n in endpoint], mode=mode,
                                                filters=filters, user=None, input_form=input_form, params=params,
                                                seed=seed, protocol=protocol, prompt_set=prompt_set)  # fmt: skip
        except (campaigns.CampaignError, services.EndpointError) as exc:
            raise CommandError(str(exc)) from None
        runs = [{"run": r.pk, "endpoint": r.endpoint.name, "job": r.job_id} for r in campaign.runs.all()]
        self.stdout.write(json.dumps({"campaign": campaign.pk, "runs": runs}, ensure_ascii=False, indent=2))
