"""System checks of our own, run by ``manage.py check`` (``--deploy`` for the deployment ones)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

from k12vista.management.commands.load_demo import DEMO_ACCOUNTS, DEMO_PASSWORD


@checks.register(checks.Tags.security, deploy=True)
def demo_accounts_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warns when ``load_demo``'s accounts, with their published password, exist on a site with DEBUG off."""
    if settings.DEBUG:
        return []
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import check_password

    names = [username for username, _role in DEMO_ACCOUNTS]
    try:
        users = list(get_user_model().objects.filter(username__in=names, is_active=True).order_by("username"))
    except DatabaseError:  # no database yet (a fresh deployment before migrate): nothing to warn about
        return []
    # The module-level function, so that checking changes nothing (a user's own would upgrade the hash).
    found = [user.username for user in users if check_password(DEMO_PASSWORD, user.password)]
    if not found:
        return []
    return [
        checks.Warning(
            f"Demo accounts with the demo password exist while DEBUG is off: {', '.join(found)}.",
            hint="Delete them, or deactivate them, or give them real passwords (manage.py changepassword).",
            id="k12vista.W001",
        )
    ]
