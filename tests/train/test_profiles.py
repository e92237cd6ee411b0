"""The train flow's keyword-profile frames on their own: which papers need keywords, which stored
ones are reused, the rows kept of both, and the set's counts."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from revbench.schemas.tables import KEYWORD_PROFILES
from revbench.tasks import profiles as tasks
from revbench.tasks.weak_supervision import count_by

NOW = datetime(2026, 9, 1, tzinfo=UTC)
STORED = pl.DataFrame({"arxiv_id": ["p1", "p2", "p3", "p4"], "extractor": ["llm", "llm", "llm", "yake"],
                       "keywords": [["a"], ["b"], ["c"], ["d"]], "model": ["m1", "m2", "m1", ""],
                       "template_version": ["2-x", "2-x", "1-old", ""]})


def test_only_papers_in_a_recent_profile_need_keywords() -> None:
    papers = pl.DataFrame({"paper_id": ["p1", "p2", "p3"], "title": ["", "", ""]})
    recent = pl.DataFrame({"reviewer_id": ["r1", "r2", "r2"], "paper_id": ["p1", "p1", "p3"]})
    assert tasks.papers_to_profile(papers, recent)["paper_id"].to_list() == ["p1", "p3"]


def test_stored_keywords_are_reused_only_from_the_same_model_and_prompt() -> None:
    llm = tasks.reusable_keywords(STORED, "llm", "m1", "2-x")
    assert llm.columns == ["paper_id", "keywords", "extractor", "template_version"] and llm["paper_id"].to_list() == ["p1"]
    assert tasks.reusable_keywords(STORED, "yake", "m1", None)["paper_id"].to_list() == ["p4"]
    need = pl.DataFrame({"paper_id": ["p1", "p2"]})
    assert tasks.without_keywords(need, llm)["paper_id"].to_list() == ["p2"]


def test_keyword_rows_name_the_model_of_llm_answers_only() -> None:
    fresh = pl.DataFrame({"paper_id": ["p1", "p2"], "keywords": [["a"], ["b"]], "extractor": ["llm", "yake"],
                          "template_version": ["2-x", ""]})
    rows = tasks.keyword_rows(fresh, "m1", "run1", NOW)
    assert rows.select("arxiv_id", "model", "run_id", "extracted_at").rows() == [("p1", "m1", "run1", NOW), ("p2", "", "run1", NOW)]
    assert tasks.extracted(fresh, "llm") == {"llm": 1, "yake": 1}


def test_profile_rows_record_the_extractors_and_prompt_versions_used() -> None:
    profiles = pl.DataFrame({"reviewer_id": ["r1", "r2"], "profile": ["x", "y"], "papers": [2, 1], "keywords": [3, 1]})
    recent = pl.DataFrame({"reviewer_id": ["r1", "r1", "r2"], "paper_id": ["p1", "p2", "p2"]})
    keywords = pl.DataFrame({"paper_id": ["p1", "p2"], "extractor": ["llm", "yake"], "template_version": ["2-x", ""]})
    rows = tasks.profile_rows(profiles, recent, keywords, "run1", NOW)
    assert rows.columns == KEYWORD_PROFILES.names
    assert rows.sort("reviewer_id").select("reviewer_id", "extractor", "template_version").rows() == [
        ("r1", "llm+yake", "2-x"), ("r2", "yake", "")]


def test_count_by() -> None:
    assert count_by(pl.DataFrame({"view": ["a", "b", "a"]}), "view") == {"a": 2, "b": 1}
    assert count_by(pl.DataFrame(), "view") == {}
