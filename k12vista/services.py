"""User management: the operations the admin screens, the API and the
``create_user`` command share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from k12vista.models import Profile
from k12vista.roles import Role, assign_role


@transaction.atomic
def create_user(
    *,
    username: str,
    roles: Iterable[Role],
    email: str = "",
    password: str | None = None,
    invited_by: Any = None,
) -> Any:
    """Creates an account. Without a password the account cannot log in until
    its owner follows the invitation link (``invitation_path``)."""
    User = get_user_model()
    user = User(username=username, email=email)
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.save()
    Profile.objects.create(user=user, invited_by=invited_by)
    set_roles(user=user, roles=roles)
    return user


@transaction.atomic
def set_roles(*, user: Any, roles: Iterable[Role]) -> None:
    roles = set(roles)
    user.groups.remove(*Group.objects.filter(name__in=[r.value for r in Role if r not in roles]))
    for role in roles:
        assign_role(user, role)
    if Role.ADMIN not in roles and user.is_staff and not user.is_superuser:
        user.is_staff = False
        user.save(update_fields=["is_staff"])


def invitation_path(user: Any) -> str:
    """A one-time link (valid PASSWORD_RESET_TIMEOUT) where the user sets a password."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return reverse("password_set", kwargs={"uidb64": uid, "token": token})
