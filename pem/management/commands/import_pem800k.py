import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from k12vista.import_files import ImportFileError
from pem.training.pem800k_import import import_pem800k


class Command(BaseCommand):
    help = ("Imports a PEM-800K JSONL (or a zip holding one) in this process, the same service as the import job, "
            "and prints the report as JSON.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--name", default="", help="Rater recorded on the imported labels (default: file name).")

    def handle(self, *args, path, name, **options):
        if not Path(path).is_file():
            raise CommandError(f"no file at {path}")
        try:
            report = import_pem800k(path=path, name=name)
        except (ImportFileError, OSError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(report, ensure_ascii=False, indent=2))
