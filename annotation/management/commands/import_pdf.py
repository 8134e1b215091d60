import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.pdf import PdfImportError, import_document, register_pdf_upload, vision
from k12vista.vocabulary import Subject


class Command(BaseCommand):
    help = (
        "Imports exam PDFs in this process (the same service as the import job) and prints a JSON summary "
        "per file. Exits with an error if any file could not be imported."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--subject", default=Subject.MATH, choices=Subject.values)
        parser.add_argument("--grade", type=int, default=9, choices=range(1, 13), metavar="1-12")
        parser.add_argument("--user", help="Username recorded as the uploader.")
        parser.add_argument(
            "--reader", default=vision.DEFAULT_READER, choices=vision.READERS,
            help="Pages read by the vision model (SEGMENTATION_BACKEND): those the rules are unsure of, all, none.",
        )  # fmt: skip

    def handle(self, *args, paths, subject, grade, user, reader, **options):
        uploader = None
        if user:
            uploader = get_user_model().objects.filter(username=user).first()
            if uploader is None:
                raise CommandError(f"no user named {user!r}")
        failed = 0
        for path in paths:
            summary: dict = {"file": path}
            try:
                document = register_pdf_upload(uploaded_file_or_path=path, user=uploader)
                summary["source_document"] = document.pk
                summary |= import_document(document=document, subject=subject, grade=grade, user=uploader,
                                           reader=reader).as_dict()  # fmt: skip
            except (PdfImportError, OSError) as exc:
                # One bad file should not stop the others; its reason goes in its summary.
                failed += 1
                summary["error"] = str(exc)
            self.stdout.write(json.dumps(summary, ensure_ascii=False))
        if failed:
            raise CommandError(f"{failed} of {len(paths)} files could not be imported")
