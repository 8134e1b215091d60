import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation import releases
from annotation.models import CandidateSet, Release
from k12vista.jobs import execute_job


class Command(BaseCommand):
    help = "Builds the next release from a candidate set (and publishes it with --publish); prints its files."

    def add_arguments(self, parser):
        parser.add_argument("--candidate-set", type=int, required=True)
        parser.add_argument("--name", default="")
        parser.add_argument("--licence", default=releases.DEFAULT_LICENCE)
        parser.add_argument("--publish", action="store_true")
        parser.add_argument("--by", required=True, help="Username recorded on the release.")

    def handle(self, *args, candidate_set, name, licence, publish, by, **options):
        person = get_user_model().objects.filter(username=by).first()
        candidate = CandidateSet.objects.filter(pk=candidate_set).first()
        if person is None or candidate is None:
            raise CommandError("no such user or candidate set")
        try:
            release = releases.start_release(candidate_set=candidate, by=person, name=name, licence=licence)
            execute_job(release.job_id)
            release.refresh_from_db()
            if release.status != Release.Status.DRAFT:
                raise CommandError(release.error or f"the build ended {release.status}")
            if publish:
                release = releases.publish_release(release=release, by=person)
        except releases.ReleaseError as exc:
            raise CommandError(str(exc)) from None
        files = [{"form": f.form, "path": f.path, "sha256": f.sha256, "size": f.size} for f in release.files.all()]
        self.stdout.write(json.dumps({"version": release.version, "status": release.status, "files": files},
                                     indent=2))  # fmt: skip
