"""Every role's daily screens in Chromium, in Chinese: the text people see once
the scripts have run (htmx fragments, live job cards, typeset formulas) holds no
English UI word. The word rules are tests/test_chinese_pages.py's."""

from urllib.parse import urlsplit

import pytest

from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.test_chinese_pages import english_words, studio  # noqa: F401 (the studio fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# What a person reads: the page after its scripts ran, without code, typeset
# math, user text marked as another language, and what is marked translate="no".
VISIBLE_TEXT = """() => {
  const body = document.body.cloneNode(true);
  body.querySelectorAll('script, style, code, pre, kbd, samp, textarea, .katex, [translate="no"], [data-format-help]')
    .forEach((el) => el.remove());
  body.querySelectorAll('[lang]').forEach((el) => { if (!el.lang.startsWith('zh')) el.remove(); });
  const attributes = [...body.querySelectorAll('[placeholder], [title], [aria-label], [alt]')].map((el) =>
    ['placeholder', 'title', 'aria-label', 'alt'].map((name) => el.getAttribute(name) || '').join(' '));
  document.documentElement.appendChild(body);
  const text = body.innerText;
  body.remove();
  return text + '\\n' + attributes.join('\\n');
}"""
MENU_LINKS = "() => [...document.querySelectorAll('#main-nav a[href^=\"/\"]')].map((a) => a.getAttribute('href'))"


def test_every_roles_screens_read_in_chinese_in_the_browser(page, studio):  # noqa: F811
    found: dict[str, set[str]] = {}
    visited = 0
    for person in studio["people"].values():
        page.context.clear_cookies()
        log_in(page, person.username, PASSWORD)
        page.wait_for_load_state("load")
        assert page.locator("html").get_attribute("lang") == "zh-hans"
        paths = [urlsplit(page.url).path]
        paths += [href for href in page.evaluate(MENU_LINKS) if "logout" not in href and "/admin/" not in href]
        for path in dict.fromkeys(paths):
            page.goto(path)
            page.wait_for_load_state("networkidle")
            if words := english_words(page.evaluate(VISIBLE_TEXT)):
                found[f"{person.username} {path}"] = words
            visited += 1
    assert visited >= 20, visited
    report = "\n".join(f"{where}: {', '.join(sorted(words))}" for where, words in sorted(found.items()))
    assert not found, f"English UI words on {len(found)} screens:\n{report}"
    # The same reading sees English when the page is in English (so the check above can fail).
    page.select_option("select[name=language]", "en")
    page.wait_for_function("() => document.documentElement.lang === 'en'")
    assert {"My", "queue"} <= english_words(page.evaluate(VISIBLE_TEXT)) or len(
        english_words(page.evaluate(VISIBLE_TEXT))
    ) > 5
    assert page.problems == []
