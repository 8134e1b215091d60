import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from k12vista.roles import ROLE_PERMISSIONS, Role, has_role, roles_of

ROLE_HOMES = {
    Role.ANNOTATOR: "/annotate/",
    Role.INSPECTOR: "/inspect/",
    Role.RESEARCHER: "/research/",
    Role.ADMIN: "/manage/users/",
}


@pytest.mark.django_db
def test_it_creates_a_group_per_role_with_exactly_its_permissions():
    for role, perms in ROLE_PERMISSIONS.items():
        group = Group.objects.get(name=role.value)
        got = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}
        assert got == set(perms)


def test_it_gives_each_persona_only_its_role(personas):
    for role, user in personas.items():
        assert roles_of(user) == [role]


@pytest.mark.parametrize("role", list(Role))
def test_it_sends_each_role_home(role, personas, login):
    client = login(personas[role])
    response = client.get("/")
    assert response.status_code == 302
    assert response.url == ROLE_HOMES[role]
    assert client.get(response.url).status_code == 200


@pytest.mark.parametrize("role", list(Role))
def test_it_forbids_other_roles_homes(role, personas, login):
    client = login(personas[role])
    for other, url in ROLE_HOMES.items():
        # The audit dashboard is the inspectors' home and also the admins' view of quality.
        shared = role == Role.ADMIN and other == Role.INSPECTOR
        if other != role and not shared:
            assert client.get(url).status_code == 403, (role, url)
    if role == Role.ADMIN:
        assert client.get(ROLE_HOMES[Role.INSPECTOR]).status_code == 200


@pytest.mark.parametrize("url", [*ROLE_HOMES.values(), "/jobs/", "/labels/", "/account/"])
def test_it_sends_anonymous_visitors_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_it_tells_a_user_without_role_to_ask_an_admin(no_role_user, login):
    response = login(no_role_user).get("/")
    assert response.status_code == 403
    assert "administrator" in response.content.decode() or "管理员" in response.content.decode()


def test_it_ignores_roles_of_inactive_users(annotator):
    annotator.is_active = False
    annotator.save()
    assert not has_role(annotator, Role.ANNOTATOR)
