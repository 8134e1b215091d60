"""Playwright driving Debian's Chromium against pytest-django's live server."""

import os

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
# Without these Chromium keeps trying to reach Google's hosts, which this
# machine's closed network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
]

# Playwright's sync API runs an event loop in this thread; the ORM calls the
# tests make around it are synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (make test does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(browser, base_url, *, timeout_ms=15000):
    """A page in a browser context of its own (its own cookies: one person),
    collecting console errors and script errors in ``page.problems``."""
    context = browser.new_context(base_url=base_url, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    # Any CSP violation or script error fails the test that caused it.
    page.problems = []
    page.on("console", lambda msg: msg.type == "error" and page.problems.append(msg.text))
    page.on("pageerror", lambda exc: page.problems.append(str(exc)))
    return page


@pytest.fixture
def page(browser, live_server):
    page = open_page(browser, live_server.url)
    yield page
    page.context.close()


def log_in(page, username, password):
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
