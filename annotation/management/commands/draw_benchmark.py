import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation import draw
from k12vista.jobs import execute_job


class Command(BaseCommand):
    help = "Previews the stratified allocation, or draws a candidate set (with --draw) and prints its report."

    def add_arguments(self, parser):
        parser.add_argument("--per-cell", type=int, default=draw.DEFAULT_PER_CELL)
        parser.add_argument("--no-coverage", action="store_true", help="Do not add questions to cover core units.")
        parser.add_argument("--subject", action="append", dest="subjects")
        parser.add_argument(
            "--draw", action="store_true", dest="do_draw", help="Draw and store the set (default: preview only)."
        )
        parser.add_argument("--seed", type=int)
        parser.add_argument("--name", default="")
        parser.add_argument("--by", help="Username recorded on the draw (needed with --draw).")

    def handle(self, *args, per_cell, no_coverage, subjects, do_draw, seed, name, by, **options):
        try:
            targets = draw.Targets.from_dict({"per_cell": per_cell, "cover_knowledge": not no_coverage,
                                                  "subjects": subjects or []})  # fmt: skip
        except draw.DrawError as exc:
            raise CommandError(str(exc)) from None
        if not do_draw:
            self.stdout.write(json.dumps(draw.preview(targets), ensure_ascii=False, indent=2))
            return
        person = get_user_model().objects.filter(username=by or "").first()
        if person is None:
            raise CommandError("--draw needs --by with an existing username")
        try:
            candidate = draw.start_draw(targets=targets, by=person, name=name, seed=seed)
        except draw.DrawError as exc:  # a draw that would take no question
            raise CommandError(str(exc)) from None
        execute_job(candidate.job_id)
        candidate.refresh_from_db()
        self.stdout.write(json.dumps({"candidate_set": candidate.pk, "seed": candidate.seed, **candidate.report},
                                     ensure_ascii=False, indent=2))  # fmt: skip
