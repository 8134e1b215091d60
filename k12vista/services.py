"""User management: the operations the admin screens, the API and the
``create_user`` command share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.db.models.signals import post_save, pre_save
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from rest_framework.authtoken.models import Token

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


def manageable_by(user: Any) -> Any:
    """The accounts this administrator may edit or send an invitation (a password reset) to: a
    superuser's only by a superuser, or the admin role could take one over."""
    people = get_user_model().objects.all()
    return people if user.is_superuser else people.filter(is_superuser=False)


def invitation_path(user: Any) -> str:
    """A one-time link (valid PASSWORD_RESET_TIMEOUT) where the user sets a password."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return reverse("password_set", kwargs={"uidb64": uid, "token": token})


# --- API tokens ---------------------------------------------------------------------------------


def new_api_token(user: Any) -> Token:
    """Replaces the user's API token with a new one (the old one stops working at once)."""
    with transaction.atomic():
        revoke_api_tokens(user)
        return Token.objects.create(user=user)


def revoke_api_tokens(user: Any) -> None:
    Token.objects.filter(user=user).delete()


def _credentials_changed(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    """Before a user is saved: notes whether the password changed or the account was disabled.

    A token is a second password that never expires; a person who changes their password (because
    it leaked, say) or an account an admin disables must not keep working through the API with it.
    This watches the model rather than the views because passwords change in many places (the
    password page, the invitation link, Django's admin, ``changepassword``)."""
    if instance.pk is None or (update_fields is not None and not {"password", "is_active"} & set(update_fields)):
        return
    before = sender.objects.filter(pk=instance.pk).values("password", "is_active").first()
    if before is None:
        return
    # A new password is one given through set_password (which keeps the raw text until the save),
    # or no usable password any more; a login that rehashes the same password (a stronger hasher)
    # changes the hash only, and keeps the token.
    new_password = before["password"] != instance.password and (
        getattr(instance, "_password", None) is not None or not instance.has_usable_password()
    )
    instance._revoke_api_tokens = new_password or (before["is_active"] and not instance.is_active)


def _revoke_if_credentials_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    if getattr(instance, "_revoke_api_tokens", False):
        instance._revoke_api_tokens = False
        revoke_api_tokens(instance)


def watch_credentials() -> None:
    User = get_user_model()
    pre_save.connect(_credentials_changed, sender=User, dispatch_uid="k12vista.credentials_changed")
    post_save.connect(_revoke_if_credentials_changed, sender=User, dispatch_uid="k12vista.revoke_api_tokens")
