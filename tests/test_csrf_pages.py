"""A refused form gets the studio's own page (translated, a way back to the same site only), and a page whose
CSRF token went stale can fetch the session's current one."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_refused_form_gets_the_studios_page_with_a_way_back(annotator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    back = "http://testserver/pem/label/"
    response = client.post("/pem/label/next/", HTTP_REFERER=back)
    body = response.content.decode()
    assert response.status_code == 403 and 'id="error-csrf"' in body
    assert "表单没有提交" in body and "CSRF" not in body and f'href="{back}" id="csrf-back"' in body
    elsewhere = client.post("/pem/label/next/", HTTP_REFERER="https://evil.example/phish").content.decode()
    assert 'id="csrf-back"' not in elsewhere and "evil.example" not in elsewhere


def test_the_current_token_is_handed_to_a_signed_in_page_only(annotator):
    client = Client(enforce_csrf_checks=True)
    assert client.get("/csrf/").status_code == 302  # to the login page
    client.force_login(annotator)
    response = client.get("/csrf/")
    assert response.status_code == 200 and response["Cache-Control"].startswith("max-age=0")
    token = response.json()["token"]
    assert client.post("/pem/label/next/", HTTP_X_CSRFTOKEN=token).status_code == 302  # accepted
