"""The bulk path's rows, made over whole columns (``tasks.graph_bulk``, ``tasks.graph_bulk_openalex``),
are the rows the API parsers make of the same records one at a time: S2AG's real papers sample as
the cited papers, with citations in the published shape and every key's odd values (padded,
prefixed, versioned, escaped, of the wrong type); real OpenAlex works and authors with theirs. The
per-row reference below is the mapping the bulk path used before (each S2AG citation put in the
Graph API's shape and read by ``s2_graph.reference_row``; each OpenAlex work by ``add_work``).
Also: S2 listing one arXiv id twice, and what DuckDB's readers do with a lone surrogate."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from revbench.clients import openalex_graph, s2_graph
from revbench.clients.openalex import arxiv_doi
from revbench.clients.optional import as_list
from revbench.schemas.graph import PAPER_TOPICS
from revbench.tasks.graph_bulk import PY_SPACE, s2ag_framed
from revbench.tasks.graph_bulk_openalex import author_keys, openalex_dois, openalex_framed
from revbench.tasks.graph_fetch import Fetched, add_work, citations_frame
from revbench.warehouse.bulk import s2ag_papers
from revbench.warehouse.bulk_answers import s2ag_answers
from revbench.warehouse.bulk_diffs import apply_diff
from revbench.warehouse.bulk_openalex import snapshot_rows
from revbench.warehouse.bulk_state import build_state, covered_ids
from revbench.warehouse.graph import GraphSlice
from tests.support.bulk_reference import openalex_entities

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "external" / "real-responses"
SHA = "https://www.semanticscholar.org/paper/"


def _shard(path: Path, rows: list[Any], raw: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + raw
    path.write_bytes(gzip.compress(text.encode("utf-8", "surrogatepass")))


# --- the per-row reference: S2AG rows in the Graph API's shape, read by the API's parser -----------------

def _json(text: Any) -> Any:
    return None if text is None else json.loads(text)


def _paper_id(url: Any) -> str | None:
    tail = str(url or "").rstrip("/").rpartition("/")[2]
    return tail if len(tail) == 40 and all(c in "0123456789abcdef" for c in tail) else None


def _edge(row: dict[str, Any], cited: dict[str, Any] | None) -> dict[str, Any]:
    if cited is None:
        cid = row["citedcorpusid"]
        paper: dict[str, Any] = {"paperId": None, "externalIds": {"CorpusId": str(cid)} if cid is not None else {}}
    else:
        paper = {"paperId": _paper_id(cited["url"]), "externalIds": _json(cited["externalids"]) or {},
                 "title": cited["title"], "year": cited["year"]}
    edge: dict[str, Any] = {"citedPaper": paper, "isInfluential": row["isinfluential"]}
    contexts, intents = _json(row["contexts"]), _json(row["intents"])
    if contexts is not None:
        edge["contexts"] = contexts
    if intents is not None:  # one list per context in S2AG, listed once on the API's edge
        edge["intents"] = [i for group in as_list(intents) for i in (group if isinstance(group, list) else [group])]
    return edge


def _s2_per_row(state: Path, ids: list[str]) -> Fetched:
    papers = {r["corpusid"]: r for r in pl.read_parquet(state / "papers" / "*.parquet").iter_rows(named=True)}
    cover = dict(pl.read_parquet(state / "covered.parquet").select("arxiv", "corpusid").iter_rows())
    edges: dict[int, list[dict[str, Any]]] = {}
    for c in pl.read_parquet(state / "citations" / "*.parquet").sort("citingcorpusid", "citationid").iter_rows(named=True):
        edges.setdefault(c["citingcorpusid"], []).append(c)
    out = Fetched("s2")
    for aid in ids:
        if aid not in cover:
            out.fetched(aid, "topics", False, 0)
            out.fetched(aid, "references", False, 0)
            continue
        row = papers[cover[aid]]
        topics = s2_graph.topic_rows(aid, {"s2FieldsOfStudy": _json(row["s2fieldsofstudy"])})
        out.topics += topics
        out.fetched(aid, "topics", True, len(topics), _paper_id(row["url"]))
        refs = s2_graph.reference_rows(aid, [_edge(c, papers.get(c["citedcorpusid"])) for c in edges.get(row["corpusid"], [])])
        out.citations += refs
        out.fetched(aid, "references", True, len(refs), _paper_id(row["url"]))
    return out


def _same(got: Any, ref: Fetched) -> None:
    assert got.citations.equals(citations_frame(ref.citations))
    topics = PAPER_TOPICS.conform(pl.DataFrame(ref.topics, infer_schema_length=None)) if ref.topics else PAPER_TOPICS.empty()
    assert got.topics.equals(topics)
    assert got.fetches.to_dicts() == ref.fetches


# --- S2AG: the real papers sample, the published citation shape, odd values of every key --------------------

ODD_IDS = [
    {"DOI": "  https://doi.org/10.1234/ABC.def\u3000", "ArXiv": "arXiv:2101.00042v3", "MAG": None},
    {"DOI": "doi:10.5555/x y", "ArXiv": " hep-th/9901001v2 ", "CorpusId": 5},
    {"DOI": "10.1/short", "ArXiv": "arxiv:arXiv:1706.03762", "DBLP": "conf/x/\u00e9t\u00e9"},
    {"DOI": 10.5, "ArXiv": ["1706.03762"], "PubMed": 12345678901234567890123},
    {"DOI": "10.1234/quote\"d", "ArXiv": "1706.03762\x1c", "ACL": "line\nbreak"},
    {"DOI": "10.99999/\u0130stanbul", "ArXiv": "math.AG/0601001", "nested": {"a": [1, 2]}, "flag": True},
    {"DOI": "", "ArXiv": "   ", "MAG": ""},
    {"a b": "1", "a": "2", "ArXiv": "2101.00007"},
    {"ab": "x", "a": "y", "a!": "z", "": "empty", "Z": -12, "DOI": "10.1234/a:b,c}d", "n": 7},
    {"DOI": 10, "ArXiv": None, "MAG": "2921691074", "x": ":5,"},
    {"DOI": "10.1234/x", "outer": {"DOI": "10.9999/inner"}},
    {"k": 1.0}, {"k": 1e3}, {"k": -0}, {"k": "😀 é "}, {},
    [],
    "not an object",
]
ODD_URLS = [SHA + "c" * 40 + "/", SHA + "C" * 40, SHA + "x" + "c" * 40, "c" * 40, SHA + "c" * 39, "", None, SHA + "d" * 40 + "//"]
ODD_TITLES = ["  padded title\u3000", "\x1c\x1dseparators\x1f", "   ", "", None, "N\u00e4ive \U0001f600"]
FOS = [None, [], "Computer Science", [{"category": " Physics ", "source": None}, "x", {"category": None, "source": "external"},
                                      {"category": "Physics", "source": "unknown"}, {"category": "Physics"},
                                      {"category": 5, "source": "external"}, {"category": "Biology", "source": " s2-fos-model"}]]
CONTEXTS = [None, [], ["a", "b"], "one string", {"k": 1}, [None, 3], ["dup", "dup"]]
INTENTS = [None, [], [["methodology"], ["background", "methodology"]], ["result", ["result", "background"]],
           "background", [[""], [None], [["nested"]], [5]], {"a": ["b"]}, [["methodology"], []],
           [["result", "background"], ["methodology", "result"], ["background", "zeta", "alpha"], ["alpha"]]]


@pytest.fixture
def s2ag(tmp_path: Path) -> tuple[Path, list[str]]:
    """A release: the real sample's 100 papers (the cited ones); citing papers made from the first
    ones (arXiv ids given) and from odd records; citations of every published shape."""
    sample = [json.loads(line) for line in (REAL / "s2-graph" / "s2ag-datasets-sample__papers-sample.jsonl").read_text().splitlines()]
    citing = []
    for i, row in enumerate(sample[:8]):
        row = {**row, "externalids": {**row["externalids"], "ArXiv": f"2101.{i:05d}"}, "s2fieldsofstudy": FOS[i % len(FOS)]
               if i >= 4 else row["s2fieldsofstudy"]}
        if i == 3:
            row["url"] = SHA + "e" * 40 + "/"
        citing.append(row)
    odd = [{"corpusid": 900 + i, "externalids": ids, "url": ODD_URLS[i % len(ODD_URLS)], "title": ODD_TITLES[i % len(ODD_TITLES)],
            "year": [2020, None, 1999][i % 3]} for i, ids in enumerate(ODD_IDS)]
    cited = [r["corpusid"] for r in sample[8:]] + [r["corpusid"] for r in odd] + [None, 123456789]
    rows, cid = [], 1
    for k, paper in enumerate(citing):
        for j in range(25):
            row: dict[str, Any] = {"citationid": cid, "citingcorpusid": paper["corpusid"],
                                   "citedcorpusid": cited[(k * 7 + j * 3) % len(cited)],
                                   "isinfluential": [True, False, None][j % 3],
                                   "contexts": CONTEXTS[j % len(CONTEXTS)], "intents": INTENTS[(j + k) % len(INTENTS)]}
            if j == 5:
                del row["contexts"], row["intents"]  # a shard without the keys
            rows.append(row)
            cid += 1
    for j, paper in enumerate(odd):  # every odd record cited at least once
        rows.append({"citationid": cid + j, "citingcorpusid": citing[j % len(citing)]["corpusid"],
                     "citedcorpusid": paper["corpusid"], "isinfluential": None, "contexts": None, "intents": None})
    root = tmp_path / "s2ag"
    _shard(root / "papers" / "part0.jsonl.gz", sample[8:] + odd)
    _shard(root / "papers" / "part1.jsonl.gz", citing)
    _shard(root / "citations" / "part0.jsonl.gz", rows[::2])
    _shard(root / "citations" / "part1.jsonl.gz", rows[1::2])
    return root, [r["externalids"]["ArXiv"] for r in citing] + ["2401.99999"]


def test_python_whitespace_is_what_the_parsers_strip() -> None:
    assert PY_SPACE == "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


def test_s2ag_vectorized_equals_the_per_row_parser(s2ag: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, ids = s2ag
    state = tmp_path / "state"
    build_state(root, state, ids)
    got = s2ag_framed(ids, *s2ag_answers(state, ids))
    ref = _s2_per_row(state, ids)
    assert len(ref.citations) == 8 * 25 + len(ODD_IDS) and any(r["cited_doi"] for r in ref.citations)
    assert {r["n_contexts"] for r in ref.citations} >= {None, 0, 2} and any(r["intents"] for r in ref.citations)
    assert any(r["external_ids"] and "\\" in r["external_ids"] for r in ref.citations)  # escaped: the parser's path
    _same(got, ref)
    # the real sample's external ids (nulls left out, keys sorted) as the parser writes them
    mag = [r for r in ref.citations if r["external_ids"] and '"MAG"' in r["external_ids"]]
    assert mag and all(r["external_ids"] == s2_graph.external_ids_text(json.loads(r["external_ids"])) for r in mag)


def test_one_arxiv_id_on_two_records_is_the_paper_the_api_answers(tmp_path: Path) -> None:
    """S2 lists some arXiv ids twice (the paper, and another work linked to it by mistake): the one
    covered is the record whose title is the corpus paper's, then one with publication types."""
    root = tmp_path / "s2ag"
    paper = {"corpusid": 100, "externalids": {"ArXiv": "2609.00389"}, "url": SHA + "a" * 40,
             "title": "Federated Learning Meets Client Heterogeneity: An Unified Model", "year": 2026}
    other = {"corpusid": 955, "externalids": {"ArXiv": "2609.00389", "DOI": "10.1234/other"}, "url": SHA + "b" * 40,
             "title": "Towards Efficient Morphological Analysis", "year": 2026, "publicationtypes": ["JournalArticle"],
             "s2fieldsofstudy": [{"category": "Linguistics", "source": "external"}]}
    _shard(root / "papers" / "p.jsonl.gz", [other, paper])
    _shard(root / "citations" / "c.jsonl.gz", [{"citationid": 1, "citingcorpusid": 100, "citedcorpusid": 955},
                                               {"citationid": 2, "citingcorpusid": 955, "citedcorpusid": 100}])
    corpus = pl.DataFrame({"arxiv_id": ["2609.00389"], "title": ["Federated learning meets client heterogeneity - an "
                                                                  "unified model."]})
    for name in ("a", "b"):  # read in either order, the same record
        build_state(root, tmp_path / name, corpus)
        assert pl.read_parquet(tmp_path / name / "covered.parquet").rows() == [("2609.00389", 100)]
        got = s2ag_framed(["2609.00389"], *s2ag_answers(tmp_path / name, ["2609.00389"]))
        assert got.fetches["source_paper_id"].to_list() == ["a" * 40] * 2
        assert got.citations["cited_s2_id"].to_list() == ["b" * 40]
    # without titles (or none matching), the typed record; then the one with more keys; then the highest id
    build_state(root, tmp_path / "c", ["2609.00389"])
    assert pl.read_parquet(tmp_path / "c" / "covered.parquet")["corpusid"].to_list() == [955]
    _shard(root / "papers" / "p.jsonl.gz", [{**other, "publicationtypes": None}, paper])
    build_state(root, tmp_path / "d", ["2609.00389"])
    assert pl.read_parquet(tmp_path / "d" / "covered.parquet")["corpusid"].to_list() == [955]
    _shard(root / "papers" / "p.jsonl.gz", [{"corpusid": 955, "externalids": {"ArXiv": "2609.00389"}}, paper])
    build_state(root, tmp_path / "e", ["2609.00389"])
    assert covered_ids(tmp_path / "e") == ["2609.00389"]
    assert pl.read_parquet(tmp_path / "e" / "covered.parquet")["corpusid"].to_list() == [100]


