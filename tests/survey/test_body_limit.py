"""Request bodies the survey server reads are bounded: the largest form it serves passes, a body
over ``MAX_BODY_BYTES`` gets a plain 413 page and records nothing, too many form fields get the
"not understood" page, and the real server, sent 1 GB (declared, or chunked and endless as far as
it knows), stays within 50 MB of its idle memory and keeps answering."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from revbench.settings import Settings
from revbench.survey.server import MAX_BODY_BYTES, MAX_FORM_FIELDS, create_app
from revbench.survey.tokens import Claim, LinkSigner
from revbench.warehouse.store import SurveyStore
from tests.support.survey import survey_server_process

KEY = "body-limit-test-key-" + "b" * 24
A, BIG = "inv_" + "a" * 20, "inv_" + "z" * 20
PAPERS = [{"paper_id": "2609.00001", "title": "Dense retrieval", "abstract": "Matching."}]
# The most papers the page's form may carry, with the longest ids arXiv gives (old style, a slash).
MOST = [{"paper_id": f"math-ph/{n:07d}", "title": f"Paper {n}", "abstract": "."} for n in range(MAX_FORM_FIELDS)]
GIB = 1 << 30


def _store(s: Settings) -> SurveyStore:
    store = SurveyStore(s.survey_store_path)
    store.publish_invitations([{"invitation_id": A, "round": 1, "papers": PAPERS},
                               {"invitation_id": BIG, "round": 1, "papers": MOST}])
    return store


@pytest.fixture
def setup(tmp_path: Path) -> tuple[SurveyStore, LinkSigner, TestClient]:
    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY})
    store = _store(s)
    return store, LinkSigner(SecretStr(KEY)), TestClient(create_app(s, store))


def test_the_largest_form_fits_under_the_cap_and_is_recorded(setup) -> None:
    store, signer, client = setup
    form = {f"answer-{p['paper_id']}": "skip" for p in MOST}
    size = len(httpx.Request("POST", "http://x/", data=form).read())
    assert 0.5 * MAX_BODY_BYTES < size <= MAX_BODY_BYTES  # headroom over any real page, and a cap near it
    r = client.post(f"/i/{signer.sign(Claim(BIG, 'page'))}", data=form, follow_redirects=False)
    assert r.status_code == 303 and len(store.current(BIG)) == MAX_FORM_FIELDS


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_cap_gets_a_plain_413_and_records_nothing(setup, chunked: bool) -> None:
    store, signer, client = setup
    body = b"List-Unsubscribe=One-Click&" + b"x" * MAX_BODY_BYTES

    def pieces() -> Iterator[bytes]:  # no length declared: sent chunked
        yield from (body[i:i + 4096] for i in range(0, len(body), 4096))

    r = client.post(f"/u/{signer.sign(Claim(A, 'optout'))}", content=pieces() if chunked else body)
    assert r.status_code == 413 and r.headers["connection"] == "close"
    assert "<h1>That was more than this page accepts</h1>" in r.text and "Nothing was recorded" in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"] and r.headers["cache-control"] == "no-store"
    assert store.opted_out() == {}
    ok = client.post(f"/u/{signer.sign(Claim(A, 'optout'))}", content=b"List-Unsubscribe=One-Click")
    assert ok.status_code == 200 and set(store.opted_out()) == {A}


def test_too_many_form_fields_are_not_understood(setup) -> None:
    store, signer, client = setup
    form = "&".join(["answer-2609.00001=3"] * (MAX_FORM_FIELDS + 1)).encode()
    assert len(form) < MAX_BODY_BYTES
    r = client.post(f"/i/{signer.sign(Claim(A, 'page'))}", content=form,
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400 and "That answer was not understood" in r.text and "<html" in r.text
    assert store.events_since() == []


def _kib(pid: int, field: str) -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])


def _post_huge(base: str, path: str, total: int, chunked: bool, timeout: float = 60) -> tuple[int | None, int, float, bool]:
    """POST ``total`` bytes of form to ``path``, generated as they go (this process never holds
    them), until the server answers or closes; (the status it answered or None, bytes sent,
    seconds, whether the server closed the connection within 5 s of answering)."""
    host, _, port = base.removeprefix("http://").partition(":")
    block = b"x" * (1 << 20)
    frame = (b"%x\r\n" % len(block)) + block + b"\r\n" if chunked else block
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            f"{length}\r\n\r\n").encode()
    t0, sent, answer = time.monotonic(), 0, b""
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head)
        sock.setblocking(False)
        pending = memoryview(b"")
        try:
            while sent < total and not answer:
                assert time.monotonic() - t0 < timeout, f"sent {sent} bytes in {timeout} s, no answer"
                readable, writable, _ = select.select([sock], [sock], [], 1)
                if readable:
                    answer = sock.recv(65536) or b"closed"
                elif writable:
                    if not pending:
                        pending = memoryview(frame)
                    n = sock.send(pending)
                    pending, sent = pending[n:], sent + n
            if not answer:  # all of it went: end the body and wait for the answer
                sock.setblocking(True)
                sock.sendall(b"0\r\n\r\n" if chunked else b"")
                answer = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            pass  # the server closed on what was still coming; what it answered first is read below
        if not answer.startswith(b"HTTP/"):
            try:
                sock.setblocking(True)
                answer = sock.recv(65536)
            except OSError:
                answer = b""
        seconds, closed = time.monotonic() - t0, False
        sock.settimeout(5)
        try:
            while sock.recv(65536):
                pass
            closed = True
        except TimeoutError:
            pass
        except OSError:
            closed = True
    status = int(answer.split()[1]) if answer.startswith(b"HTTP/1.1 ") else None
    return status, sent, seconds, closed


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_gigabyte_post_leaves_the_real_server_within_50_mb_of_idle(tmp_path: Path, chunked: bool) -> None:
    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY})
    _store(s)
    signer = LinkSigner(SecretStr(KEY))
    optout = f"/u/{signer.sign(Claim(A, 'optout'))}"
    with survey_server_process(s) as (base, proc):
        assert httpx.get(base + optout).status_code == 200  # warm: the page's template is compiled
        idle = _kib(proc.pid, "VmRSS")
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")  # the peak (VmHWM) counts from now
        status, sent, seconds, closed = _post_huge(base, optout, GIB, chunked)
        peak = _kib(proc.pid, "VmHWM")
        assert peak - idle <= 50 * 1024, f"peak {peak} KiB from {idle} KiB idle"
        assert status in (413, None), status  # None: the server closed before the answer was read
        assert sent < GIB // 4 and seconds < 20 and closed  # it stopped reading early, it did not drain the gigabyte
        assert httpx.get(f"{base}/healthz").json() == {"ok": True}
        assert SurveyStore(s.survey_store_path).opted_out() == {}
        # The same refusal, read: a body just over the cap, declared or chunked.
        over = httpx.post(base + optout, content=iter([b"x" * (MAX_BODY_BYTES + 1)]) if chunked else b"x" * (MAX_BODY_BYTES + 1))
        assert over.status_code == 413 and "Nothing was recorded" in over.text


def test_an_unread_chunked_body_closes_the_connection_after_the_answer(tmp_path: Path) -> None:
    # Confirming a rating reads no body; an endless one sent with it must not be read to its end.
    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY})
    store = _store(s)
    rate = f"/r/{LinkSigner(SecretStr(KEY)).sign(Claim(A, 'rate', '2609.00001', 4))}"
    with survey_server_process(s) as (base, proc):
        httpx.get(f"{base}/healthz")
        idle = _kib(proc.pid, "VmRSS")
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
        status, sent, seconds, closed = _post_huge(base, rate, GIB, chunked=True)
        assert status == 303 and sent < GIB // 4 and seconds < 20 and closed
        assert _kib(proc.pid, "VmHWM") - idle <= 50 * 1024
    assert store.current(A) == {"2609.00001": 4}
