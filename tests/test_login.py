import pytest
from django.urls import reverse

from tests.conftest import PASSWORD


def post_login(client, username, password):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_it_logs_in_and_lands_on_the_role_home(client, annotator):
    response = post_login(client, "alice", PASSWORD)
    assert response.status_code == 302
    assert client.get(response.url, follow=True).request["PATH_INFO"] == "/annotate/"


def test_it_rejects_a_wrong_password(client, annotator):
    response = post_login(client, "alice", "wrong")
    assert response.status_code == 200
    assert "_auth_user_id" not in client.session


def test_it_locks_out_after_five_failures_even_with_the_right_password(client, annotator):
    for _ in range(5):
        post_login(client, "alice", "wrong")
    response = post_login(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


def test_it_logs_out_on_post_only(client, annotator, login):
    login(annotator)
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 302
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_it_has_no_self_registration(client):
    assert client.get("/register/").status_code == 404
    assert client.get("/accounts/signup/").status_code == 404


def test_it_upgrades_a_pbkdf2_hash_to_argon2_at_login(client, annotator, settings):
    """Production settings' hashers (the tests otherwise force MD5 for speed)."""
    from django.contrib.auth.hashers import make_password

    from k12vista import settings as live  # the module, not the test's overridden settings

    settings.PASSWORD_HASHERS = live.PASSWORD_HASHERS
    annotator.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
    annotator.save(update_fields=["password"])
    assert post_login(client, "alice", PASSWORD).status_code == 302
    annotator.refresh_from_db()
    assert annotator.password.startswith("argon2$argon2id$")
    assert f"m={live.ARGON2_MEMORY_KIB},t={live.ARGON2_TIME_COST},p=1" in annotator.password
