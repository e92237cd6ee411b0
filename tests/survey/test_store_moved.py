"""A survey store moved aside or replaced while the server runs: the server stops writing to the
moved file at once (what it acknowledged stays in that file), refuses with a page that records
nothing and one line in its log while nothing is at the path, and writes to the store put back
there from then on."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from revbench.errors import SurveyStoreGone
from revbench.settings import Settings
from revbench.survey.tokens import Claim, LinkSigner
from revbench.warehouse.store import SurveyStore
from tests.support.answers import store_logs_open
from tests.support.survey import survey_server_process

KEY = "moved-store-key-" + "m" * 24
A, B = "inv_" + "a" * 20, "inv_" + "b" * 20
PAPERS = {A: [{"paper_id": "2609.00001", "title": "Dense retrieval", "abstract": "We match."},
              {"paper_id": "2609.00002", "title": "Graph networks", "abstract": "Message passing."}],
          B: [{"paper_id": "2609.00003", "title": "Speech translation", "abstract": "End-to-end models."}]}


def _events(path: Path) -> list[tuple[str, str, int]]:
    """The answers in the store file at ``path`` (read as a file, with no store object)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT invitation_id, paper_id, rating FROM events ORDER BY event_id").fetchall()
    finally:
        con.close()


def _copy(src: Path, dst: Path) -> None:
    """A consistent copy of a store (SQLite's online backup)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    with b:
        a.backup(b)
    a.close()
    b.close()


@pytest.mark.slow
def test_a_store_moved_aside_is_never_written_again_and_the_one_put_back_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "500")  # the server's log lines unwrapped
    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY})
    path = s.survey_store_path
    store = SurveyStore(path)
    store.publish_invitations([{"invitation_id": i, "round": 1, "papers": PAPERS[i]} for i in (A, B)])
    epoch = store.epoch()
    store.close()
    del store
    _copy(path, tmp_path / "backup.sqlite")  # the invitations, no answer yet
    sign = LinkSigner(SecretStr(KEY)).sign
    with survey_server_process(s) as (base, proc), httpx.Client(base_url=base, timeout=30) as http:
        assert http.post(f"/r/{sign(Claim(A, 'rate', '2609.00001', 5))}").status_code == 303  # acknowledged
        # The curator moves the store file aside (only the file: its -wal and -shm stay where they are).
        aside = tmp_path / "aside.sqlite"
        path.rename(aside)
        for _ in range(2):
            r = http.post(f"/r/{sign(Claim(A, 'rate', '2609.00002', 4))}")
            assert r.status_code == 503 and "Nothing was recorded" in r.text and r.headers["retry-after"] == "60"
        # The answer acknowledged before the move is in the moved file, and nothing after it.
        assert _events(aside) == [(A, "2609.00001", 5)]
        # A store is put back at the path (here restored from a backup): answers go to it.
        _copy(tmp_path / "backup.sqlite", path)
        assert http.post(f"/r/{sign(Claim(B, 'rate', '2609.00003', 2))}").status_code == 303
        assert http.get(f"/i/{sign(Claim(B, 'page'))}").status_code == 200
        assert http.post(f"/r/{sign(Claim(A, 'rate', '2609.00002', 3))}").status_code == 303
    _out, err = proc.communicate()
    assert _events(path) == [(B, "2609.00003", 2), (A, "2609.00002", 3)]
    assert _events(aside) == [(A, "2609.00001", 5)]
    assert SurveyStore(path).epoch() == epoch  # the backup's own epoch: the ratings stage checks it by its mark
    gone = [ln for ln in err.splitlines() if "is gone" in ln]
    assert len(gone) == 1 and f"the survey store {path} is gone" in gone[0] and "nothing is recorded" in gone[0], err
    assert "Traceback" not in err
    assert sum(f"the survey store {path} was replaced" in ln for ln in err.splitlines()) == 1, err


def test_a_replaced_store_closes_every_thread_s_connection_to_the_old_file(tmp_path: Path) -> None:
    """In one process: connections other threads opened to the moved file are closed too, the
    next call on any thread reaches the file now at the path, and a missing file is one line."""
    path = tmp_path / "survey.sqlite"
    store = SurveyStore(path)
    store.publish_invitations([{"invitation_id": A, "round": 1, "papers": PAPERS[A]}])
    other = SurveyStore(tmp_path / "other.sqlite")  # another store, with an epoch of its own
    other.publish_invitations([{"invitation_id": B, "round": 1, "papers": PAPERS[B]}])
    other_epoch = other.epoch()
    other.close()
    ready, go, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[object] = []

    def worker() -> None:  # a server thread: it opened its connection, then waits idle
        store.record_click(A, "2609.00001", 5, "t1")
        ready.set()
        go.wait(30)
        try:
            seen.append(store.record_click(B, "2609.00003", 2, "t2"))
        except SurveyStoreGone as exc:
            seen.append(exc)
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    assert ready.wait(30)
    path.rename(tmp_path / "aside.sqlite")
    with pytest.raises(SurveyStoreGone, match=rf"^the survey store {path} is gone .*nothing is recorded") as refused:
        store.record_click(A, "2609.00002", 4, "t3")
    assert "\n" not in str(refused.value)
    assert _events(tmp_path / "aside.sqlite") == [(A, "2609.00001", 5)]  # the idle thread's connection closed too
    (tmp_path / "other.sqlite").rename(path)
    go.set()
    assert done.wait(30)
    t.join()
    assert seen == [True]  # the worker's next call went to the store now at the path
    assert store.epoch() == other_epoch and _events(path) == [(B, "2609.00003", 2)]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd (Linux)")
def test_a_stopped_server_leaves_no_connection_to_the_store_open(tmp_path: Path) -> None:
    # Its threads' connections would otherwise stay until the garbage collector finds them, each
    # holding the store's log open in this process (see the backup's lost-store test).
    from revbench.replay.server import AppServer, free_port
    from revbench.survey.server import create_app

    s = Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": KEY})
    SurveyStore(s.survey_store_path).publish_invitations([{"invitation_id": A, "round": 1, "papers": PAPERS[A]}])
    sign = LinkSigner(SecretStr(KEY)).sign
    with AppServer(create_app(s), port=free_port()) as server, httpx.Client(base_url=server.base, timeout=30) as http:
        assert http.post(f"/r/{sign(Claim(A, 'rate', '2609.00001', 4))}").status_code == 303
        assert store_logs_open(s.survey_store_path) >= 1
    assert store_logs_open(s.survey_store_path) == 0
