from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from revbench.settings import IngestSettings
from revbench.tasks.align import align, name_similarity
from revbench.tasks.crawl import is_closed, plan_slices
from revbench.tasks.reconcile import clean_email, input_hash, reconcile
from revbench.tasks.text import corruption, title_similarity

NOW = datetime(2026, 10, 1, tzinfo=UTC)
ABSTRACT = "We study dense retrieval for matching submissions to reviewers in detail."


def _row(**kw: object) -> dict[str, object]:
    a = dict(forename="Zoë", surname="Müller", email="Zoe.M@eth.example", department="CS", institution="ETH", affiliation="CS, ETH")
    b = dict(forename="J.", surname="Wang", email=None, department=None, institution="MIT", affiliation="MIT")
    row = dict(arxiv_id="2609.00001", version=1, title="Dense Retrieval for Reviewer Assignment", abstract=ABSTRACT,
               authors=["Jian Wang", "Zoë Müller"], primary_category="cs.IR", categories=["cs.IR"], published=NOW,
               updated=NOW, record_hash="r", doc_status="ok", doc_detail=None, pdf_sha256="a" * 64, tei_sha256="t",
               pdf_title="Dense retrieval for reviewer assignment", pdf_abstract=ABSTRACT, pdf_authors=[a, b],
               s2_found=True, s2_paper_id="s2p", s2_authors=[{"author_id": "11", "name": "Zoe Muller"}, {"author_id": None, "name": "Jian Wang"}],
               s2_hash="s")
    row.update(kw)
    return row


def _run(*rows: dict[str, object], done: set[str] | None = None):
    return reconcile(pl.DataFrame(list(rows)), IngestSettings(), done or set(), "run", NOW)


def test_good_paper_loads_with_aligned_mentions() -> None:
    out = _run(_row())
    assert out.papers.height == 1 and out.rejects.height == 0
    m = out.mentions.sort("position").to_dicts()
    assert [x["name"] for x in m] == ["Jian Wang", "Zoë Müller"]
    assert m[0]["pdf_name"] == "J. Wang" and m[0]["institution"] == "MIT" and m[0]["email"] is None
    assert m[1]["email"] == "zoe.m@eth.example" and m[1]["s2_author_id"] == "11"


def test_each_rule_has_its_reason() -> None:
    cases = {
        "title_mismatch": _row(pdf_title="A Completely Different Paper About Graphs"),
        "missing_abstract": _row(arxiv_id="2609.00002", pdf_abstract=None),
        "missing_authors": _row(arxiv_id="2609.00003", pdf_authors=[]),
        "missing_title": _row(arxiv_id="2609.00004", pdf_title=None),
        "corrupted_text": _row(arxiv_id="2609.00005", pdf_abstract=ABSTRACT + " r\ufffdsum\ufffd"),
        "pdf_truncated": _row(arxiv_id="2609.00006", doc_status="pdf_truncated", pdf_title=None),
    }
    out = _run(*cases.values())
    assert out.papers.height == 0
    assert dict(zip(out.rejects["arxiv_id"], out.rejects["reason"], strict=True)) == {
        r["arxiv_id"]: reason for reason, r in cases.items()
    }
    assert out.rejects.filter(pl.col("reason") == "pdf_truncated")["stage"].to_list() == ["extract"]


def test_unchanged_inputs_are_skipped_and_rule_changes_are_not() -> None:
    row = _row()
    h = input_hash(row, IngestSettings())
    assert _run(row, done={h}).skipped == 1
    assert input_hash(row, IngestSettings(title_similarity_threshold=0.5)) != h
    assert input_hash(row, IngestSettings(commit_every=7)) == h


def test_text_checks() -> None:
    assert corruption("caf\u00c3\u00a9") and corruption("a\x07b") and corruption("x\ufffd")
    assert corruption("Zoë Müller, naïve café") is None
    assert title_similarity("Dense  Retrieval: for Reviewers!", "dense retrieval for reviewers") == 1.0
    assert title_similarity("Dense Retrieval", None) == 0.0


def test_name_alignment() -> None:
    assert name_similarity("J. Smith", "John Smith") >= 0.9
    assert name_similarity("John Smith", "Smith John") == 1.0
    assert name_similarity("John Smith", "Jane Doe") < 0.6
    assert align(["A Lee", "Bo Kim", "Cy Park"], ["Kim Bo", "Cy Park"], 0.6) == {1: (0, 1.0), 2: (1, 1.0)}
    assert align([], ["x"], 0.5) == {}


def test_email_cleaning() -> None:
    assert clean_email(" <Jo@X.example>. ") == "jo@x.example"
    assert clean_email("jo at x dot org") is None and clean_email(None) is None


def test_slices() -> None:
    from datetime import date

    sl = plan_slices(date(2026, 9, 1), date(2026, 9, 5), 2)
    assert len(sl) == 3 and sl[0][0].day == 1 and sl[-1][1].day == 5 and sl[-1][1].hour == 23
    assert is_closed(sl[0][1], NOW) and not is_closed(datetime(2026, 10, 1, tzinfo=UTC), NOW)


def test_mentions_keep_every_affiliation_and_orcid_and_papers_keep_orphans() -> None:
    mit = {"department": "CSAIL", "institution": "MIT", "country": "USA", "text": "CSAIL, MIT, USA"}
    hhmi = {"department": None, "institution": "HHMI", "country": "USA", "text": "HHMI, USA"}
    b = dict(forename="J.", surname="Wang", email=None, department="CSAIL", institution="MIT", affiliation="CSAIL, MIT",
             affiliations=[mit, hhmi], orcid="https://orcid.org/0000-0002-1825-0097")
    a = dict(forename="Zoë", surname="Müller", email=None, department=None, institution=None, affiliation=None,
             affiliations=[], orcid="not an orcid")
    orphan = {"department": None, "institution": "University of London", "country": "UNITED KINGDOM",
              "text": "University of London, UNITED KINGDOM"}
    out = _run(_row(pdf_authors=[a, b], pdf_orphan_affiliations=[orphan]))
    m = out.mentions.sort("position").to_dicts()
    assert m[0]["affiliations"] == [mit, hhmi] and m[0]["institution"] == "MIT"
    assert m[0]["orcid"] == "0000-0002-1825-0097" and m[1]["orcid"] is None and m[1]["affiliations"] == []
    assert out.papers.to_dicts()[0]["orphan_affiliations"] == [orphan]


def test_documents_from_before_every_affiliation_was_kept_still_reconcile() -> None:
    out = _run(_row())  # pdf_authors items without affiliations/orcid, no orphan column
    m = out.mentions.sort("position").to_dicts()
    assert m[0]["institution"] == "MIT" and m[0]["affiliations"] == [] and m[0]["orcid"] is None
    assert out.papers.to_dicts()[0]["orphan_affiliations"] == []


def test_arxiv_journal_ref_doi_and_affiliations_reach_papers_and_mentions() -> None:
    out = _run(_row(journal_ref="Phys. Rev. D 1 (1999)", doi="10.1103/x.1", author_affiliations=[["MIT", "CERN"], []]))
    paper = out.papers.to_dicts()[0]
    assert (paper["journal_ref"], paper["doi"]) == ("Phys. Rev. D 1 (1999)", "10.1103/x.1")
    assert out.mentions.sort("position")["arxiv_affiliations"].to_list() == [["MIT", "CERN"], []]
    before = _run(_row()).mentions  # a record crawled before arXiv affiliations were kept
    assert before["arxiv_affiliations"].to_list() == [[], []] and _run(_row()).papers["doi"].to_list() == [None]
