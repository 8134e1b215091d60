"""``make run`` (DEBUG on): a missing page shows the studio's 404, not Django's technical page (that one only
with TECHNICAL_404); a busy port stops runstudio before it starts its Celery worker."""

import socket

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from k12vista.management.commands import runstudio

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/no-such-page/", "/jobs/999999/"])
def test_debug_shows_the_studios_404_for_a_missing_path_and_a_missing_item(settings, annotator, path):
    settings.DEBUG = True
    client = Client()
    client.force_login(annotator)
    response = client.get(path)
    body = response.content.decode()
    assert response.status_code == 404
    assert 'id="error-404"' in body and "URLconf" not in body and "k12vista.urls" not in body


def test_the_technical_404_is_behind_a_switch(settings):
    settings.DEBUG = True
    settings.TECHNICAL_404 = True
    response = Client().get("/no-such-page/")
    assert response.status_code == 404 and "URLconf" in response.content.decode()


def test_a_missing_slash_still_redirects_with_debug_on(settings, annotator):
    settings.DEBUG = True
    client = Client()
    client.force_login(annotator)
    response = client.get("/annotate")
    assert response.status_code == 301 and response.url == "/annotate/"


def test_runstudio_on_a_busy_port_starts_no_worker(monkeypatch):
    started = []
    monkeypatch.setattr(runstudio.subprocess, "Popen", lambda *a, **k: started.append(a))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(CommandError, match="nothing was started"):
            call_command("runstudio", port=port, host="127.0.0.1")
    assert started == []
