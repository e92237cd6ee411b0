"""The survey server: pages, one-click ratings, refusals that record nothing, concurrency, and
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
from revbench.replay.server import AppServer
from revbench.settings import Settings
from revbench.survey.server import create_app
from revbench.survey.tokens import Claim, LinkSigner
from revbench.warehouse.survey_store import SurveyStore
from tests.survey.conftest import survey_server_process

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


def test_a_click_records_once_and_lands_on_the_page_with_it_chosen(setup) -> None:
    _s, store, signer, client = setup
    link = _url(signer, "r", Claim(A, "rate", "2609.00002", 4))
    first = client.get(link)
    assert first.status_code == 200 and "was saved" in first.text
    assert re.search(r'name="answer-2609\.00002" value="4" checked', first.text)
    assert store.current(A) == {"2609.00002": 4}
    client.get(link)  # the same link again (a replay, or a double click)
    assert len(store.events_since()) == 1


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
        r = client.get(url)
        assert r.status_code == 403 and "nothing was recorded" in r.text, url
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
        r = httpx.get(f"{base}/r/{signer.sign(Claim(A, 'rate', '2609.00001', 5))}", headers={"user-agent": "tester/9"})
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
