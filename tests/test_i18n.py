import pytest
from django.conf import settings

from k12vista.vocabulary import STEP_LABELS


@pytest.mark.django_db
def test_it_speaks_chinese_by_default_whatever_the_browser_says(client):
    body = client.get("/login/", headers={"Accept-Language": "en-US,en;q=0.9"}).content.decode()
    assert 'lang="zh-hans"' in body
    assert "登录" in body


@pytest.mark.django_db
def test_it_switches_to_english_and_back(client):
    response = client.post("/i18n/setlang/", {"language": "en", "next": "/login/"})
    assert response.status_code == 302 and response.url == "/login/"
    body = client.get("/login/").content.decode()
    assert 'lang="en"' in body and "Log in" in body and "登录" not in body
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert "登录" in client.get("/login/").content.decode()


@pytest.mark.django_db
def test_it_falls_back_to_chinese_for_an_unknown_language(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "fr"
    response = client.get("/login/")
    assert response.headers["Content-Language"] == "zh-hans"
    client.post("/i18n/setlang/", {"language": "xx", "next": "/login/"})
    assert client.get("/login/").headers["Content-Language"] == "zh-hans"


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_it_shows_both_names_of_every_label_in_either_language(client, annotator, login, language):
    client = login(annotator)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    body = client.get("/labels/").content.decode()
    for label in STEP_LABELS:
        assert label.chinese in body and label.english in body and label.code in body


def test_it_translates_the_role_homes(annotator, login, client):
    login(annotator)
    assert "我的任务" in client.get("/annotate/").content.decode()
