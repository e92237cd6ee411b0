"""The dataset card, Croissant file and manifest tell the truth: a release built from a SYNTHETIC
world says so in each; the card describes every field of every table (from the release schema),
how the data was collected, its curators, a citation and load snippets; ``datasets`` loads every
configuration its YAML names; and its words pass the privacy audit."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from revbench.flows.release import release_flow
from revbench.schemas.release import PUBLICATION_DOCS, RELEASE_TABLES
from revbench.tasks import privacy
from revbench.tasks import release_card as card_text
from revbench.templates import version as template_version
from revbench.warehouse import Warehouse

COLLECTION = {"rounds": [1], "invitations_sent": 40, "reminders_sent": 3, "first_sent": "2026-10-01",
              "last_sent": "2026-10-01", "invitations_answered": 10, "first_answer": "2026-10-01",
              "last_answer": "2026-10-04", "flags_kept": 1, "flags_dropped": 2}
COUNTS = {"events": 30, "ratings": 28, "duplicates": 2, "skips": 1, "flags": 3, "kept": 25, "dropped": 3,
          **{t.name: 5 for t in RELEASE_TABLES}}


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def body_lines(card: str) -> list[str]:
    """The card after its YAML, non-empty lines only."""
    return [line for line in card.split("---\n", 2)[2].splitlines() if line.strip()]


def card(synthetic: bool) -> tuple[str, str]:
    curators = card_text.Curators("the survey team", "a lab", "")
    return card_text.render_card(
        name="bench", version="v2", parent="v1", license="cc-by-4.0", synthetic=synthetic, curators=curators,
        collection=COLLECTION, counts=COUNTS, files=[], profile_years=2, audit_strings=9, levels=[], statistics="",
        figure=None, size_category="n<1K",
        citation=card_text.citation("bench", "v2", synthetic, curators, 2026, "https://example.org/bench"))


@pytest.mark.parametrize("synthetic", [True, False])
def test_the_card_says_synthetic_exactly_when_the_world_was(synthetic: bool) -> None:
    text, version = card(synthetic)
    assert version == template_version(card_text.CARD_TEMPLATE) and version.startswith("6-")
    meta, lines = front_matter(text), body_lines(text)
    assert lines[0] == f"# {'SYNTHETIC ' if synthetic else ''}bench v2" and meta["pretty_name"] == lines[0][2:]
    # What the audit protects and what no audit can: publication lists are linkable to their authors.
    assert "What the audit protects, and what it cannot" in text and "linkable to its authors" in text
    assert ("SYNTHETIC" in lines[1]) is synthetic and ("SYNTHETIC" in text) is synthetic
    assert ("synthetic" in meta["tags"]) is synthetic
    assert ("collected by email survey" not in text) and ("simulated panel" in text) is synthetic
    assert "Curated by the survey team, a lab." in text and "| response rate | 25.0% |" in text
    assert "| invitation emails sent | 40 (2026-10-01 to 2026-10-01) |" in text
    assert "(2 dropped and 1 kept by a curator)" in text


def test_the_card_carries_hugging_faces_metadata_every_field_a_citation_and_load_snippets() -> None:
    text, _ = card(True)
    meta = front_matter(text)
    assert meta["license"] == "cc-by-4.0" and meta["language"] == ["en"] and meta["size_categories"] == ["n<1K"]
    assert meta["task_categories"] == ["text-retrieval"]
    assert [(c["config_name"], c["data_files"]) for c in meta["configs"]] == [
        (t.name, f"data/{t.name}.parquet") for t in RELEASE_TABLES]
    assert_every_field_described(text)
    bib = re.search(r"```bibtex\n(.*?)\n```", text, re.S)
    assert bib and bib.group(1).startswith("@misc{bench_v2,") and "year = {2026}" in bib.group(1)
    assert "author = {{the survey team, a lab}}" in bib.group(1) and bib.group(1).count("{") == bib.group(1).count("}")
    for snippet in ("from datasets import load_dataset", "import polars as pl", "FROM 'data/paper_centric.parquet'"):
        assert snippet in text
    # The release's own entry, then LR-bench's (RATE's) whose construction every release follows.
    entries = re.findall(r"```bibtex\n(.*?)\n```", text, re.S)
    assert len(entries) == 2 and "url = {https://example.org/bench}" in entries[0]
    assert "eprint = {2601.19637}" in entries[1] and "2303.16750" not in entries[1]
    assert "## Intended use and limitations" in text and "{{ " not in text and "{%" not in text


def test_the_citation_names_no_made_up_address_and_cites_the_benchmarks_a_corpus_was_rebuilt_from() -> None:
    curators = card_text.Curators("the survey team", "a lab", "")
    bare = card_text.citation("bench", "v2", False, curators, 2026, "")
    assert "url =" not in bare and "huggingface" not in bare and bare.count("{") == bare.count("}")
    related = card_text.related_citations(["goldstandard"])
    assert [e.split(",")[0] for e in related] == ["@misc{liu2026rate", "@misc{stelmakh2023goldstandard"]
    assert card_text.related_citations(["lrbench"]) == card_text.related_citations([])
    for entry in related:
        assert entry.count("{") == entry.count("}") and "eprint = {" in entry


def test_every_table_the_card_lists_is_a_configuration_with_its_fields() -> None:
    from revbench.schemas.release import GRAPH_TABLES

    files = [{"path": f"data/{t.name}.parquet", "rows": 5, "doc": t.doc} for t in RELEASE_TABLES + GRAPH_TABLES]
    files[-1]["rows"] = 0  # no co-authors among the reviewers: datasets would refuse that configuration
    curators = card_text.Curators("the survey team")
    text, _ = card_text.render_card(
        name="bench", version="v2", parent=None, license="cc-by-4.0", synthetic=True, curators=curators,
        collection=COLLECTION, counts=COUNTS, files=files, profile_years=2, audit_strings=9, levels=[], statistics="",
        figure=None, size_category="n<1K", citation=card_text.citation("bench", "v2", True, curators, 2026, ""))
    assert assert_configs_cover_the_listed_tables(text)[-3:] == [t.name for t in GRAPH_TABLES[:3]]
    assert "config_name: graph_coauthors" not in text
    for t in GRAPH_TABLES:
        assert f"### `{t.name}`" in text and all(f"| `{c.name}` |" in text for c in t.columns), t.name
    assert "| `is_influential` | bool |" in text and "| `score` | float64 |" in text
    # Without the graph's files (a release built before the graph stage) the card names none of them.
    assert not any(c["config_name"].startswith("graph_") for c in front_matter(card(True)[0])["configs"])


def assert_every_field_described(text: str) -> None:
    for t in RELEASE_TABLES:
        assert f"### `{t.name}`" in text and t.doc in text
        for c in t.columns:
            assert c.doc and f"| `{c.name}` |" in text and f"| {c.doc} |" in text, (t.name, c.name)
    for k, doc in PUBLICATION_DOCS.items():
        assert f"| `publications[].{k}` |" in text and f"| {doc} |" in text


def test_a_release_of_the_synthetic_world_says_so_everywhere_and_loads_by_its_cards_configs(rated, tmp_path,
                                                                                            monkeypatch) -> None:
    import datasets

    s, _ = rated
    out = release_flow.fn(s)
    d = s.releases_dir / out.version
    text = (d / "README.md").read_text()
    lines = body_lines(text)
    assert lines[0] == f"# SYNTHETIC {s.release.name} v1" and lines[1].startswith("**SYNTHETIC data:")
    assert "collected by email survey" not in text and "simulated panel" in text
    assert "Curated by Test Team, Test Lab, Test University." in text
    assert_every_field_described(text)
    croissant = json.loads((d / "croissant.json").read_text())
    assert croissant["name"].startswith("SYNTHETIC ") and croissant["description"].startswith("SYNTHETIC data:")
    assert croissant["citeAs"].startswith("@misc{")
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["synthetic"] is True and manifest["title"].startswith("SYNTHETIC ")
    assert "SYNTHETIC" in manifest["notice"] and manifest["card_template"] == template_version(card_text.CARD_TEMPLATE)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        facts, inputs = wh.release.collection_facts(), wh.release.release_inputs()
    assert facts["invitations_sent"] > 0 and 0 < facts["invitations_answered"] <= facts["invitations_sent"]
    assert f"| invitation emails sent | {facts['invitations_sent']} (" in text
    # The card's own words (curators, citation, prose) name none of the warehouse's people or places.
    auditor = privacy.Auditor(inputs["people"], inputs["affiliations"])
    assert [hit for line in text.splitlines() for hit in auditor.scan(line)] == []
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for config in front_matter(text)["configs"]:
        name = config["config_name"]
        loaded = datasets.load_dataset(str(d), name=name, split="train", cache_dir=str(tmp_path / "hf-cache"))
        assert loaded.num_rows == out.counts[name]
    run_card_snippets(text, d, tmp_path)


def assert_configs_cover_the_listed_tables(text: str) -> list[str]:
    """Every parquet file with rows the card's Contents lists is a configuration of its YAML, by
    its own name and file (``load_dataset(folder, "graph_citations")`` finds it), and an empty one
    is said to be none; returns the names."""
    listed = dict(re.findall(r"^\| `data/(\w+)\.parquet` \| (\d+) \|", text, re.M))
    configs = {c["config_name"]: c["data_files"] for c in front_matter(text)["configs"]}
    assert configs == {name: f"data/{name}.parquet" for name, n in listed.items() if n != "0"}, (sorted(configs), listed)
    for name in (name for name, n in listed.items() if n == "0"):
        assert "Empty in this release, so it is no configuration" in text.split(f"### `{name}`", 1)[1].split("###", 1)[0]
    return list(configs)


def run_card_snippets(text: str, release: Path, tmp_path: Path, sql_rows: bool = True) -> None:
    """Every snippet of the card's Loading section runs as written from the release folder, and
    from another folder with the one line that names the release changed to its path; the
    ``datasets`` snippet loads every configuration the card names, with its name put in. With
    ``sql_rows`` the DuckDB query must find rows (a release of no paper-centric tuple has none)."""
    import subprocess
    import sys

    import duckdb

    loading = text.split("## Loading", 1)[1].split("\n## ", 1)[0]
    python = re.findall(r"```python\n(.*?)```", loading, re.S)
    sql = re.findall(r"```sql\n(.*?)```", loading, re.S)
    assert len(python) == 2 and len(sql) == 1
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "hf-cache")}
    assert all(code.count('Path(".")') == 1 for code in python)
    shown = re.search(r'load_dataset\(.*?"(\w+)", split="train"\)', python[0])
    configs = assert_configs_cover_the_listed_tables(text)
    assert shown and shown.group(1) in configs, python[0]  # by a config_name the card has, not by a data file
    python[0] = "\n".join(python[0].replace(f'"{shown.group(1)}"', f'"{name}"') for name in configs)
    for code in python:
        for cwd, source in ((release, code), (elsewhere, code.replace('Path(".")', f"Path({str(release)!r})"))):
            done = subprocess.run([sys.executable, "-c", source], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, (cwd, done.stderr[-2000:])
    (query,) = sql
    assert query.count("'.'") == 1
    for cwd, source in ((release, query), (elsewhere, query.replace("'.'", f"'{release}'"))):
        old = os.getcwd()
        os.chdir(cwd)
        try:
            con = duckdb.connect()  # the script's statements in order on one connection, as a user's shell runs them
            for stmt in (x for x in re.sub(r"--[^\n]*", "", source).split(";") if x.strip()):
                rows = con.execute(stmt).fetchall()
        finally:
            os.chdir(old)
        assert rows or not sql_rows, cwd
