"""Chinese never shows as boxes (issue 25, fault 7), on a machine with no Chinese font of its own, as CI is:
every Chinese glyph of the page chrome and of the charts comes from the vendored Noto Sans SC, the chart text
included (ECharts draws its own text and sets its own font), and no text is drawn before the font it needs
(the faces block instead of swapping, and the ranges a page uses are preloaded with it)."""

import re
import time
from pathlib import Path

import pytest

from tests.browser.conftest import log_in, open_page
from tests.conftest import PASSWORD
from tests.review_factories import audit_of, bulk_questions, rate_everything, three_inspectors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FONT_CSS = Path(__file__).resolve().parents[2] / "static/vendor/noto-sans-sc"
HAN = re.compile(r"[\u3400-\u9fff]")


def platform_fonts(page, selector: str) -> dict[str, set[str]]:
    """For each node the selector finds: the fonts Chromium drew its text with (CDP's own answer, not CSS's wish)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]["nodeId"]
    found: dict[str, set[str]] = {}
    for node_id in cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector})["nodeIds"]:
        html = cdp.send("DOM.getOuterHTML", {"nodeId": node_id})["outerHTML"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]
        # The bundled faces are web fonts (isCustomFont) whose own name is "Noto Sans SC Thin" (a variable font).
        found[re.sub(r"<[^>]*>", "", html) or html[:80]] = {
            font["familyName"] + (" (web font)" if font["isCustomFont"] else "") for font in fonts if font["glyphCount"]
        }
    cdp.detach()
    return found


def assert_only_the_bundled_font(page, selector: str) -> int:
    """Every node with Chinese text under the selector is drawn with Noto Sans SC and nothing else a CJK
    glyph could come from (a Latin font may draw the digits beside). While a face is still loading Chromium
    names the fallback it lays the hidden text out with, so this waits out a block period (3 s) first."""
    deadline = time.monotonic() + 3
    while True:
        try:
            return _only_the_bundled_font(page, selector)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            page.wait_for_timeout(200)


def _only_the_bundled_font(page, selector: str) -> int:
    checked = 0
    for text, families in platform_fonts(page, selector).items():
        if not HAN.search(text) or not families:  # (no fonts: not drawn, as the folded menu's button)
            continue
        bundled = {family for family in families if family.startswith("Noto Sans SC") and "(web font)" in family}
        assert bundled, f"{text}: drawn with {families}"
        # Other fonts may draw the Latin letters and digits beside, never the Chinese: a text of Chinese only
        # is drawn by the bundled font alone.
        if not re.search(r"[^\u3400-\u9fff\u3000-\u303f\uff00-\uffef\s]", text):
            assert families == bundled, f"{text}: drawn with {families}"
        checked += 1
    return checked


def reported_audit(inspector):
    inspectors = three_inspectors(inspector)
    bulk_questions(6)
    audit = audit_of(inspectors=inspectors, per_stratum=2)
    rate_everything(audit, fail_items=[audit.items.first().pk])
    return audit


def test_the_audit_chart_draws_its_chinese_with_the_bundled_font(browser, live_server, inspector):
    audit = reported_audit(inspector)
    page = open_page(browser, live_server.url)
    log_in(page, inspector.username, PASSWORD)
    page.wait_for_url("**/inspect/")
    page.goto(f"/inspect/audits/{audit.pk}/report/")
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    chart = page.locator("#rates-chart-view")
    chart.locator("svg text").first.wait_for()
    texts = chart.locator("svg text")
    chinese = [t for t in texts.all_text_contents() if HAN.search(t)]
    assert chinese, "the chart's legend and axis labels are in Chinese"
    # ECharts sets the font on each text it draws: it must name the bundled one.
    families = set(texts.evaluate_all("els => els.map(e => getComputedStyle(e).fontFamily)"))
    assert all("Noto Sans SC" in family for family in families), families
    assert page.evaluate("""(text) => document.fonts.check('16px "Noto Sans SC"', text)""", "".join(chinese))
    assert page.evaluate("""() => document.fonts.check('16px "Noto Sans SC"', '质检')""")
    assert assert_only_the_bundled_font(page, "#rates-chart-view svg text") >= len(chinese)
    assert assert_only_the_bundled_font(page, "header.top nav a, h1") >= 3
    assert page.problems == []


def test_no_chinese_text_is_drawn_before_its_font(browser, live_server, inspector):
    audit = reported_audit(inspector)
    page = open_page(browser, live_server.url)
    log_in(page, inspector.username, PASSWORD)
    page.wait_for_url("**/inspect/")

    # The fonts come late (a slow link; the route handler runs one at a time, so ~30 ranges take 1.5 s, inside the
    # 3 s the page waits at most): the text that needs them waits for them, it never shows boxes first.
    def late_font(route):
        time.sleep(0.05)
        route.continue_()

    page.route("**/vendor/noto-sans-sc/files/*", late_font)
    # When the page is first shown, the faces for its text are already in.
    page.add_init_script(SHOWN_WITH_FONTS)
    page.goto(f"/inspect/audits/{audit.pk}/report/", wait_until="domcontentloaded")
    faces = page.evaluate("""() => [...document.fonts].filter(f => f.family.includes('Noto Sans SC'))
                                      .map(f => f.display)""")
    assert faces and set(faces) == {"block"}, set(faces)

    # Every range the page's Chinese text falls in is preloaded with the page, in the weight it is drawn in.
    ranges = font_ranges()
    preloaded = set(page.eval_on_selector_all("link[rel=preload][as=font]", "els => els.map(e => e.href)"))
    # (a static manifest puts a hash before the extension)
    preloaded_files = {re.sub(r"\.[0-9a-f]{12}\.woff2$", ".woff2", href.rsplit("/", 1)[-1]) for href in preloaded}
    # (innerText leaves out what is not laid out: read it once the page is shown)
    page.wait_for_function("() => !document.documentElement.classList.contains('fonts-pending')")
    text = page.evaluate("() => document.body.innerText")
    needed = {file for char in set(HAN.findall(text)) for file in files_for(ranges, char, "400")}
    assert needed, "the page has Chinese text"
    assert needed <= preloaded_files, sorted(needed - preloaded_files)[:10]
    links = page.locator("link[rel=preload][as=font]")
    assert links.first.get_attribute("crossorigin") is not None  # else the font is fetched twice
    page.wait_for_function("() => window.shownWithFonts !== undefined")
    assert page.evaluate("() => window.shownWithFonts") == [True, True]
    assert page.problems == []


SHOWN_WITH_FONTS = """
let pending = false;
new MutationObserver((changes, observer) => {
  const root = document.documentElement;
  if (!root || !document.body) return;
  if (root.classList.contains('fonts-pending')) { pending = true; return; }
  if (!pending) return;
  observer.disconnect();
  const bold = [...document.querySelectorAll('h1, h2, th, label, .brand')].map((el) => el.textContent).join('');
  window.shownWithFonts = [document.fonts.check('400 16px "Noto Sans SC"', document.body.innerText),
                           document.fonts.check('700 16px "Noto Sans SC"', bold)];
}).observe(document, {attributes: true, attributeFilter: ['class'], childList: true, subtree: true});
"""


def font_ranges() -> dict[str, list[tuple[str, list[tuple[int, int]]]]]:
    """weight -> [(file name, [(first, last) code point])] as the vendored CSS declares them."""
    found: dict[str, list[tuple[str, list[tuple[int, int]]]]] = {}
    for weight in ("400", "700"):
        css = (FONT_CSS / f"{weight}.css").read_text()
        for file, spans in re.findall(r"url\(\./files/([^)]+)\)[^;]*;\s*unicode-range:\s*([^;]+);", css):
            parsed = []
            for span in spans.split(","):
                first, _, last = span.strip().removeprefix("U+").partition("-")
                parsed.append((int(first, 16), int(last or first, 16)))
            found.setdefault(weight, []).append((file, parsed))
    return found


def files_for(ranges, char: str, weight: str) -> list[str]:
    point = ord(char)
    return [file for file, spans in ranges[weight] if any(a <= point <= b for a, b in spans)]
