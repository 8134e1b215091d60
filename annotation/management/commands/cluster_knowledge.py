import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation import knowledge
from k12vista.jobs import execute_job
from k12vista.models import Job


class Command(BaseCommand):
    help = "Clusters knowledge points into core units (per subject), in this process, as a recorded job."

    def add_arguments(self, parser):
        parser.add_argument("--subject", action="append", dest="subjects", help="Repeat for several; default all.")
        parser.add_argument("--points-per-unit", type=float, default=3.0)
        parser.add_argument("--by", required=True, help="Username recorded as having started it.")

    def handle(self, *args, subjects, points_per_unit, by, **options):
        person = get_user_model().objects.filter(username=by).first()
        if person is None:
            raise CommandError(f"no user {by!r}")
        try:
            params = knowledge.ClusterParams(points_per_unit=points_per_unit)
            job = knowledge.start_clustering(by=person, subjects=subjects, params=params)
        except knowledge.KnowledgeError as exc:
            raise CommandError(str(exc)) from None
        execute_job(job.pk)
        job.refresh_from_db()
        if job.status != Job.Status.SUCCEEDED:
            raise CommandError(job.error or job.status)
        self.stdout.write(json.dumps(job.result, ensure_ascii=False, indent=2))