def test_an_increment_that_adds_the_paper_covers_it(tmp_path: Path) -> None:
    """A release that holds only the wrongly linked work covers it; the increment that adds the
    paper itself covers the paper, as reading the next release whole does."""
    root, state = tmp_path / "s2ag", tmp_path / "state"
    other = {"corpusid": 955, "externalids": {"ArXiv": "2609.00389"}, "url": SHA + "b" * 40, "title": "Another work",
             "publicationtypes": ["JournalArticle"]}
    paper = {"corpusid": 100, "externalids": {"ArXiv": "2609.00389"}, "url": SHA + "a" * 40, "title": "The Paper"}
    cites = [{"citationid": 1, "citingcorpusid": 955, "citedcorpusid": 7}, {"citationid": 2, "citingcorpusid": 100, "citedcorpusid": 8}]
    _shard(root / "r0" / "papers" / "p.jsonl.gz", [other])
    _shard(root / "r0" / "citations" / "c.jsonl.gz", cites[:1])
    _shard(root / "r1" / "papers" / "p.jsonl.gz", [other, paper])
    _shard(root / "r1" / "citations" / "c.jsonl.gz", cites)
    _shard(root / "diffs" / "r0_r1" / "papers" / "updates" / "u.jsonl.gz", [paper])
    _shard(root / "diffs" / "r0_r1" / "citations" / "updates" / "u.jsonl.gz", cites[1:])
    corpus = pl.DataFrame({"arxiv_id": ["2609.00389"], "title": ["The paper"]})
    build_state(root / "r0", state / "r0", corpus)
    assert pl.read_parquet(state / "r0" / "covered.parquet")["corpusid"].to_list() == [955]
    changed, dropped, _, _ = apply_diff(state / "r0", root / "diffs" / "r0_r1", state / "r1", corpus)
    build_state(root / "r1", state / "whole", corpus)
    assert changed == ["2609.00389"] and dropped == []
    for s in ("r1", "whole"):
        got = s2ag_framed(["2609.00389"], *s2ag_answers(state / s, ["2609.00389"]))
        assert pl.read_parquet(state / s / "covered.parquet")["corpusid"].to_list() == [100]
        assert got.citations["external_ids"].to_list() == ['{"CorpusId": "8"}']


