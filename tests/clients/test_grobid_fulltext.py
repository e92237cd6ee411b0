"""GROBID's full text through the real client: off by default, the parameters it sends, and the
replay server's answer for the SYNTHETIC world."""

from __future__ import annotations

from pathlib import Path

import pytest

from revbench.clients.grobid import GrobidHeaderClient
from revbench.clients.tei import parse_tei_header
from revbench.errors import UsageError
from tests.support.common import on_replay
from tests.support.conformance import serving

PDF = b"%PDF-1.4\n%%EOF\n"
ONE_REF = (b'<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader/><text><back><listBibl>'
           b'<biblStruct xml:id="b0"><monogr><title level="m">Consolidated</title></monogr></biblStruct>'
           b"</listBibl></back></text></TEI>")
NO_REF = b'<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader/><text><back><listBibl/></back></text></TEI>'


def test_full_text_is_off_by_default_and_asks_nothing(settings) -> None:
    client = GrobidHeaderClient(settings.grobid, settings.http)
    with pytest.raises(UsageError, match="REVBENCH_GROBID__FULLTEXT"):
        client.references(PDF)
    assert client.requests_made == 0


@pytest.mark.parametrize(("consolidate", "titles"), [(False, []), (True, ["Consolidated"])])
def test_full_text_asks_raw_references_and_consolidation_only_when_set(tmp_path: Path, settings, consolidate: bool,
                                                                       titles: list[str]) -> None:
    # Each answer is given only to a request whose form carries the field: the parameters are what
    # GROBID receives, not what the client meant to send.
    path = "/grobid/api/processFulltextDocument"
    routes = [{"method": "POST", "path": path, "body_contains": 'name="consolidateCitations"', "body": ONE_REF},
              {"method": "POST", "path": path, "body_contains": 'name="includeRawCitations"', "body": NO_REF}]
    with serving(tmp_path / "replay", routes) as base:
        s = settings.with_overrides(grobid={"base_url": f"{base}/grobid", "fulltext": True,
                                            "consolidate_citations": consolidate})
        refs, _tei = GrobidHeaderClient(s.grobid, s.http).references(PDF)
    assert [r.title for r in refs] == titles


def test_the_synthetic_world_answers_full_text_with_its_header_and_references(replay, settings, small_world) -> None:
    app = replay(world=small_world, fault_rate=0.0)
    s = on_replay(settings, app).with_overrides(grobid={"fulltext": True})
    client = GrobidHeaderClient(s.grobid, s.http)
    pdf = next(iter(app.world.pdfs.values()))
    refs, tei = client.references(pdf, name="world.pdf")
    header, _ = client.header(pdf, name="world.pdf")
    assert len(refs) >= 10 and "<listBibl>" in tei  # the world's graph's (tests/synth/test_world_graph_replay.py)
    assert parse_tei_header(tei) == header
