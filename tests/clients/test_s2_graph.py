"""The parsers of S2's graph answers on hand-built records: every key optional, JSON null where a
list is expected, ids cleaned to the warehouse's form (the real samples are in
``tests/conformance/test_s2_graph.py``)."""

from __future__ import annotations

import json

from revbench.clients import s2_graph


def test_a_reference_with_every_key_missing_or_null_is_a_row_not_a_crash() -> None:
    items = [{}, {"citedPaper": None, "contexts": None, "intents": None, "isInfluential": None},
             None, "junk", {"citedPaper": {"paperId": None, "title": " Kept by title ", "externalIds": None, "year": True}}]
    rows = s2_graph.reference_rows("2401.00001", items)
    assert [r["ordinal"] for r in rows] == [0, 1, 4]  # the non-objects are skipped, the others keep their places
    assert all(tuple(r) == s2_graph.CITATION_COLUMNS for r in rows)
    assert rows[1]["n_contexts"] == 0 and rows[1]["intents"] == [] and rows[1]["is_influential"] is None
    assert rows[0]["n_contexts"] is None  # contexts not asked: unknown, not zero
    last = rows[2]
    assert (last["cited_s2_id"], last["cited_title"], last["cited_year"]) == (None, "Kept by title", None)
    assert last["external_ids"] is None
    assert s2_graph.reference_rows("x", None) == []


def test_ids_are_cleaned_and_intents_deduplicated() -> None:
    item = {"citedPaper": {"paperId": "p", "year": 2020,
                           "externalIds": {"DOI": "https://doi.org/10.1000/ABC.1", "ArXiv": "arXiv:2101.00001v3", "ACL": None}},
            "intents": ["methodology", "background", "methodology"], "contexts": ["a", "a", "b"], "isInfluential": True}
    [row] = s2_graph.reference_rows("2401.00001", [item])
    assert (row["cited_doi"], row["cited_arxiv"], row["cited_year"]) == ("10.1000/abc.1", "2101.00001", 2020)
    assert row["intents"] == ["methodology", "background"] and row["n_contexts"] == 3 and row["is_influential"] is True
    assert json.loads(row["external_ids"]) == {"DOI": "https://doi.org/10.1000/ABC.1", "ArXiv": "arXiv:2101.00001v3"}
    for doi, arxiv in (("not a doi", "2101.1"), ("10.1000/with space", "hep-th/9901001v2")):
        [odd] = s2_graph.reference_rows("x", [{"citedPaper": {"externalIds": {"DOI": doi, "ArXiv": arxiv}}}])
        assert odd["cited_doi"] is None and json.loads(odd["external_ids"])["DOI"] == doi  # kept where it came from
    assert odd["cited_arxiv"] == "hep-th/9901001" and s2_graph.arxiv_id_of("2101.1") is None


def test_contexts_with_intent_stand_in_when_the_plain_lists_are_absent() -> None:
    item = {"citedPaper": {"paperId": "p"}, "contextsWithIntent": [{"context": "a", "intents": ["result"]},
                                                                   {"context": "b", "intents": ["result", "background"]}]}
    [row] = s2_graph.reference_rows("x", [item])
    assert row["n_contexts"] == 2 and row["intents"] == ["result", "background"]


def test_topics_prefer_s2_fields_of_study_and_fall_back_to_fields_of_study() -> None:
    both = {"s2FieldsOfStudy": [{"category": "Physics", "source": "external"}, {"category": "Physics", "source": "external"},
                                {"category": "Physics", "source": "s2-fos-model"}, {"category": None}, "junk"],
            "fieldsOfStudy": ["Biology"]}
    assert [(r["topic"], r["origin"]) for r in s2_graph.topic_rows("a", both)] == [
        ("Physics", "external"), ("Physics", "s2-fos-model")]
    for absent in ({"fieldsOfStudy": ["Biology"]}, {"s2FieldsOfStudy": None, "fieldsOfStudy": ["Biology"]}):
        [row] = s2_graph.topic_rows("a", absent)
        assert (row["scheme"], row["topic"], row["label"], row["origin"]) == ("s2-fos", "Biology", "Biology", "external")
        assert tuple(row) == s2_graph.TOPIC_COLUMNS
    assert s2_graph.topic_rows("a", {"s2FieldsOfStudy": None, "fieldsOfStudy": None}) == []
    assert s2_graph.topic_rows("a", None) == []


def test_bulk_keys_map_to_the_api_names() -> None:
    bulk = {"corpusid": 1, "externalids": {"DOI": "10.1000/X"}, "s2fieldsofstudy": [{"category": "Art", "source": "external"}],
            "publicationtypes": None, "updated": "2022"}
    paper = s2_graph.from_bulk(bulk)
    assert paper == {"corpusId": 1, "externalIds": {"DOI": "10.1000/X"}, "publicationTypes": None, "updated": "2022",
                     "s2FieldsOfStudy": [{"category": "Art", "source": "external"}]}
    assert s2_graph.paper_facts(paper) == {"s2_paper_id": None, "doi": "10.1000/x", "arxiv": None, "publication_types": [],
                                           "external_ids": '{"DOI": "10.1000/X"}'}
