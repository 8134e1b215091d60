import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from k12vista.import_files import ImportFileError
from pem.pebench_import import import_records


class Command(BaseCommand):
    help = (
        "Imports chains of thought with their steps and labels from a PEBench JSONL file (the reference format or "
        "ours, or a zip holding one) in this process, the same service as the import job, and prints a JSON summary."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument(
            "--name", default="", help="Rater recorded on the imported labels (default: the file name)."
        )

    def handle(self, *args, path, name, **options):
        if not Path(path).is_file():
            raise CommandError(f"no file at {path}")
        try:
            report = import_records(path=path, name=name)
        except (ImportFileError, OSError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
