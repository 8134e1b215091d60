"""Accounts: the admin role cannot make anyone (itself included) a superuser or hand out
permissions through Django's admin, cannot take over a superuser's account, and no page
lists an API token in full; a token dies with a password change or a disabled account."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from k12vista.roles import Role
from tests.conftest import PASSWORD, make_person

pytestmark = pytest.mark.django_db

User = get_user_model()


def change_form(user, **changes) -> dict:
    """The admin's user change form as the browser would post it, with ``changes``."""
    data = {
        "username": user.username, "first_name": "", "last_name": "", "email": user.email,
        "is_active": "on", "is_staff": "on" if user.is_staff else "",
        "groups": [str(g) for g in user.groups.values_list("pk", flat=True)],
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"), "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "last_login_0": "", "last_login_1": "",
    }  # fmt: skip
    data.update(changes)
    return {k: v for k, v in data.items() if v != ""}


def test_the_admin_role_cannot_make_itself_a_superuser_or_grant_permissions(administrator, login):
    client = login(administrator)
    url = f"/admin/auth/user/{administrator.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    assert b'name="is_superuser"' not in page.content and b'name="user_permissions"' not in page.content
    every = [str(p) for p in Permission.objects.values_list("pk", flat=True)]
    client.post(url, change_form(administrator, is_superuser="on", user_permissions=every))
    administrator.refresh_from_db()
    assert not administrator.is_superuser and not administrator.user_permissions.exists()
    other = make_person("olga", Role.ANNOTATOR)
    client.post(f"/admin/auth/user/{other.pk}/change/", change_form(other, is_superuser="on", user_permissions=every))
    other.refresh_from_db()
    assert not other.is_superuser and not other.user_permissions.exists()


def test_the_admin_role_cannot_take_over_a_superuser(administrator, login):
    root = User.objects.create_superuser("root", "root@example.org", "the root password")
    client = login(administrator)
    response = client.post(f"/admin/auth/user/{root.pk}/password/",
                           {"password1": "taken over now 123", "password2": "taken over now 123"})  # fmt: skip
    assert response.status_code == 403
    client.post(f"/admin/auth/user/{root.pk}/change/", change_form(root, is_active=""))
    root.refresh_from_db()
    assert root.check_password("the root password") and root.is_active


def test_no_admin_page_lists_a_token_in_full(administrator, annotator, login):
    keys = [Token.objects.create(user=u).key for u in (administrator, annotator)]
    root = User.objects.create_superuser("root", "root@example.org", "the root password")
    for user in (administrator, root):
        client = login(user)
        pages = (
            "/admin/",
            "/admin/authtoken/",
            "/admin/authtoken/tokenproxy/",
            "/admin/auth/user/",
            f"/admin/auth/user/{annotator.pk}/change/",
            "/manage/users/",
            f"/manage/users/{annotator.pk}/",
        )
        for url in pages:
            content = client.get(url, follow=True).content
            assert not any(key.encode() in content for key in keys), (user, url)
        assert client.get("/admin/authtoken/tokenproxy/").status_code == 404


def token_works(key: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/jobs/").status_code == 200


def test_a_password_change_revokes_the_api_token(annotator, login):
    key = Token.objects.create(user=annotator).key
    assert token_works(key)
    annotator.last_login = annotator.date_joined
    annotator.save()  # saving other fields keeps it
    assert token_works(key)
    client = login(annotator)
    response = client.post("/password/change/", {"old_password": PASSWORD, "new_password1": "a new long password 42",
                                                  "new_password2": "a new long password 42"})  # fmt: skip
    assert response.status_code == 302
    assert not token_works(key)
    assert not Token.objects.filter(user=annotator).exists()


def test_disabling_an_account_revokes_its_token(administrator, annotator, login):
    key = Token.objects.create(user=annotator).key
    login(administrator).post(f"/manage/users/{annotator.pk}/", {"roles": ["annotator"]})  # is_active unticked
    annotator.refresh_from_db()
    assert not annotator.is_active
    assert not Token.objects.filter(key=key).exists()
    # Enabled again, the old key stays dead.
    login(administrator).post(f"/manage/users/{annotator.pk}/", {"roles": ["annotator"], "is_active": "on"})
    assert not token_works(key)


def test_a_password_set_through_the_admin_revokes_the_token(administrator, annotator, login):
    key = Token.objects.create(user=annotator).key
    response = login(administrator).post(f"/admin/auth/user/{annotator.pk}/password/",
                                         {"password1": "set by the admin 99", "password2": "set by the admin 99",
                                          "usable_password": "true"})  # fmt: skip
    assert response.status_code == 302
    assert not Token.objects.filter(key=key).exists()


def test_the_studios_user_pages_do_not_reach_a_superuser_for_the_admin_role(administrator, login):
    """An invitation link is a password reset: one made for a superuser by the admin role would take it over."""
    root = User.objects.create_superuser("root", "root@example.org", "the root password")
    client = login(administrator)
    invite = client.post(f"/manage/users/{root.pk}/invite/", follow=True)
    assert invite.status_code == 404 and b"/password/set/" not in invite.content
    assert client.get(f"/manage/users/{root.pk}/").status_code == 404
    assert client.post(f"/manage/users/{root.pk}/", {"roles": ["annotator"]}).status_code == 404
    root.refresh_from_db()
    assert root.is_active
    # A superuser manages everyone, and the admin role everyone else.
    assert login(root).post(f"/manage/users/{administrator.pk}/invite/").status_code == 302
    other = make_person("olga", Role.ANNOTATOR)
    assert login(administrator).post(f"/manage/users/{other.pk}/invite/").status_code == 302


def test_a_login_that_rehashes_the_same_password_keeps_the_token(annotator, client, settings):
    """A stronger hasher rehashes the password at the next login: the hash changes, the password does not."""
    from django.contrib.auth.hashers import make_password

    from k12vista import settings as live

    settings.PASSWORD_HASHERS = live.PASSWORD_HASHERS
    annotator.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
    annotator.save(update_fields=["password"])
    key = Token.objects.create(user=annotator).key
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    annotator.refresh_from_db()
    assert annotator.password.startswith("argon2")
    assert token_works(key)