def test_a_lone_surrogate_never_reaches_a_frame(tmp_path: Path) -> None:
    """JSON allows ``\\ud800``; DuckDB's readers refuse the line (both S2AG's and the snapshot's),
    so no string the bulk path frames can hold one, and nothing is left to clean."""
    root = tmp_path / "s2ag"
    good = '{"corpusid": 1, "externalids": {"ArXiv": "2101.00001"}, "title": "a pair \\ud83d\\ude00 is one"}\n'
    _shard(root / "papers" / "p.jsonl.gz", [], raw=good + '{"corpusid": 2, "externalids": {"ArXiv": "2101.00002"}, '
                                                  '"title": "cut \\ud800 here"}\n')
    got = s2ag_papers(root, arxiv_ids=["2101.00001", "2101.00002"])
    assert got["corpusid"].to_list() == [1] and got["title"].to_list() == ["a pair \U0001f600 is one"]
    snap = tmp_path / "openalex"
    work = {"id": "https://openalex.org/W1", "doi": "https://doi.org/10.48550/arxiv.2101.00001", "title": "ok"}
    _shard(snap / "data" / "works" / "updated_date=2024-01-01" / "p.gz", [work],
           raw='{"id": "https://openalex.org/W2", "doi": "https://doi.org/10.48550/arxiv.2101.00002", "title": "\\udc00"}\n')
    rows = snapshot_rows(snap, "works", "doi", openalex_dois(["2101.00001", "2101.00002"]), lower=True)
    assert rows["works"]["id"].to_list() == ["https://openalex.org/W1"]


