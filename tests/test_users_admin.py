import re

from django.contrib.auth import get_user_model
from django.core.management import call_command

from k12vista.roles import Role, roles_of

User = get_user_model()


def test_it_lets_an_admin_invite_a_user(client, administrator, login):
    response = login(administrator).post(
        "/manage/users/", {"username": "bo", "email": "bo@example.org", "roles": ["annotator"]}, follow=True
    )
    user = User.objects.get(username="bo")
    assert roles_of(user) == [Role.ANNOTATOR]
    assert not user.has_usable_password()
    link = re.search(r"http://testserver(/password/set/[^ <]+/)", response.content.decode()).group(1)

    client.logout()
    form_page = client.get(link, follow=True)
    assert form_page.status_code == 200
    done = client.post(
        form_page.request["PATH_INFO"],
        {"new_password1": "a long and new password", "new_password2": "a long and new password"},
    )
    assert done.status_code == 302
    user.refresh_from_db()
    assert user.check_password("a long and new password")


def test_it_creates_a_user_with_a_password(administrator, login):
    login(administrator).post(
        "/manage/users/", {"username": "cy", "roles": ["inspector", "researcher"], "password": "a fine long password"}
    )
    user = User.objects.get(username="cy")
    assert user.check_password("a fine long password")
    assert set(roles_of(user)) == {Role.INSPECTOR, Role.RESEARCHER}


def test_it_rejects_a_weak_password_and_a_taken_username(administrator, annotator, login):
    response = login(administrator).post("/manage/users/", {"username": "ALICE", "roles": ["annotator"]})
    assert "This username is taken" in response.content.decode() or "用户名已被占用" in response.content.decode()
    response = login(administrator).post(
        "/manage/users/", {"username": "dee", "roles": ["annotator"], "password": "123"}
    )
    assert response.status_code == 200
    assert not User.objects.filter(username="dee").exists()


def test_it_keeps_user_management_from_other_roles(personas, login):
    for role, user in personas.items():
        if role != Role.ADMIN:
            client = login(user)
            assert client.get("/manage/users/").status_code == 403
            assert client.post("/manage/users/", {"username": "x", "roles": ["admin"]}).status_code == 403
    assert not User.objects.filter(username="x").exists()


def test_it_changes_roles_and_deactivates(administrator, annotator, login):
    login(administrator).post(f"/manage/users/{annotator.pk}/", {"roles": ["inspector"], "is_active": ""})
    annotator.refresh_from_db()
    assert not annotator.is_active
    annotator.is_active = True
    assert roles_of(annotator) == [Role.INSPECTOR]


def test_it_stops_an_admin_from_demoting_themselves(administrator, login):
    response = login(administrator).post(f"/manage/users/{administrator.pk}/", {"roles": [], "is_active": "on"})
    assert response.status_code == 200
    assert Role.ADMIN in roles_of(administrator)


def test_it_creates_a_user_from_the_command_line(db, capsys):
    call_command("create_user", "erin", "--role", "researcher", "--base-url", "https://studio.example.org")
    assert capsys.readouterr().out.startswith("https://studio.example.org/password/set/")
    assert roles_of(User.objects.get(username="erin")) == [Role.RESEARCHER]
