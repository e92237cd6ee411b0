"""The survey server: pages, rating links confirmed by a POST (scanners that open every link
record nothing), refusals that record nothing, bounded per-link state, concurrency, and
durability of acknowledged answers."""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from revbench.errors import WarehouseDamaged
from revbench.flows.survey import survey_flow
from revbench.replay.mailsink import MailSink
from revbench.replay.server import AppServer, free_port
from revbench.settings import Settings
from revbench.survey.server import RateLimiter, create_app
from revbench.survey.tokens import Claim, LinkSigner
from revbench.synth.respondents import confirm, message_links, opt_out, scan
from revbench.warehouse.store import SurveyStore
from tests.support.survey import survey_server_process

KEY = "server-test-key-" + "s" * 24
A, B = "inv_" + "a" * 20, "inv_" + "b" * 20
PAPERS = {
    A: [{"paper_id": "2609.00001", "title": "Dense retrieval <b>for</b> reviewers", "abstract": "We <script>alert('x')</script> match."},
        {"paper_id": "2609.00002", "title": "Graph neural networks", "abstract": "Message passing on molecules."}],
    B: [{"paper_id": "2609.00003", "title": "Speech translation", "abstract": "End-to-end models."}],
}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Settings, SurveyStore, LinkSigner, TestClient]:
    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY, "rate_limit_per_minute": 30})
    store = SurveyStore(s.survey_store_path)
    store.publish_invitations([{"invitation_id": i, "round": 1, "papers": p} for i, p in PAPERS.items()])
    return s, store, LinkSigner(SecretStr(KEY)), TestClient(create_app(s, store))


def _url(signer: LinkSigner, kind: str, claim: Claim) -> str:
    return f"/{kind}/{signer.sign(claim)}"


def test_the_page_shows_every_paper_with_the_scale_escaped_and_locked_down(setup) -> None:
    _s, _store, signer, client = setup
    r = client.get(_url(signer, "i", Claim(A, "page")))
    assert r.status_code == 200
    html = r.text
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert "Dense retrieval &lt;b&gt;for&lt;/b&gt; reviewers" in html and "Message passing on molecules." in html
    for label in ("Top Expert", "Expert", "Knowledgeable", "Vague Familiarity", "No Expertise", "Skip this paper"):
        assert label in html
    assert html.count("<fieldset") == 2 and html.count('type="radio"') == 12 and html.count("<label") == 12
    assert 'name="viewport"' in html and "<script" not in html.replace("&lt;script", "")
    assert "default-src 'none'" in r.headers["content-security-policy"] and r.headers["referrer-policy"] == "no-referrer"
    assert r.headers["cache-control"] == "no-store"


def test_opening_a_rating_link_records_nothing_confirm_records_once(setup) -> None:
    _s, store, signer, client = setup
    link = _url(signer, "r", Claim(A, "rate", "2609.00002", 4))
    for _ in range(3):  # opened, and opened again: a page, nothing recorded
        opened = client.get(link)
        assert opened.status_code == 200 and "Graph neural networks" in opened.text and "4 · Expert" in opened.text
        assert client.head(link).status_code == 405
    assert store.events_since() == [] and store.opted_out() == {}
    assert opened.text.count("<form") == 1 and f'<form class="confirm" method="post" action="{link}">' in opened.text
    assert "<script" not in opened.text and "form-action 'self'" in opened.headers["content-security-policy"]
    confirmed = client.post(link, follow_redirects=False)  # the Confirm button
    assert confirmed.status_code == 303 and re.fullmatch(r"/i/[^?]+\?saved=2#paper-2", confirmed.headers["location"])
    landed = client.get(confirmed.headers["location"])
    assert "was saved" in landed.text and re.search(r'name="answer-2609\.00002" value="4" checked', landed.text)
    assert store.current(A) == {"2609.00002": 4}
    assert client.post(link).status_code == 200  # the same Confirm again (a replay, or a double click)
    assert len(store.events_since()) == 1
    again = client.get(link)  # the page now says the answer is saved
    assert "This answer is already saved" in again.text and len(store.events_since()) == 1
    other = client.get(_url(signer, "r", Claim(A, "rate", "2609.00002", 2)))
    assert "Your saved answer is 4 · Expert; Confirm replaces it" in other.text and len(store.events_since()) == 1


