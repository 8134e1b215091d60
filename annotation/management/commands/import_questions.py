import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.jsonl_import import import_questions_file, register_upload
from k12vista.import_files import ImportFileError


class Command(BaseCommand):
    help = (
        "Imports questions from a JSONL file, or a zip of one with its images, in this process "
        "(the same service as the import job) and prints a JSON summary."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--user", help="Username recorded as the importer.")

    def handle(self, *args, path, user, **options):
        importer = None
        if user:
            importer = get_user_model().objects.filter(username=user).first()
            if importer is None:
                raise CommandError(f"no user named {user!r}")
        try:
            # Registered like an upload, so the questions keep a link to the file they came from.
            document = register_upload(path=path, user=importer)
            report = import_questions_file(path=document.file.path, user=importer, source_document=document,
                                           workers=settings.IMPORT_WORKERS)  # fmt: skip
        except (ImportFileError, OSError) as exc:
            raise CommandError(str(exc)) from None
        summary = {"source_document": document.pk, **report.as_dict()}
        self.stdout.write(json.dumps(summary, ensure_ascii=False, indent=2))
