"""``revbench ingest`` on recorded reality: the replay server answers from a directory of recorded
real exchanges (an arXiv Atom page, a Semantic Scholar batch, GROBID TEI from
``../shared/external/real-responses``, small PDFs), assembled here at test time, and the real
clients, stages and warehouse run end to end. Also: VCR cassettes served as they are."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import httpx
import pytest
import yaml

from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.errors import InputError
from revbench.replay.cassettes import load_recordings, mount_path
from revbench.replay.server import ReplayApp, ReplayServer
from revbench.schemas.tables import MENTIONS, PAPERS, REJECTS
from revbench.settings import ReplaySettings, Settings
from revbench.warehouse import Warehouse
from tests.support.common import on_replay, run_cli, settings_env
from tests.support.conformance import REAL, needs_samples

pytestmark = needs_samples
PDF = Path(__file__).resolve().parents[1] / "clients" / "fixtures" / "paper.pdf"
PAGE = REAL / "arxiv" / "q_testing_s0_m10_bc5a6c384fe9.xml"
EMPTY = REAL / "arxiv" / "id_0000.0000_s0_m100_8b51d9633a68.xml"
MATCHED_TEI = REAL / "grobid" / "tests__resources__refs_offsets__2021.naacl-main.224.grobid.tei.xml"
MATCHED_ID = "2202.12139"  # "Testing Deep Learning Models: A First Comparative Study of Multiple Testing Techniques"
# The GROBID samples other papers get, one each (their titles are other papers': title_mismatch;
# the withdrawn article has no title at all: missing_title).
OTHER_TEIS = sorted(p for p in (REAL / "grobid").glob("*.xml") if p != MATCHED_TEI)[:9]


def entries(page: bytes) -> list[tuple[str, int, str]]:
    """(id, version, title) of each entry of an Atom page."""
    out = []
    for entry in re.findall(rb"<entry>(.*?)</entry>", page, re.S):
        m = re.search(rb"<id>http://arxiv.org/abs/(\S+?)v(\d+)</id>", entry)
        title = re.search(rb"<title>(.*?)</title>", entry, re.S)
        assert m and title
        out.append((m[1].decode(), int(m[2]), " ".join(title[1].decode().split())))
    return out


def cassette_dir(tmp: Path) -> tuple[Path, list[tuple[str, int, str]]]:
    """A routes.json directory of recorded answers for one crawl window of one category."""
    d = tmp / "cassettes"
    d.mkdir()
    page = PAGE.read_bytes()
    # The recorded page answered a query with 214881 results; here it answers our window, which
    # has these ten (otherwise the crawl would split the window to the minute).
    page = re.sub(rb"(<opensearch:totalResults[^>]*>)214881<", rb"\g<1>10<", page)
    (d / "page.xml").write_bytes(page)
    shutil.copy(EMPTY, d / "empty.xml")
    papers = entries(page)
    atom = {"content-type": "application/atom+xml; charset=utf-8"}
    routes: list[dict[str, object]] = [
        {"method": "GET", "path": "/arxiv/api/query", "query": {"start": "0"}, "headers": atom, "body_file": "page.xml"},
        # Any later page, and the reachability probe: an empty feed.
        {"method": "GET", "path": "/arxiv/api/query", "headers": atom, "body_file": "empty.xml"},
    ]
    # S2 knows the first three of the batch (real paper objects), not the rest (null items).
    real_batch = yaml.safe_load((REAL / "s2" / "test_get_papers.yaml").read_text())["interactions"][0]
    known = json.loads(real_batch["response"]["body"]["string"])
    (d / "s2_batch.json").write_text(json.dumps(known + [None] * (len(papers) - len(known))))
    routes.append({"method": "POST", "path": "/s2/graph/v1/paper/batch", "headers": {"content-type": "application/json"},
                   "body_file": "s2_batch.json"})
    others = iter(OTHER_TEIS)
    for arxiv_id, version, title in papers:
        marker = f"%cassette {arxiv_id}\n"
        name = arxiv_id.replace("/", "_")
        (d / f"{name}.pdf").write_bytes(PDF.read_bytes() + marker.encode())  # after %%EOF: still a valid PDF
        routes.append({"method": "GET", "path": f"/arxiv/pdf/{arxiv_id}v{version}",
                       "headers": {"content-type": "application/pdf"}, "body_file": f"{name}.pdf"})
        if arxiv_id == MATCHED_ID:
            tei = MATCHED_TEI.read_text(encoding="utf-8")
            tei, n = re.subn(r"Incorporating External Knowledge to Enhance Tabular Reasoning", title, tei)
            assert n >= 1
            (d / f"{name}.tei.xml").write_text(tei, encoding="utf-8")
        else:
            shutil.copy(next(others), d / f"{name}.tei.xml")
        routes.append({"method": "POST", "path": "/grobid/api/processHeaderDocument", "body_contains": marker.strip(),
                       "headers": {"content-type": "application/xml; charset=UTF-8"}, "body_file": f"{name}.tei.xml"})
    (d / "routes.json").write_text(json.dumps(routes, indent=1))
    return d, papers


def test_ingest_runs_end_to_end_on_recorded_answers(tmp_path: Path, replay, settings: Settings,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    d, papers = cassette_dir(tmp_path)
    assert len(papers) == 10 and MATCHED_ID in {p[0] for p in papers}
    app = replay(fixtures=d)
    s = on_replay(settings, app).with_overrides(arxiv={"categories": ["cs.SE"]})
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "summary.json"
    code, stdout, stderr = run_cli("ingest", "--since", "2026-01-05", "--until", "2026-01-05", "--no-track",
                                   "--json-out", str(out))
    assert code == 0, stdout + stderr
    assert "Traceback" not in stderr
    assert "title_mismatch" in stdout and "missing_title" in stdout  # the summary names every reason
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        loaded = wh.read(PAPERS)
        rejects = wh.read(REJECTS)
        mentions = wh.read(MENTIONS)
    # The one paper whose TEI carries its title loads with all its arXiv authors; the others
    # got another paper's TEI (title_mismatch) or the withdrawn article's untitled one.
    assert loaded["arxiv_id"].to_list() == [MATCHED_ID]
    assert mentions.filter(mentions["arxiv_id"] == MATCHED_ID).height == loaded["n_authors"][0] > 0
    by_reason = dict(rejects.group_by("reason").len().iter_rows())
    assert by_reason == {"title_mismatch": 8, "missing_title": 1}
    summary = json.loads(out.read_text())
    stages = {st["stage"]: st for st in summary["stages"]}
    assert stages["crawl"]["rows_out"] == 10 and stages["enrich"]["rows_out"] == 3
    served = app.faults.stats()["served"]
    assert served.get("grobid", 0) == 10 and served.get("pdf", 0) == 10


def test_vcr_cassettes_are_served_as_recorded_through_the_real_client(tmp_path: Path, settings: Settings) -> None:
    d = tmp_path / "vcr"
    d.mkdir()
    for name in ("test_get_papers.yaml", "test_not_found.yaml", "test_get_author_papers.yaml"):
        shutil.copy(REAL / "s2" / name, d / name)
    routes = load_recordings(d)
    assert len(routes) == 1 + 2 + 9
    app = ReplayApp(ReplaySettings(fault_rate=0.0), fixtures_dir=d)
    with ReplayServer(app) as server:
        s = on_replay(settings, app_at(app, server.base))
        client = SemanticScholarClient(s.s2, s.http.model_copy(update={"max_attempts": 1}))
        try:
            # Our client asks for its own fields and ids; the recorded answer stands for them.
            batch = client.paper_batch(["2202.12139", "2405.13786", "2005.14124"])
            assert [p["paperId"] for p in batch] == ["c31c87c591a25c64fbaa82e8ac6a81831b6ac7ce",
                                                     "cb1ebd913c3724c599f6b276b14b5c6253da68f3",
                                                     "0f40b1f08821e22e859c6050916cec3667778613"]
            assert batch[0]["authors"][0]["name"] == "Marianne Bertrand"
            papers = client.author_papers("1723755")
            assert len(papers) == 875  # 9 recorded pages followed by their `next` offsets
        finally:
            client.close()
        r = httpx.get(f"{server.base}/s2/graph/v1/paper/0", params={"fields": "title"})
        assert r.status_code == 404 and r.json() == {"error": "Paper with id 0 not found"}
        assert r.headers["content-type"] == "application/json"


def app_at(app: ReplayApp, base: str) -> ReplayApp:
    app.base = base  # type: ignore[attr-defined]  # what on_replay points the settings at
    return app


def test_identical_recordings_play_in_turn_and_bodies_tell_uploads_apart(tmp_path: Path) -> None:
    d = tmp_path / "rec"
    d.mkdir()
    for name, text in {"a": "first", "b": "second", "x": "for x", "y": "for y"}.items():
        (d / name).write_text(text)
    (d / "routes.json").write_text(json.dumps([
        {"method": "GET", "path": "/s2/graph/v1/paper/P", "status": 429, "body_file": "a"},
        {"method": "GET", "path": "/s2/graph/v1/paper/P", "body_file": "b"},
        {"method": "POST", "path": "/grobid/api/processHeaderDocument", "body_contains": "PDF-X", "body_file": "x"},
        {"method": "POST", "path": "/grobid/api/processHeaderDocument", "body_contains": "PDF-Y", "body_file": "y"},
    ]))
    with ReplayServer(ReplayApp(ReplaySettings(fault_rate=0.0), fixtures_dir=d)) as server:
        got = [httpx.get(f"{server.base}/s2/graph/v1/paper/P") for _ in range(3)]
        assert [(r.status_code, r.text) for r in got] == [(429, "first"), (200, "second"), (200, "second")]
        up = f"{server.base}/grobid/api/processHeaderDocument"
        assert httpx.post(up, files={"input": ("p.pdf", b"%PDF-Y...")}).text == "for y"
        assert httpx.post(up, files={"input": ("p.pdf", b"%PDF-X...")}).text == "for x"
        # No recording for this upload: the world's route answers (here: no world, no TEI).
        assert httpx.post(up, files={"input": ("p.pdf", b"%PDF-Z...")}).status_code == 500


def test_recorded_urls_land_on_the_mount_points() -> None:
    assert mount_path("https://api.semanticscholar.org/graph/v1/paper/batch?fields=authors") == (
        "/s2/graph/v1/paper/batch", {"fields": "authors"})
    assert mount_path("http://export.arxiv.org/api/query?id_list=abc")[0] == "/arxiv/api/query"
    assert mount_path("https://arxiv.org/pdf/2202.12139v1")[0] == "/arxiv/pdf/2202.12139v1"
    assert mount_path("http://localhost:8070/api/processHeaderDocument")[0] == "/grobid/api/processHeaderDocument"


def test_a_broken_recording_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("interactions:\n- request: {method: GET}\n  response: {}\n")
    with pytest.raises(InputError, match=r"bad\.yaml interaction 0: not a VCR interaction"):
        load_recordings(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="neither routes.json nor"):
        load_recordings(empty)
