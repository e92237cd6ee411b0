"""A person's way through the survey in a real browser (Playwright driving Debian's chromium):
the captured email, a click on a circle, Confirm, the page, a changed rating, a skipped paper,
submit; and a rating in two clicks with JavaScript on and off."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from revbench.flows.survey import survey_flow
from revbench.replay.mailsink import MailSink
from revbench.replay.server import AppServer, free_port
from revbench.settings import Settings
from revbench.survey.server import create_app
from revbench.templates import bars_scale
from revbench.warehouse.store import SurveyStore
from tests.support.browser import chromium

pytestmark = pytest.mark.slow


@pytest.fixture
def browser() -> Iterator[object]:
    with chromium() as b:
        yield b


@pytest.fixture
def live(survey_settings: Settings) -> Iterator[tuple[Settings, SurveyStore, str]]:
    """The survey server on loopback, and settings whose links point at it."""
    port = free_port()
    s = survey_settings.with_overrides(survey={"base_url": f"http://127.0.0.1:{port}"})
    store = SurveyStore(s.survey_store_path)
    with AppServer(create_app(s, store), port=port) as server:
        yield s, store, server.base


def test_a_person_answers_in_the_browser(browser, live, sink: MailSink, request: pytest.FixtureRequest) -> None:
    s, store, base = live
    shots = request.config.getoption("--screenshots")
    if shots:  # relative to where pytest was started (each test runs in its own folder)
        shots = request.config.invocation_params.dir / shots
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    # The first email with at least two papers: one to change, one to skip.
    msg = next(m for m in sink.messages if m.get_body(("html",)).get_content().count('class="circle"') >= 10)  # type: ignore[union-attr]
    invitation = re.search(r"<(inv_[0-9a-f]{20})\.", msg["Message-ID"]).group(1)  # type: ignore[union-attr]
    html = msg.get_body(("html",)).get_content()  # type: ignore[union-attr]
    n_papers = html.count('class="circle"') // 5

    page = browser.new_page(viewport={"width": 1100, "height": 900})  # type: ignore[attr-defined]
    page.set_content(html)  # the email, as a mail client shows it
    if shots:
        page.screenshot(path=str(Path(shots) / "survey-email.png"), full_page=True)
    page.locator("a.circle[title='2: Vague Familiarity']").first.click()
    page.wait_for_url(re.compile(r"/r/"))
    assert store.events_since() == []  # the link opened a page; nothing is saved yet
    if shots:
        page.screenshot(path=str(Path(shots) / "survey-confirm.png"), full_page=True)
    page.get_by_role("button", name="Confirm").click()
    page.wait_for_url(re.compile(r"/i/"))
    assert "was saved" in page.locator("[role=status]").inner_text()
    papers = page.locator("fieldset.paper")
    assert papers.count() == n_papers
    for level in bars_scale()["levels"]:
        assert papers.first.get_by_text(level["anchor"]).is_visible()
    first, second = papers.nth(0), papers.nth(1)
    assert first.get_by_role("radio", name=re.compile(r"^2 · Vague Familiarity ?: I have heard")).is_checked()
    pid1 = first.locator("input[type=radio]").first.get_attribute("name").removeprefix("answer-")
    pid2 = second.locator("input[type=radio]").first.get_attribute("name").removeprefix("answer-")
    assert store.current(invitation) == {pid1: 2}

    first.get_by_role("radio", name=re.compile(r"^4 · Expert ?: ")).check()  # change a rating with the mouse
    second.locator("input[value=skip]").focus()  # and skip a paper with the keyboard
    page.keyboard.press("Space")
    assert second.get_by_role("radio", name=re.compile(r"^Skip this paper")).is_checked()
    if shots:
        page.screenshot(path=str(Path(shots) / "survey-page.png"), full_page=True)
    page.get_by_role("button", name="Submit my answers").click()
    page.wait_for_url(re.compile(r"/thanks"))
    assert f"1 of {n_papers} papers answered, 1 skipped" in page.locator("[role=status]").inner_text()
    assert store.current(invitation) == {pid1: 4, pid2: None}
    assert [(e["paper_id"], e["rating"], e["source"]) for e in store.events_since()] == [
        (pid1, 2, "click"), (pid1, 4, "form"), (pid2, None, "form")]

    phone = browser.new_page(viewport={"width": 375, "height": 740}, is_mobile=True)  # type: ignore[attr-defined]
    phone.goto(f"{base}{page.locator('a', has_text='change them').get_attribute('href')}")
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # no sideways scrolling
    assert phone.locator("fieldset.paper").first.get_by_role("radio", name=re.compile(r"^4 · Expert ?: ")).is_checked()
    if shots:
        phone.screenshot(path=str(Path(shots) / "survey-phone.png"), full_page=False)


@pytest.mark.parametrize("javascript", [True, False], ids=["javascript", "no-javascript"])
def test_a_paper_is_rated_in_two_clicks(browser, live, sink: MailSink, javascript: bool) -> None:
    s, store, _base = live
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    msg = sink.messages[0]
    invitation = re.search(r"<(inv_[0-9a-f]{20})\.", msg["Message-ID"]).group(1)  # type: ignore[union-attr]
    html = msg.get_body(("html",)).get_content()  # type: ignore[union-attr]
    # Shown only where scripts do not run: proves which kind of browser this is.
    html = html.replace("</body>", '<noscript><p id="no-js">scripts are off</p></noscript></body>')
    context = browser.new_context(java_script_enabled=javascript)  # type: ignore[attr-defined]
    try:
        page = context.new_page()
        page.set_content(html)
        assert page.locator("#no-js").is_visible() is not javascript
        page.locator("a.circle[title='4: Expert']").first.click()  # click 1: the circle in the email
        page.wait_for_url(re.compile(r"/r/"))
        assert page.get_by_text("4 · Expert").is_visible() and store.events_since() == []
        page.get_by_role("button", name="Confirm").click()  # click 2
        page.wait_for_url(re.compile(r"/i/"))
        assert "was saved" in page.locator("[role=status]").inner_text()
        assert page.locator("fieldset.paper").first.get_by_role("radio", name=re.compile(r"^4 · Expert ?: ")).is_checked()
        events = store.events_since()
        assert [(e["invitation_id"], e["rating"], e["source"]) for e in events] == [(invitation, 4, "click")]
        page.go_back()  # back on the Confirm page, and Confirm again: nothing more
        page.get_by_role("button", name="Confirm").click()
        page.wait_for_url(re.compile(r"/i/"))
        assert len(store.events_since()) == 1
    finally:
        context.close()
