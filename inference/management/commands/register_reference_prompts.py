import json

from django.core.management.base import BaseCommand, CommandError

from inference.reference import register


class Command(BaseCommand):
    help = (
        "Registers the prompts of a checkout of the K12Vista reference repository (its K12_Vista/code/prompt.py "
        "and K12_PEMBench/code/prompt.py, read with ast and never imported) as a prompt set named for its commit, "
        "and prints the set as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="The checkout's root folder (the one holding K12_Vista/ and K12_PEMBench/).")

    def handle(self, *args, path, **options):
        try:
            done = register.register_checkout(path)
        except register.CheckoutError as exc:
            raise CommandError(str(exc)) from None
        rows = [{"id": p.pk, "kind": p.kind, "qtype": p.qtype, "version": p.version, "hash": p.content_hash}
                for p in done.rows]  # fmt: skip
        report = {"prompt_set": done.set_name, "revision": done.revision, "created": done.created, "prompts": rows}
        self.stdout.write(json.dumps(report, ensure_ascii=False))