# --- OpenAlex: real works and authors, and odd values of every key -----------------------------------------

def _openalex_per_row(ids: list[str], works: pl.DataFrame, authors: pl.DataFrame) -> Fetched:
    out = Fetched("openalex")
    by_doi = {re.sub(r"^https?://(?:dx\.)?doi\.org/", "", str(k), flags=re.I).lower(): v
              for k, v in works.select("key", "entity").iter_rows()}
    named: dict[str, str] = {}
    for aid in ids:
        text = by_doi.get(arxiv_doi(aid).lower())
        add_work(out, aid, None if text is None else json.loads(text), named)
    by_id = {str(k).rsplit("/", 1)[-1]: v for k, v in authors.select("key", "entity").iter_rows()}
    for author_id, aid in named.items():
        text = by_id.get(author_id)
        if text is None:
            out.failures.append({"arxiv_id": aid, "source": "openalex", "kind": "affiliations",
                                 "error": f"author {author_id}: not in the snapshot"})
            continue
        insts, affs = openalex_graph.author_rows(json.loads(text))
        out.institutions += insts
        out.affiliations += affs
    return out


def _odd_work(work: dict[str, Any]) -> dict[str, Any]:
    w = copy.deepcopy(work)
    w["referenced_works"] = [None, 5, "https://openalex.org/W123/", "  https://openalex.org/W9 ", "", "/", "https://openalex.org/W\u00e9",
                             'W"q', *w.get("referenced_works", [])[:3]]
    w["topics"] = [*w.get("topics", []), {"id": "https://openalex.org/T1", "score": True, "display_name": "  spaced "},
                   {"id": "https://openalex.org/T2", "score": 1.5, "domain": "flat", "field": {"display_name": 3}},
                   {"id": None}, "not a topic", {"id": "https://openalex.org/T1", "score": 0.5}]
    w["primary_topic"] = None
    w["publication_year"] = True
    inst = {"id": "https://openalex.org/I1", "display_name": "Univ. of Nowhere", "country_code": "xx", "lineage": ["I1", None]}
    w["authorships"] = [
        None, "an authorship as a string",
        {"author": None, "institutions": [inst], "affiliations": [{"raw_affiliation_string": "Dept. of X, Univ. of Nowhere",
                                                                   "institution_ids": ["https://openalex.org/I1"]}]},
        {"author": {"id": "https://openalex.org/A77/", "orcid": " https://orcid.org/0000-0002-1825-009x ",
                    "display_name": "Display Name"}, "raw_author_name": "  ", "institutions": [inst, inst],
         "affiliations": [{"raw_affiliation_string": "Nowhere University, Somewhere", "institution_ids": ["https://openalex.org/I1"]},
                          {"raw_affiliation_string": "An unmatched place", "institution_ids": [None]}]},
        {"author": {"id": "https://openalex.org/A78", "orcid": None}, "raw_author_name": "Only Raw",
         "raw_affiliation_strings": ["Institute of Things, Department of Stuff", None, 4]},
        {"author": {"id": "", "orcid": "0000-0001-0000-0001"}, "institutions": [{"display_name": "  "}], "affiliations": None},
        {"author": {"id": "https://openalex.org/A77"}, "institutions": [inst], "raw_author_name": "Again"},
        *copy.deepcopy(w.get("authorships", [])[:2]),
    ]
    return w