def test_a_scanner_opening_every_link_of_every_email_records_nothing(survey_settings: Settings, sink: MailSink) -> None:
    """Mail security scanners open every link of a message before its reader: HEAD and GET, in
    order or not, following redirects or not, fetching the page's style sheet or not."""
    port = free_port()
    s = survey_settings.with_overrides(survey={"base_url": f"http://127.0.0.1:{port}"})
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    store = SurveyStore(s.survey_store_path)
    assert len(sink.messages) > 3
    statuses: list[int] = []
    with AppServer(create_app(s, store), port=port):
        for msg in sink.messages:
            links = message_links(msg)
            assert {"/r/", "/i/", "/u/"} <= {u[len(s.survey.base_url):][:3] for u in links}
            for follow, order, methods in ((False, links, ("HEAD", "GET")), (True, links[::-1], ("GET", "HEAD"))):
                with httpx.Client(follow_redirects=follow, timeout=30) as http:
                    for url in order:
                        for method in methods:
                            r = http.request(method, url)
                            statuses.append(r.status_code)
                            if method == "GET" and follow:
                                for sheet in re.findall(r'<link rel="stylesheet" href="([^"]+)"', r.text):
                                    statuses.append(http.get(str(r.url.join(sheet))).status_code)
            assert scan(msg, seed=7) > len(links)  # the panel's scanner too
        assert store.events_since() == [] and store.opted_out() == {}
        assert set(statuses) == {200, 405} and statuses.count(200) > len(sink.messages) * 10

        # Then the people: a rating is the link and its Confirm (two clicks); a replayed Confirm adds nothing.
        first, second = message_links(sink.messages[0]), message_links(sink.messages[1])
        rating = next(u for u in first if "/r/" in u)
        with httpx.Client(follow_redirects=True, timeout=30) as http:
            landed = confirm(http, rating)
            assert "was saved" in landed.text
            assert len(store.events_since()) == 1
            assert http.post(rating).status_code == 200 and len(store.events_since()) == 1
            opt_out(http, next(u for u in second if "/u/" in u))
        assert len(store.opted_out()) == 1 and len(store.events_since()) == 1


def test_forged_tokens_leave_no_per_link_state(setup) -> None:
    _s, store, signer, client = setup
    limiter = client.app.state.pages.limiter
    other = LinkSigner(SecretStr("f" * 32))
    good = signer.sign(Claim(A, "rate", "2609.00001", 3))
    forged = [other.sign(Claim(f"inv_{n:020x}", "rate", "2609.00001", 3)) for n in range(100)]
    forged += [good.rsplit(".", 1)[0] + "." + other.sign(Claim(f"inv_{n:020x}", "page")).rsplit(".", 1)[1] for n in range(100)]
    for token in forged:
        for method, kind in (("GET", "r"), ("POST", "r"), ("GET", "i"), ("POST", "u")):
            assert client.request(method, f"/{kind}/{token}").status_code == 403
    assert len(limiter) == 0 and store.events_since() == [] and store.opted_out() == {}
    assert client.get(f"/r/{good}").status_code == 200 and len(limiter) == 1  # a link we signed is counted


def test_a_malformed_saved_is_answered_before_the_link_is_checked(setup) -> None:
    _s, store, signer, client = setup
    limiter = client.app.state.pages.limiter
    forged = LinkSigner(SecretStr("f" * 32)).sign(Claim(A, "page"))
    for token in (forged, signer.sign(Claim(A, "page"))):
        assert client.get(f"/i/{token}", params={"saved": "first"}).status_code == 422
    assert len(limiter) == 0 and store.events_since() == []  # no link was checked, none counted
    assert client.get(f"/i/{signer.sign(Claim(A, 'page'))}", params={"saved": "1"}).status_code == 200


def test_the_rate_limiter_forgets_idle_links_and_keeps_at_most_max_keys() -> None:
    limiter = RateLimiter(2, window=0.05, max_keys=3)
    assert [limiter.allow("a") for _ in range(3)] == [True, True, False]
    for key in "bcdef":
        assert limiter.allow(key)
    assert len(limiter) == 3  # the least recently used went first
    time.sleep(0.1)
    assert limiter.allow("a") and len(limiter) == 1  # idle links forgotten; "a" starts afresh


