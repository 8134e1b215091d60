import json

from django.core.management.base import BaseCommand, CommandError

from annotation.export import FORMATS, ExportError, export_questions, filter_questions


class Command(BaseCommand):
    help = "Exports questions in the reference release format (JSONL) or ours (zip) and prints a JSON summary."

    def add_arguments(self, parser):
        parser.add_argument("--subject")
        parser.add_argument("--grade", type=int)
        parser.add_argument("--stage")
        parser.add_argument("--type", dest="qtype", help="Code or Chinese name, e.g. multiple_choice or 选择题.")
        parser.add_argument("--status")
        parser.add_argument("--hash-id", dest="hash_ids", action="append", help="Repeat for several.")
        parser.add_argument("--format", dest="fmt", choices=FORMATS, default="reference")
        parser.add_argument("--out", required=True, help="File to write (.jsonl for reference, .zip for studio).")

    def handle(self, *args, fmt, out, **options):
        filters = {name: options[name] for name in ("subject", "grade", "stage", "qtype", "status", "hash_ids")}
        try:
            result = export_questions(queryset=filter_questions(filters), fmt=fmt, out_path=out)
        except ExportError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(result, ensure_ascii=False, indent=2))
