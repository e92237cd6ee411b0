"""The bulk datasets read in place: S2AG citations losslessly (corpus ids, isinfluential, contexts
null as unknown), the same rows as the Graph API's answer for the same edges, the real papers
sample, a truncated shard, and the OpenAlex snapshot giving what the API's own parser gives."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from revbench.clients import s2_graph
from revbench.errors import InputError
from revbench.tasks.graph_bulk import Framed, s2ag_framed
from revbench.tasks.graph_bulk_openalex import author_keys, openalex_dois, openalex_framed
from revbench.tasks.graph_fetch import Fetched, add_work, citations_frame
from revbench.warehouse.bulk import s2ag_papers, shards
from revbench.warehouse.bulk_answers import s2ag_answers
from revbench.warehouse.bulk_openalex import snapshot_rows
from revbench.warehouse.bulk_state import build_state

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "external" / "real-responses"
SHA_CITING, SHA_CITED = "a" * 40, "b" * 40


def _shard(path: Path, rows: list[dict], gz: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


PAPERS = [
    {"corpusid": 10, "externalids": {"ArXiv": "2101.00001", "DOI": "10.48550/arXiv.2101.00001", "CorpusId": "10", "MAG": None},
     "url": f"https://www.semanticscholar.org/paper/{SHA_CITING}", "title": "Citing", "year": 2021,
     "s2fieldsofstudy": [{"category": "Computer Science", "source": "s2-fos-model"},
                         {"category": "Mathematics", "source": "external"}], "publicationtypes": None},
    {"corpusid": 20, "externalids": {"ArXiv": "1706.03762", "DOI": "10.5555/X.1", "CorpusId": "20"},
     "url": f"https://www.semanticscholar.org/paper/{SHA_CITED}", "title": "Attention", "year": 2017},
]
# As S2AG publishes them: cited corpus ids (null where S2 could not place the reference),
# isinfluential, contexts and intents null when unknown, intents one list per context.
CITATIONS = [
    {"citationid": 1, "citingcorpusid": 10, "citedcorpusid": 20, "isinfluential": True, "contexts": None, "intents": None},
    {"citationid": 2, "citingcorpusid": 10, "citedcorpusid": None, "isinfluential": False, "contexts": ["a", "b"],
     "intents": [["methodology"], ["background", "methodology"]]},
    {"citationid": 3, "citingcorpusid": 10, "citedcorpusid": 30, "isinfluential": True, "contexts": [], "intents": []},
    {"citationid": 4, "citingcorpusid": 99, "citedcorpusid": 20, "isinfluential": False},
]


@pytest.fixture
def s2ag(tmp_path: Path) -> Path:
    _shard(tmp_path / "papers" / "part0.jsonl.gz", PAPERS)
    _shard(tmp_path / "citations" / "part0.jsonl.gz", CITATIONS[:2])
    _shard(tmp_path / "citations" / "part1.jsonl", CITATIONS[2:], gz=False)  # shards gzipped or not
    return tmp_path


def _from_bulk(root: Path, arxiv_ids: list[str]) -> Framed:
    state = root.parent / f"{root.name}-state"
    build_state(root, state, arxiv_ids)
    return s2ag_framed(arxiv_ids, *s2ag_answers(state, arxiv_ids))


def test_s2ag_citations_are_read_losslessly(s2ag: Path) -> None:
    got = _from_bulk(s2ag, ["2101.00001", "2401.99999"])
    rows = {r["ordinal"]: r for r in got.citations.to_dicts()}
    assert len(rows) == 3  # the other paper's citation is not the corpus's
    assert rows[0]["cited_s2_id"] == SHA_CITED and rows[0]["cited_arxiv"] == "1706.03762" and rows[0]["cited_year"] == 2017
    assert rows[0]["is_influential"] is True and rows[0]["n_contexts"] is None and rows[0]["intents"] == []
    assert rows[1]["is_influential"] is False and rows[1]["n_contexts"] == 2
    assert rows[1]["intents"] == ["methodology", "background"] and rows[1]["external_ids"] is None
    # a cited paper the papers dataset lacks keeps its corpus id
    assert json.loads(rows[2]["external_ids"]) == {"CorpusId": "30"} and rows[2]["is_influential"] is True
    assert rows[2]["n_contexts"] == 0
    found = {(f["arxiv_id"], f["kind"]): f["found"] for f in got.fetches.to_dicts()}
    assert found[("2101.00001", "references")] and not found[("2401.99999", "references")]
    assert {(t["topic"], t["origin"]) for t in got.topics.to_dicts()} == {("Computer Science", "s2-fos-model"), ("Mathematics", "external")}


def test_bulk_rows_are_the_apis_rows_for_the_same_edges(s2ag: Path) -> None:
    api_answer = [
        {"citedPaper": {"paperId": SHA_CITED, "externalIds": PAPERS[1]["externalids"], "title": "Attention", "year": 2017},
         "isInfluential": True},
        {"citedPaper": {"paperId": None, "externalIds": {}}, "isInfluential": False, "contexts": ["a", "b"],
         "intents": ["methodology", "background"]},
        {"citedPaper": {"paperId": None, "externalIds": {"CorpusId": "30"}}, "isInfluential": True, "contexts": [],
         "intents": []},
    ]
    assert _from_bulk(s2ag, ["2101.00001"]).citations.equals(citations_frame(s2_graph.reference_rows("2101.00001", api_answer)))


def test_the_real_papers_sample_and_a_truncated_shard(tmp_path: Path) -> None:
    lines = (REAL / "s2-graph" / "s2ag-datasets-sample__papers-sample.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    cut = "\n".join(lines) + "\n" + lines[1][: len(lines[1]) // 2]  # the last line cut mid-way
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "part0.gz").write_bytes(gzip.compress(cut.encode()))
    got = s2ag_papers(tmp_path, corpus_ids=[first["corpusid"], json.loads(lines[-1])["corpusid"]])
    assert got.height == 2 and got["title"].to_list()[0] is not None
    row = got.filter(pl.col("corpusid") == first["corpusid"]).row(0, named=True)
    topics = s2_graph.topic_rows("x", {"s2FieldsOfStudy": json.loads(row["s2fieldsofstudy"])})
    assert {t["origin"] for t in topics} == {"s2-fos-model", "external"}
    assert json.loads(row["externalids"])["MAG"] == first["externalids"]["MAG"]


def test_a_missing_dataset_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no citations shards"):
        shards(tmp_path, "citations")


def test_the_openalex_snapshot_reads_through_the_apis_parser(tmp_path: Path) -> None:
    work = json.loads((REAL / "openalex" / "openalex-python__W2741809807.json").read_text())
    work["doi"] = "https://doi.org/10.48550/arXiv.2101.00001"  # as OpenAlex writes an arXiv paper's DOI
    older = {**work, "title": "an older copy", "referenced_works": []}
    author = json.loads((REAL / "openalex" / "openalex-python__A5023888391.json").read_text())
    root = tmp_path / "openalex"
    _shard(root / "data" / "works" / "updated_date=2024-01-01" / "part_000.gz", [older])
    _shard(root / "data" / "works" / "updated_date=2024-06-01" / "part_000.gz", [work])
    _shard(root / "data" / "authors" / "updated_date=2024-06-01" / "part_000.gz", [author])
    works = snapshot_rows(root, "works", "doi", openalex_dois(["2101.00001", "2401.99999"]), lower=True)
    # the newer partition wins: the older copy's empty reference list is not read
    assert works["works"].height == 1 and works["refs"].height == len(work["referenced_works"])
    named = [a["author"]["id"] for a in work["authorships"]]
    assert author_keys(works) == sorted(set(named))
    authors = snapshot_rows(root, "authors", "id", named)
    got = openalex_framed(["2101.00001", "2401.99999"], works, authors)
    api = Fetched("openalex")
    add_work(api, "2101.00001", work, {})
    add_work(api, "2401.99999", None, {})
    assert got.citations.equals(citations_frame(api.citations))
    assert got.topics.equals(pl.DataFrame(api.topics).select(got.topics.columns).cast(got.topics.schema))
    assert got.authorships.to_dicts() == api.authorships
    assert got.citations.height == len(work["referenced_works"])
    # every author named but absent from the snapshot is a named failure (asked again next run)
    missing = {n.rsplit("/", 1)[-1] for n in named} - {author["id"].rsplit("/", 1)[-1]}
    assert {f["error"].split(":")[0].removeprefix("author ") for f in got.failures} == missing


def test_a_world_writes_itself_as_bulk_files_once(tmp_path: Path) -> None:
    from tests.support.common import run_cli

    code, out, err = run_cli("world", "--out", str(tmp_path / "w"), "--papers", "20", "--no-documents",
                             "--bulk", str(tmp_path / "bulk"))
    assert code == 0, err
    assert "REVBENCH_S2__BULK_DIR" in out and shards(tmp_path / "bulk" / "s2ag", "citations")
    assert shards(tmp_path / "bulk" / "openalex", "works") and (tmp_path / "bulk" / "openalex" / "data" / "works" / "manifest").is_file()
    code, out, err = run_cli("world", "--out", str(tmp_path / "w2"), "--papers", "20", "--no-documents",
                             "--bulk", str(tmp_path / "bulk"))
    assert code == 2 and "is not empty" in err and not (tmp_path / "w2").exists()