def test_openalex_vectorized_equals_the_per_row_parser(tmp_path: Path) -> None:
    real = json.loads((REAL / "openalex" / "openalex-python__W2741809807.json").read_text())
    more = json.loads((REAL / "openalex" / "openalexPro__keypaper_results_page_1.json").read_text())["results"]
    works = [real, *more, _odd_work(real), {**copy.deepcopy(more[0]), "publication_year": 2020.0, "authorships": None,
                                            "topics": None, "referenced_works": "W1"}]
    ids = [f"2101.{i:05d}" for i in range(len(works))] + ["2401.99999"]
    for aid, w in zip(ids, works, strict=False):
        w["doi"] = f"https://doi.org/{arxiv_doi(aid)}"
    people = [json.loads((REAL / "openalex" / f"openalex-python__{a}.json").read_text()) for a in ("A5023888391", "A5317838346")]
    priem = people[0]
    odd = {"id": "https://openalex.org/A77", "orcid": "https://orcid.org/0000-0002-1825-0097",
           "affiliations": [{"institution": priem["affiliations"][0]["institution"], "years": [2020, True, 1300, "2021", 2500.0]},
                            {"institution": priem["affiliations"][0]["institution"], "years": [2011, 2024]},
                            {"institution": None, "years": [2020]}, "not an affiliation",
                            {"institution": {"display_name": "Univ. of Nowhere"}, "years": []}]}
    snap = tmp_path / "openalex"
    _shard(snap / "data" / "works" / "updated_date=2024-01-01" / "part_000.gz", works[:3])
    _shard(snap / "data" / "works" / "updated_date=2024-02-01" / "part_000.gz", works[3:])
    _shard(snap / "data" / "authors" / "updated_date=2024-01-01" / "part_000.gz", [*people, odd])
    rows = snapshot_rows(snap, "works", "doi", openalex_dois(ids), lower=True)
    named = author_keys(rows)
    got = openalex_framed(ids, rows, snapshot_rows(snap, "authors", "id", named))
    whole = openalex_entities(snap, "works", "doi", openalex_dois(ids), lower=True)
    ref = _openalex_per_row(ids, whole, openalex_entities(snap, "authors", "id", named))
    assert ref.citations and ref.institutions and ref.affiliations and ref.failures and ref.authorships
    _same(got, ref)
    assert got.authorships.to_dicts() == ref.authorships
    assert got.affiliations is not None and got.affiliations.equals(pl.DataFrame(ref.affiliations, infer_schema_length=None))
    # an institution named again is given once (the store keeps the last value of each column, every alias)
    assert got.institutions is not None and got.institutions.height < len(ref.institutions)
    store = GraphSlice._one_per_institution
    assert store(got.institutions).sort("institution_key").equals(
        store(pl.DataFrame(ref.institutions, infer_schema_length=None)).sort("institution_key"))
    assert got.failures == ref.failures and got.work_ids == ref.work_ids
