import json

from django.core.management.base import BaseCommand, CommandError

from pem.models import FilterRun, TrainingExport
from pem.training import exports, formats


class Command(BaseCommand):
    help = (
        "Writes the chains a filter run kept as PEM training data (LLaMA-Factory, ms-swift, TRL, Qwen) under "
        "MEDIA_ROOT, in this process, checks every line against its format, and prints the result as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("filter_run", type=int)
        parser.add_argument("--formats", nargs="+", default=list(formats.FORMATS), choices=formats.FORMATS)
        parser.add_argument("--min-pixels", type=int, default=exports.DEFAULT_MIN_PIXELS)
        parser.add_argument("--max-pixels", type=int, default=exports.DEFAULT_MAX_PIXELS)
        parser.add_argument("--style", choices=TrainingExport.Style.values, default=TrainingExport.Style.STUDIO,
                            help="studio (JSON, label codes) or reference (K12-PEM's prompt and list).")  # fmt: skip
        parser.add_argument("--prompt-set", default="", help="A registered reference set (default: the newest).")

    def handle(self, *args, filter_run, formats, min_pixels, max_pixels, style, prompt_set, **options):
        run = FilterRun.objects.filter(pk=filter_run).first()
        if run is None:
            raise CommandError(f"no filter run {filter_run}")
        try:
            export = exports.start_export(filter_run=run, user=None, formats_wanted=formats, min_pixels=min_pixels,
                                          max_pixels=max_pixels, style=style, prompt_set=prompt_set)  # fmt: skip
            result = exports.write_export(export)
        except exports.ExportError as exc:
            raise CommandError(str(exc)) from None
        result["checked"] = exports.verify_export(export)
        self.stdout.write(json.dumps(result, indent=2))
