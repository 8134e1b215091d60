from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from k12vista import services
from k12vista.demo import loaders
from k12vista.roles import Role

# One account per role; the password is printed by `make run`. Demo data only
# loads in DEMO_MODE (on with DEBUG), so these never reach a production site.
DEMO_ACCOUNTS = [
    ("annotator", Role.ANNOTATOR),
    ("inspector", Role.INSPECTOR),
    ("researcher", Role.RESEARCHER),
    ("admin", Role.ADMIN),
]
DEMO_PASSWORD = "k12vista-demo"  # noqa: S105


class Command(BaseCommand):
    help = "Loads the demo accounts and data. Idempotent: running it again adds nothing."

    def handle(self, *args, **options):
        if not settings.DEMO_MODE:
            raise CommandError("Demo data is only loaded with DEMO_MODE=1 (or DEBUG=1).")
        User = get_user_model()
        for username, role in DEMO_ACCOUNTS:
            if User.objects.filter(username=username).exists():
                continue
            services.create_user(username=username, roles=[role], password=DEMO_PASSWORD)
            self.stdout.write(f"created demo account {username}")
        for loader in loaders():
            self.stdout.write(loader())
        self.stdout.write("demo data is loaded")
