"""The /media/ script attack in Chromium: a researcher uploads an "x.html" whose script (from an
uploaded "x.js") would read the admin-only users page; the admin opens its URL and nothing runs."""

import contextlib
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from playwright.sync_api import Error as PlaywrightError

from annotation.models import SourceDocument
from k12vista.roles import Role
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Both start like JSONL, so the first-byte check took them; both are code to a browser.
SCRIPT = b'{}\nfetch("/manage/users/").then(r => r.text()).then(t => { document.title = "PWNED " + t.length; });\n'


def upload(client: Client, name: str, content: bytes) -> str:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        client.post("/annotate/imports/", {"kind": "file", "file-file": SimpleUploadedFile(name, content)})
    return "/media/" + SourceDocument.objects.get(original_name=name).file.name


def test_an_uploaded_html_file_runs_no_script_for_the_admin(page):
    researcher = make_person("rita", Role.RESEARCHER)
    make_person("ada", Role.ADMIN)
    client = Client()
    client.force_login(researcher)
    script_url = upload(client, "x.js", SCRIPT)
    html_url = upload(client, "x.html", b'{"a": 1}\n<script src="' + script_url.encode() + b'"></script>\n')

    log_in(page, "ada", PASSWORD)
    page.wait_for_url("**/manage/users/")
    requested, downloads = [], []
    page.on("request", lambda request: requested.append(request.url))
    page.on("download", lambda download: downloads.append(download))
    with contextlib.suppress(PlaywrightError):  # a download ends the navigation
        page.goto(html_url)
    page.wait_for_timeout(1500)  # time for the script to fetch, had it run

    assert not [url for url in requested if "/manage/users/" in url]
    assert not page.title().startswith("PWNED")
    assert len(downloads) == 1 and downloads[0].suggested_filename.endswith(".jsonl")  # saved, not shown