def test_an_old_optout_link_still_works_an_old_rating_link_does_not(setup, monkeypatch: pytest.MonkeyPatch) -> None:
    s, store, signer, client = setup
    import itsdangerous.timed

    old = time.time() - (s.survey.link_max_age_days + 1) * 86400
    monkeypatch.setattr(itsdangerous.timed.time, "time", lambda: old)
    optout, rating, page = (signer.sign(c) for c in (Claim(A, "optout"), Claim(A, "rate", "2609.00001", 5), Claim(A, "page")))
    monkeypatch.undo()
    for url in (f"/r/{rating}", f"/i/{page}"):
        for method in ("GET", "POST"):
            assert client.request(method, url).status_code == 403, (method, url)
    assert store.events_since() == []
    assert "Yes, do not contact me again" in client.get(f"/u/{optout}").text and store.opted_out() == {}
    assert "will not be contacted again" in client.post(f"/u/{optout}").text and set(store.opted_out()) == {A}


def test_the_form_changes_skips_and_thanks(setup) -> None:
    _s, store, signer, client = setup
    page = _url(signer, "i", Claim(A, "page"))
    r = client.post(page, data={"answer-2609.00001": "5", "answer-2609.00002": "skip"})
    assert r.status_code == 200 and "1 of 2 papers answered, 1 skipped" in r.text
    assert store.current(A) == {"2609.00001": 5, "2609.00002": None}
    client.post(page, data={"answer-2609.00001": "5", "answer-2609.00002": "2"})
    assert store.current(A) == {"2609.00001": 5, "2609.00002": 2}
    assert [e["rating"] for e in store.events_since()] == [5, None, 2]  # unchanged answers add nothing


def test_refused_links_and_answers_record_nothing(setup, monkeypatch: pytest.MonkeyPatch) -> None:
    _s, store, signer, client = setup
    good = signer.sign(Claim(A, "rate", "2609.00001", 3))
    import itsdangerous.timed

    old = time.time() - 40 * 86400
    monkeypatch.setattr(itsdangerous.timed.time, "time", lambda: old)
    expired = signer.sign(Claim(A, "rate", "2609.00001", 3))
    monkeypatch.undo()
    refused = [
        f"/r/{good[:-2]}xx",                                                  # tampered signature
        f"/r/{LinkSigner(SecretStr('z' * 32)).sign(Claim(A, 'rate', '2609.00001', 3))}",  # forged (another key)
        f"/r/{expired}",                                                      # expired
        _url(signer, "r", Claim(A, "rate", "2609.00003", 3)),                # a paper of another invitation
        _url(signer, "r", Claim("inv_" + "c" * 20, "rate", "2609.00001", 3)),  # an invitation that does not exist
        _url(signer, "r", Claim(A, "page")),                                  # the wrong kind of link
        _url(signer, "i", Claim(A, "rate", "2609.00001", 3)),
        _url(signer, "u", Claim(A, "page")),
    ]
    for url in refused:
        for method in ("GET", "POST"):
            r = client.request(method, url)
            assert r.status_code == 403 and "nothing was recorded" in r.text, (method, url)
    bad_form = client.post(_url(signer, "i", Claim(A, "page")), data={"answer-2609.00001": "7"})
    other = client.post(_url(signer, "i", Claim(A, "page")), data={"answer-2609.00003": "4"})
    assert bad_form.status_code == 400 and other.status_code == 400
    assert store.events_since() == [] and store.opted_out() == {}


def test_a_link_is_rate_limited(setup) -> None:
    _s, store, signer, client = setup
    page = _url(signer, "i", Claim(B, "page"))
    codes = [client.get(page).status_code for _ in range(32)]
    assert codes[:30] == [200] * 30 and codes[30:] == [429, 429]


def test_opting_out_by_link_or_one_click(setup) -> None:
    _s, store, signer, client = setup
    link = _url(signer, "u", Claim(A, "optout"))
    assert "Yes, do not contact me again" in client.get(link).text and store.opted_out() == {}
    assert "will not be contacted again" in client.post(link).text
    client.post(_url(signer, "u", Claim(B, "optout")), content=b"List-Unsubscribe=One-Click")
    assert set(store.opted_out()) == {A, B}


