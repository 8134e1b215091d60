"""The frame every page shares, in a real browser: the bundled Chinese font, error pages in the site's
layout, a menu that collapses on narrow screens with no page scrolling sideways, and charts drawn."""

import pytest

from k12vista.roles import Role
from tests.browser.conftest import log_in, open_page
from tests.conftest import PASSWORD, make_person
from tests.review_factories import audit_of, bulk_questions, rate_everything, three_inspectors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOMES = {Role.ANNOTATOR: "/annotate/", Role.INSPECTOR: "/inspect/", Role.RESEARCHER: "/research/",
         Role.ADMIN: "/manage/users/"}  # fmt: skip


def signed_in(browser, live_server, role, *, width=None):
    page = open_page(browser, live_server.url)
    if width:
        page.set_viewport_size({"width": width, "height": 900})
    make_person(f"p-{role.value}", role)
    log_in(page, f"p-{role.value}", PASSWORD)
    page.wait_for_url(f"**{HOMES[role]}")
    return page


def test_it_renders_chinese_with_the_bundled_font(browser, live_server):
    # This machine has no Chinese font of its own (as containers and lab boxes often do): every
    # glyph below comes from the vendored Noto Sans SC or it is an empty box.
    page = signed_in(browser, live_server, Role.ANNOTATOR)
    fonts = []
    page.on("response", lambda r: r.url.endswith(".woff2") and fonts.append((r.url, r.status)))
    page.reload()
    page.wait_for_function("document.fonts.status === 'loaded'")
    loaded = page.evaluate("""async () => {
        const faces = await document.fonts.load('16px "Noto Sans SC"', document.querySelector('h1').innerText);
        return faces.map(f => f.status);
    }""")
    assert loaded and all(status == "loaded" for status in loaded)
    assert fonts and all("/static/vendor/noto-sans-sc/files/" in url and status == 200 for url, status in fonts)
    assert page.problems == []


def test_it_shows_403_in_the_site_layout_with_a_way_back(browser, live_server):
    page = signed_in(browser, live_server, Role.ANNOTATOR)
    response = page.goto("/manage/users/")
    assert response.status == 403
    assert page.locator("#error-403").is_visible()
    assert page.locator("header.top nav a[href='/annotate/']").count() == 1  # the menu is there
    page.click("#error-403 a.button")
    page.wait_for_url("**/annotate/")
    assert [p for p in page.problems if "status of 403" not in p] == []  # the refusal itself is logged


def test_it_shows_404_in_the_site_layout(browser, live_server):
    page = signed_in(browser, live_server, Role.ANNOTATOR)
    response = page.goto("/annotate/review/999999/")
    assert response.status == 404
    assert page.locator("#error-404").is_visible()
    assert page.locator("header.top").count() == 1


@pytest.mark.parametrize("role", list(Role))
def test_it_fits_800_pixels_without_sideways_scrolling(browser, live_server, role):
    page = signed_in(browser, live_server, role, width=800)
    links = page.eval_on_selector_all("header.top nav a", "els => els.map(e => e.getAttribute('href'))")
    assert links
    # The menu is folded behind one button, and opens on it.
    assert not page.locator("header.top nav").is_visible()
    page.click("[data-nav-toggle]")
    assert page.locator("header.top nav").is_visible()
    for href in dict.fromkeys(links):
        page.goto(href)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{href} scrolls sideways by {overflow}px at 800px"
    assert page.problems == []


def test_it_names_each_language_in_itself(browser, live_server):
    page = signed_in(browser, live_server, Role.ANNOTATOR)  # the interface is in Chinese
    names = page.eval_on_selector_all("select[name=language] option", "els => els.map(e => e.textContent)")
    assert names == ["简体中文", "English"]


def test_it_draws_the_audit_rates_chart_beside_its_table(browser, live_server, inspector):
    inspectors = three_inspectors(inspector)
    bulk_questions(6)
    audit = audit_of(inspectors=inspectors, per_stratum=2)
    rate_everything(audit, fail_items=[audit.items.first().pk])
    page = open_page(browser, live_server.url)
    log_in(page, inspector.username, PASSWORD)
    page.wait_for_url("**/inspect/")
    page.goto(f"/inspect/audits/{audit.pk}/report/")
    chart = page.locator("#rates-chart-view")
    chart.locator("svg").wait_for()
    # One bar per dimension and stratum (plus the overall group); the same rates are in the table.
    strata = page.locator("#rates tbody tr").count()
    bars = chart.locator("svg path[d]").count()
    assert strata >= 2 and bars >= 3 * strata
    assert page.problems == []


def test_it_draws_the_leaderboard_charts(browser, live_server, inspector):
    from tests.test_inference_views import answer, make_endpoint, make_run, scored

    run = make_run(make_person("rita", Role.RESEARCHER), endpoint=make_endpoint("qwen"), finished=True)
    answer(run), answer(run)
    scored(run, labels=("CS", "CE", "HE"), score=0.5)
    page = open_page(browser, live_server.url)
    log_in(page, inspector.username, PASSWORD)
    page.wait_for_url("**/inspect/")
    page.goto("/research/leaderboard/?mode=step_by_step")
    for chart in ("scores-stage", "scores-subject", "scores-type", "errors-subject", "errors-type", "errors-stage"):
        view = page.locator(f"#chart-{chart}-view")
        view.locator("svg").wait_for()
        assert view.locator("svg path[d]").count() >= 2, chart
    assert page.problems == []
