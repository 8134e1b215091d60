import pytest


@pytest.mark.django_db
def test_it_enforces_a_content_security_policy(client):
    response = client.get("/login/")
    assert "Content-Security-Policy-Report-Only" not in response.headers
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-eval" not in policy
    assert "object-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy


@pytest.mark.django_db
def test_it_sends_nosniff_and_frame_denial(client):
    response = client.get("/login/")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
def test_it_sends_hsts_behind_tls(client, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_SSL_REDIRECT = False
    response = client.get("/login/", secure=True)
    assert response.headers["Strict-Transport-Security"].startswith("max-age=31536000")


@pytest.mark.django_db
def test_it_loads_no_script_from_another_origin(client, annotator, login):
    body = login(annotator).get("/preview/").content.decode()
    assert '<script src="/static/' in body
    assert "://" not in "".join(line for line in body.splitlines() if "<script" in line or "stylesheet" in line)
    assert "<script>" not in body  # no inline script; the CSP would block it


def test_it_escapes_user_text(client, administrator, login):
    login(administrator).post(
        "/manage/users/", {"username": "mallory", "email": "m@example.org", "roles": ["annotator"], "password": ""}
    )
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="mallory")
    user.email = "x<b>@example.org"
    user.save()
    body = login(administrator).get("/manage/users/").content.decode()
    assert "x<b>@" not in body and "x&lt;b&gt;@" in body
