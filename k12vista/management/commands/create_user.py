from django.core.management.base import BaseCommand, CommandError

from k12vista import services
from k12vista.roles import Role


class Command(BaseCommand):
    help = "Creates an account with roles and prints its invitation link (no self-registration exists)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", action="append", choices=[r.value for r in Role], required=True)
        parser.add_argument("--email", default="")
        parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="Prefix for the printed link.")

    def handle(self, *args, username, role, email, base_url, **options):
        from django.contrib.auth import get_user_model

        if get_user_model().objects.filter(username__iexact=username).exists():
            raise CommandError(f"user {username!r} already exists")
        user = services.create_user(username=username, email=email, roles=[Role(r) for r in role])
        self.stdout.write(f"{base_url.rstrip('/')}{services.invitation_path(user)}")
