"""The four roles and the access helpers every view and API endpoint uses.

A role is a Django group carrying one capability permission. The groups are
rebuilt from ``ROLE_PERMISSIONS`` after every migrate, so the code is the one
place that says who may do what.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission
from django.core.exceptions import PermissionDenied
from django.db import models
from django.utils.translation import gettext_lazy as _
from rest_framework.permissions import BasePermission


class Role(models.TextChoices):
    ANNOTATOR = "annotator", _("Annotator")
    INSPECTOR = "inspector", _("Inspector")
    RESEARCHER = "researcher", _("Researcher")
    ADMIN = "admin", _("Administrator")


# The capability each role grants, as "app_label.codename" (declared on Profile).
ROLE_CAPABILITY = {
    Role.ANNOTATOR: "k12vista.annotate",
    Role.INSPECTOR: "k12vista.inspect",
    Role.RESEARCHER: "k12vista.research",
    Role.ADMIN: "k12vista.administer",
}

ROLE_PERMISSIONS: dict[Role, list[str]] = {
    Role.ANNOTATOR: [ROLE_CAPABILITY[Role.ANNOTATOR]],
    Role.INSPECTOR: [ROLE_CAPABILITY[Role.INSPECTOR]],
    Role.RESEARCHER: [ROLE_CAPABILITY[Role.RESEARCHER]],
    Role.ADMIN: [
        ROLE_CAPABILITY[Role.ADMIN],
        "auth.view_user",
        "auth.add_user",
        "auth.change_user",
    ],
}

# Roles that read every item's step labels. Someone holding one of them and the annotator role is handed only
# items nobody has labelled yet (the blind rule, pem.labelling); the user page warns before such a change.
READERS_OF_ALL_LABELS = (Role.INSPECTOR, Role.RESEARCHER, Role.ADMIN)

# Where each role lands after logging in; the first role a user holds wins.
ROLE_HOME = {
    Role.ADMIN: "k12vista:users",
    Role.RESEARCHER: "inference:home",
    Role.INSPECTOR: "review:home",
    Role.ANNOTATOR: "annotation:queue",
}

User = AbstractBaseUser | AnonymousUser


def has_role(user: Any, role: Role) -> bool:
    if not (user.is_authenticated and user.is_active):
        return False
    return user.has_perm(ROLE_CAPABILITY[role])


def people_with_role(role: Role) -> models.QuerySet:
    """Active people holding a role, by username: the annotators a question can
    be given to, the inspectors an audit can use."""
    from django.contrib.auth import get_user_model

    app_label, codename = ROLE_CAPABILITY[role].split(".")
    return (
        get_user_model()
        .objects.filter(
            is_active=True,
            groups__permissions__codename=codename,
            groups__permissions__content_type__app_label=app_label,
        )
        .distinct()
        .order_by("username")
    )


def roles_of(user: Any) -> list[Role]:
    return [role for role in Role if has_role(user, role)]


def home_url_name(user: Any) -> str | None:
    for role, url_name in ROLE_HOME.items():
        if has_role(user, role):
            return url_name
    return None


def require_role(user: Any, *roles: Role) -> None:
    """Raises 403 unless the user holds one of the roles."""
    if not any(has_role(user, role) for role in roles):
        raise PermissionDenied


def role_required(*roles: Role) -> Callable:
    """View decorator: anonymous users go to the login page, others need a role."""

    def decorator(view: Callable) -> Callable:
        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            require_role(request.user, *roles)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def token_accepted(view: Callable) -> Callable:
    """Page views that send a file: a script holding an API token reads what the page offers, under the
    page's own access rule (issue 29), instead of being sent to the login page. Only a request that
    carries ``Authorization: Token ...`` is authenticated here; a wrong token is a 401, as in the API.
    For GET views only: a token request bypasses no CSRF check because it changes nothing."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.headers.get("Authorization", "").split(" ", 1)[0].lower() == "token":
            from django.http import HttpResponse
            from rest_framework.authentication import TokenAuthentication
            from rest_framework.exceptions import AuthenticationFailed

            auth = TokenAuthentication()
            try:
                found = auth.authenticate(request)
            except AuthenticationFailed as exc:
                response = HttpResponse(str(exc.detail), status=401, content_type="text/plain; charset=utf-8")
                response["WWW-Authenticate"] = auth.authenticate_header(request)
                return response
            if found is not None:
                request.user = found[0]
        return view(request, *args, **kwargs)

    return wrapped


def HasRole(*roles: Role) -> type[BasePermission]:  # noqa: N802 - reads like a class in permission_classes
    """DRF permission class granting access to holders of any of the roles."""

    class _HasRole(BasePermission):
        def has_permission(self, request, view) -> bool:
            return any(has_role(request.user, role) for role in roles)

    _HasRole.__name__ = "HasRole_" + "_".join(roles)
    return _HasRole


def sync_role_groups(**kwargs: Any) -> None:
    """Creates the role groups and sets their permissions to exactly the mapping."""
    for role, perm_names in ROLE_PERMISSIONS.items():
        group, _created = Group.objects.get_or_create(name=role.value)
        perms = []
        for name in perm_names:
            app_label, codename = name.split(".")
            perm = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if perm is None:  # app not migrated yet; the next post_migrate fills it in
                continue
            perms.append(perm)
        group.permissions.set(perms)


def assign_role(user: Any, role: Role) -> None:
    group, _created = Group.objects.get_or_create(name=role.value)
    user.groups.add(group)
    if role == Role.ADMIN and not user.is_staff:
        user.is_staff = True  # admins also reach Django's admin site
        user.save(update_fields=["is_staff"])
