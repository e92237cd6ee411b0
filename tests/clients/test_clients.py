"""Each client against recorded responses, and against every fault kind the replay server injects."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from revbench.clients.arxiv_api import ArxivClient, split_short_id
from revbench.clients.grobid import GrobidHeaderClient
from revbench.clients.pdf import PdfClient
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.retry import PermanentError, TransientError, parse_retry_after
from revbench.settings import Settings
from tests.support.common import FIXTURES, on_replay

START = datetime(2025, 9, 1, tzinfo=UTC)
END = datetime(2025, 9, 1, 23, 59, tzinfo=UTC)


def _arxiv(s: Settings) -> list:
    return ArxivClient(s.arxiv, s.http).search_window("cs.IR", START, END)[0]


def _s2(s: Settings) -> list:
    return SemanticScholarClient(s.s2, s.http).paper_batch(["2508.01234", "0000.00000"])


def _pdf(s: Settings) -> bytes:
    return PdfClient(s.pdf, s.http).fetch("2508.01234", 2)


def _grobid(s: Settings):
    return GrobidHeaderClient(s.grobid, s.http).header((FIXTURES / "paper.pdf").read_bytes())[0]


CALLS = {"arxiv": _arxiv, "s2": _s2, "pdf": _pdf, "grobid": _grobid}


def test_arxiv_parses_recorded_page(replay, settings) -> None:
    records = _arxiv(on_replay(settings, replay(fixtures=FIXTURES)))
    assert [r.arxiv_id for r in records] == ["2508.01234", "2509.00007"]
    first = records[0]
    assert first.version == 2
    assert first.title == "Dense Retrieval for Reviewer Assignment"
    assert first.authors == ["Zoë Müller", "Jian Wang"]
    assert first.categories == ["cs.IR", "cs.CL"] and first.primary_category == "cs.IR"
    assert first.updated == datetime(2025, 9, 1, 10, 12, tzinfo=UTC)


def test_s2_batch_keeps_nulls_aligned(replay, settings) -> None:
    answers = _s2(on_replay(settings, replay(fixtures=FIXTURES)))
    assert answers[1] is None
    assert answers[0]["authors"][0] == {"authorId": "2109876543", "name": "Zoë Müller"}


def test_s2_author_papers_follow_next(replay, settings) -> None:
    s = on_replay(settings, replay(fixtures=FIXTURES))
    papers = SemanticScholarClient(s.s2, s.http).author_papers("2109876543")
    assert [p["paperId"] for p in papers] == ["aaa1", "aaa2", "aaa3"]


def test_s2_sends_api_key_when_configured(replay, settings) -> None:
    app = replay(fixtures=FIXTURES)
    seen = {}
    s = on_replay(settings, app).with_overrides(s2={"api_key": "k-123"})
    client = SemanticScholarClient(s.s2, s.http)
    client._client.event_hooks["request"].append(lambda req: seen.update(key=req.headers.get("x-api-key")))
    client.paper_batch(["2508.01234", "x"])
    assert seen["key"] == "k-123" and app is not None


def test_grobid_header_fields(replay, settings) -> None:
    h = _grobid(on_replay(settings, replay(fixtures=FIXTURES)))
    assert h.title == "Dense Retrieval for Reviewer Assignment"
    assert h.abstract == "We study dense retrieval for matching submissions to reviewers. Experiments show gains."
    assert h.authors[0].email == "zoe.mueller@inf.ethz.example"
    assert h.authors[0].institution == "ETH Zürich" and h.authors[0].department == "Department of Computer Science"
    assert h.authors[1].full_name == "J Wang" and h.authors[1].email is None
    assert h.arxiv_id == "arXiv:2508.01234v2[cs.IR]"


def test_pdf_checks(replay, settings) -> None:
    s = on_replay(settings, replay(fixtures=FIXTURES))
    assert _pdf(s).startswith(b"%PDF-")
    client = PdfClient(s.pdf, s.http)
    with pytest.raises(PermanentError) as not_pdf:
        client.fetch("2508.09999", 1)
    assert not_pdf.value.kind == "pdf_not_pdf"
    with pytest.raises(PermanentError) as missing:
        client.fetch("2508.00404", 1)
    assert missing.value.kind == "pdf_unavailable"


def test_pdf_size_cap(replay, settings) -> None:
    s = on_replay(settings, replay(fixtures=FIXTURES))
    size = len(PdfClient(s.pdf, s.http).fetch("2508.01234", 2))
    # model_copy skips validation, so the cap can sit below the settings' floor of 1 KiB.
    capped = PdfClient(s.pdf.model_copy(update={"max_bytes": size - 1}), s.http)
    with pytest.raises(PermanentError) as exc:
        capped.fetch("2508.01234", 2)
    assert exc.value.kind == "pdf_too_large"


FAULTS = [
    (service, kind)
    for service, kinds in {
        "arxiv": ("429", "500", "503", "timeout", "truncated", "malformed", "non_utf8"),
        "s2": ("429", "500", "timeout", "truncated", "malformed", "non_utf8"),
        "pdf": ("429", "503", "timeout", "truncated"),
        "grobid": ("500", "503", "timeout", "truncated", "malformed"),
    }.items()
    for kind in kinds
]


@pytest.mark.parametrize(("service", "kind"), FAULTS)
def test_transient_fault_is_retried_through(replay, settings, service: str, kind: str) -> None:
    """Two faults in a row, then the recorded answer: the client ends with the same result."""
    app = replay(fixtures=FIXTURES, fault_rate=1.0, max_consecutive_faults=2, fault_kinds={service: (kind,)})
    result = CALLS[service](on_replay(settings, app))
    assert result
    assert app.faults.stats()["injected"][f"{service}:{kind}"] == 2


@pytest.mark.parametrize(("service", "kind"), [("arxiv", "malformed"), ("s2", "truncated"), ("pdf", "timeout"), ("grobid", "500")])
def test_fault_outlasting_retries_is_raised(replay, settings, service: str, kind: str) -> None:
    app = replay(fixtures=FIXTURES, fault_rate=1.0, max_consecutive_faults=5, fault_kinds={service: (kind,)})
    with pytest.raises(TransientError):
        CALLS[service](on_replay(settings, app).with_overrides(http={"max_attempts": 2}))


def test_retry_after_is_honoured(replay, settings) -> None:
    app = replay(fixtures=FIXTURES, fault_rate=1.0, max_consecutive_faults=1, fault_kinds={"s2": ("429",)}, retry_after_seconds=1)
    t0 = time.monotonic()
    _s2(on_replay(settings, app))
    assert time.monotonic() - t0 >= 1.0
    assert app.faults.stats()["injected"]["s2:429"] == 1


def test_retry_after_formats() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({}) is None


def test_short_ids() -> None:
    assert split_short_id("2405.01234v12") == ("2405.01234", 12)
    assert split_short_id("cs/0112017v1") == ("cs/0112017", 1)
    assert split_short_id("2405.01234") == ("2405.01234", 1)


def _window(s: Settings, category: str = "cs.LG") -> list:
    from tests.support.common import WORLD_SINCE, WORLD_UNTIL

    start, end = datetime.combine(WORLD_SINCE, datetime.min.time(), UTC), datetime.combine(WORLD_UNTIL, datetime.min.time(), UTC)
    return ArxivClient(s.arxiv, s.http).search_window(category, start, end)[0]


def test_arxiv_quirks_short_empty_and_error_pages_are_coped_with(replay, settings, small_world) -> None:
    """Every page answered oddly once (short, empty inside the set, or an error feed on 200):
    the client re-asks and ends with exactly what a well-behaved server gives."""
    plain = _window(on_replay(settings, replay(world=small_world, arxiv_quirk_rate=0.0)).with_overrides(arxiv={"page_size": 3}))
    app = replay(world=small_world, arxiv_quirk_rate=1.0)
    odd = _window(on_replay(settings, app).with_overrides(arxiv={"page_size": 3}))
    assert len(plain) > 6 and odd == plain
    injected = app.faults.stats()["injected"]
    assert {"arxiv:short_page", "arxiv:empty_page", "arxiv:error_feed"} <= set(injected), injected


def test_arxiv_keeps_journal_ref_doi_and_affiliations(replay, settings, tmp_path) -> None:
    entry = (
        "<entry><id>http://arxiv.org/abs/hep-th/9901001v3</id><updated>2025-09-01T10:12:00Z</updated>"
        "<published>1999-01-01T00:00:00Z</published><title>A\n  title</title><summary>s</summary>"
        "<author><name>Ann Öz</name><arxiv:affiliation>ETH Zürich</arxiv:affiliation>"
        "<arxiv:affiliation>CERN</arxiv:affiliation></author><author><name>Bo Li</name></author>"
        "<arxiv:journal_ref>Phys. Rev. D 1 (1999)\n 2</arxiv:journal_ref><arxiv:doi>10.1103/x.1</arxiv:doi>"
        '<arxiv:primary_category term="hep-th"/><category term="hep-th"/></entry>'
    )
    body = ('<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" xmlns:arxiv="http://arxiv.org/schemas/atom">'
            f"<opensearch:totalResults>1</opensearch:totalResults>{entry}</feed>").encode()
    (tmp_path / "feed.xml").write_bytes(body)
    (tmp_path / "routes.json").write_text(
        '[{"path": "/arxiv/api/query", "headers": {"content-type": "application/atom+xml"}, "body_file": "feed.xml"}]')
    (r,) = _arxiv(on_replay(settings, replay(fixtures=tmp_path)))
    assert (r.arxiv_id, r.version, r.title) == ("hep-th/9901001", 3, "A title")
    assert r.authors == ["Ann Öz", "Bo Li"] and r.author_affiliations == [["ETH Zürich", "CERN"], []]
    assert (r.journal_ref, r.doi) == ("Phys. Rev. D 1 (1999) 2", "10.1103/x.1")


def test_arxiv_bad_query_is_one_line_naming_the_reason(replay, settings, small_world) -> None:
    s = on_replay(settings, replay(world=small_world))
    client = ArxivClient(s.arxiv, s.http)
    with pytest.raises(PermanentError) as exc:
        client.fetch({"search_query": "cat:cs.LG", "start": "first", "max_results": 10})
    assert str(exc.value).startswith("arXiv: HTTP 400: start must be an integer (query search_query=cat:cs.LG")
    assert "\n" not in str(exc.value) and client.requests_made == 1


def test_arxiv_error_feed_outlasting_retries_says_why(replay, settings, small_world) -> None:
    app = replay(world=small_world, arxiv_quirk_rate=1.0)
    s = on_replay(settings, app).with_overrides(arxiv={"page_size": 3}, http={"max_attempts": 1})
    messages = set()
    for _ in range(12):
        try:
            _window(s)
        except TransientError as exc:
            messages.add(str(exc))
    assert "arXiv answered with an error feed: internal error, please retry" in messages, messages