def test_fifty_simultaneous_submissions_are_all_recorded(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY})
    store = SurveyStore(s.survey_store_path)
    ids = [f"inv_{i:020x}" for i in range(50)]
    store.publish_invitations([{"invitation_id": i, "round": 1, "papers": PAPERS[A]} for i in ids])
    signer = LinkSigner(SecretStr(KEY))
    barrier = threading.Barrier(50)
    codes: list[int] = []
    with AppServer(create_app(s, store)) as server:
        def submit(i: str) -> None:
            barrier.wait()
            r = httpx.post(f"{server.base}/i/{signer.sign(Claim(i, 'page'))}", data={"answer-2609.00001": "4"}, timeout=60)
            codes.append(r.status_code)

        threads = [threading.Thread(target=submit, args=(i,)) for i in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert codes.count(303) == 50
    assert len(store.events_since()) == 50 and {e["invitation_id"] for e in store.events_since()} == set(ids)


@pytest.mark.slow
def test_an_acknowledged_answer_survives_killing_the_server(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY})
    store = SurveyStore(s.survey_store_path)
    store.publish_invitations([{"invitation_id": A, "round": 1, "papers": PAPERS[A]}])
    signer = LinkSigner(SecretStr(KEY))
    with survey_server_process(s) as (base, proc):
        r = httpx.post(f"{base}/r/{signer.sign(Claim(A, 'rate', '2609.00001', 5))}", headers={"user-agent": "tester/9"})
        assert r.status_code == 303  # acknowledged
        proc.send_signal(signal.SIGKILL)
        _out, err = proc.communicate()
    assert SurveyStore(s.survey_store_path).current(A) == {"2609.00001": 5}
    assert "127.0.0.1" not in err.replace(base.removeprefix("http://"), "") and "tester/9" not in err  # no address or agent logged


@pytest.mark.parametrize("content", [b"not a database\n", "cut"])
def test_a_damaged_store_is_named_not_overwritten(tmp_path: Path, content: bytes | str) -> None:
    path = tmp_path / "survey.sqlite"
    if content == "cut":  # a real store cut off part-way, as a full disk leaves it
        store = SurveyStore(path)
        store.publish_invitations([{"invitation_id": i, "round": 1, "papers": PAPERS[A] * 40} for i in (A, B)])
        store.close()  # the last connection out checkpoints the WAL into the file
        content = path.read_bytes()[:3000]
    path.write_bytes(content)
    with pytest.raises(WarehouseDamaged, match=rf"the survey store {re.escape(str(path))} cannot be read .*move it aside"):
        SurveyStore(path)
    assert path.read_bytes() == content


def test_a_declared_answer_time_counts_only_on_a_server_for_a_simulated_panel(setup) -> None:
    """A SYNTHETIC panel says when, on its simulated clock, it answered; a server for one records
    that time (a bad one records nothing), any other server its own clock's, so real answers keep
    their real times whatever a client claims."""
    from datetime import UTC, datetime

    from revbench.survey import SIMULATED_TIME_HEADER

    s, store, signer, real = setup
    simulated = TestClient(create_app(s.with_overrides(survey={"simulated_answer_times": True}), store))
    then = {SIMULATED_TIME_HEADER: "2026-09-21T12:00:03.25+02:00"}
    before = datetime.now(UTC)
    assert real.post(_url(signer, "r", Claim(A, "rate", "2609.00001", 4)), headers=then).status_code == 200
    assert simulated.post(_url(signer, "r", Claim(A, "rate", "2609.00002", 2)), headers=then).status_code == 200
    assert simulated.post(_url(signer, "i", Claim(B, "page")), data={"answer-2609.00003": "skip"},
                          headers={SIMULATED_TIME_HEADER: "2026-09-21T10:00:09+00:00"}).status_code == 200
    for bad in ("yesterday", "2026-09-21T10:00:09"):  # not a time, or one without its zone
        r = simulated.post(_url(signer, "r", Claim(A, "rate", "2609.00001", 1)), headers={SIMULATED_TIME_HEADER: bad})
        assert r.status_code == 400 and "Nothing was recorded" in r.text
    assert simulated.post(_url(signer, "u", Claim(B, "optout")), headers=then).status_code == 200
    events = {e["paper_id"]: e["created_at"] for e in store.events_since()}
    assert len(events) == 3 and datetime.fromisoformat(events["2609.00001"]) >= before  # the real one: the server's clock
    assert events["2609.00002"] == "2026-09-21T10:00:03.250000+00:00"  # as the store writes its own times
    assert events["2609.00003"] == "2026-09-21T10:00:09.000000+00:00"
    assert store.opted_out()[B] == "2026-09-21T10:00:03.250000+00:00"
