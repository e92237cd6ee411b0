"""The ``release`` kind: a published revbench release folder, checked against its manifest first."""

from __future__ import annotations

import hashlib
import io
import logging
from pathlib import Path

import polars as pl

from revbench.errors import InputError, ReleaseTampered
from revbench.evaluation.importers.registry import benchmark_kind
from revbench.evaluation.importers.warehouse import pairwise_splits
from revbench.evaluation.model import (
    GRAPH_CITATIONS_SCHEMA,
    GRAPH_COAUTHORS_SCHEMA,
    GRAPH_INSTITUTIONS_SCHEMA,
    GRAPH_TOPICS_SCHEMA,
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    SPLIT_POINTWISE,
    Benchmark,
    BenchmarkGraph,
    Split,
)
from revbench.release_files import MANIFEST, VerifiedRelease, verify_release
from revbench.schemas.release import GRAPH_TABLES, RELEASE_TABLES


def read_listed(verified: VerifiedRelease, rel: str, what: str = "release") -> bytes:
    """The bytes of the folder's file ``rel``, read once and checked against its manifest entry:
    what a loader parses is what the manifest (and so the benchmark's digest) names, even if the
    file changed after ``verify_release`` looked at it."""
    path = verified.path / rel
    entry = next((f for f in verified.manifest["files"] if f["path"] == rel), None)
    if entry is None:
        raise InputError(f"{path}: not listed in {MANIFEST}, so the {what} cannot be read")
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if len(data) != entry["bytes"] or got != entry["sha256"]:
        raise ReleaseTampered(f"{path}: sha256 {got[:12]}... changed from {entry['sha256'][:12]}... in {MANIFEST} while "
                              f"it was read; the {what} is not as it was built (nothing was read from it or written)")
    return data


@benchmark_kind("release")
def load_release(path: Path) -> Benchmark:
    """A revbench release folder (``data/*.parquet``): the pointwise ratings with candidate lists,
    the paper-centric and reviewer-centric tuples, the papers as submissions and the reviewers'
    publications as profiles (a publication's id is the sha1 of its title, as the ``lrbench``
    importer gives the same publication from the JSON files, so both read the same benchmark).
    Every file is first checked against the folder's ``manifest.json`` (``ReleaseTampered``
    names the first that differs), and each file is parsed from the very bytes checked
    (``read_listed``): the benchmark's digest, the manifest's sha256, so fixes every byte it was
    read from; its version is the manifest's (the release's name, ``vN``).
    Its ``graph`` is read from the ``graph_*`` files where the release carries them (ids as the
    benchmark has them), else None: a release built before them has none."""
    data = path / "data"
    missing = [t.name for t in RELEASE_TABLES if not (data / f"{t.name}.parquet").is_file()]
    if missing and not (path / "manifest.json").is_file():
        raise InputError(f"{path}: not a revbench release (no data/{missing[0]}.parquet)")
    release = verify_release(path)  # every file as its manifest lists it, before any is read
    if release.rejected is not None:  # read on purpose (`evaluate --allow-rejected`): still said
        logging.getLogger("revbench.evaluate").warning("%s: read though rejected (never published)",
                                                       release.rejected.line(release.version))
    graph_files = [tab for tab in GRAPH_TABLES if (data / f"{tab.name}.parquet").is_file()]
    if graph_files and len(graph_files) < len(GRAPH_TABLES):
        lacking = next(tab.name for tab in GRAPH_TABLES if tab not in graph_files)
        raise InputError(f"{path}: the release carries part of a graph (no data/{lacking}.parquet)")
    try:
        t = {tab.name: tab.conform(pl.read_parquet(io.BytesIO(read_listed(release, f"data/{tab.name}.parquet"))))
             for tab in RELEASE_TABLES + tuple(graph_files)}
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"{path}: a release file cannot be read ({str(exc).splitlines()[0]})") from None
    pubs = t["reviewers"].explode("publications").drop_nulls("publications").unnest("publications")
    profiles = pubs.select(pl.col("reviewer_id"),
                           pl.col("title").map_elements(lambda x: hashlib.sha1(str(x).encode()).hexdigest(),
                                                        return_dtype=pl.Utf8).alias("paper_id"),
                           "title", "abstract", "year").unique(["reviewer_id", "paper_id"], keep="first", maintain_order=True)
    tuples = pl.concat([  # the release's two tuple tables in the warehouse's one shape
        t["paper_centric"].select(pl.lit("paper_centric").alias("kind"), pl.col("paper_id").alias("anchor_id"),
                                  pl.col("reviewer_pos").alias("positive_id"), pl.col("reviewer_neg").alias("negative_id"),
                                  "rating_pos", "rating_neg"),
        t["reviewer_centric"].select(pl.lit("reviewer_centric").alias("kind"), pl.col("reviewer_id").alias("anchor_id"),
                                     pl.col("paper_pos").alias("positive_id"), pl.col("paper_neg").alias("negative_id"),
                                     "rating_pos", "rating_neg")])
    return Benchmark(
        name="release", version=release.version, digest=release.digest,
        submissions=t["papers"].select("paper_id", "title", "abstract", "year").cast(PAPERS_SCHEMA),
        draws=[profiles.cast(PROFILE_SCHEMA)],
        splits=[Split(SPLIT_POINTWISE, ratings=t["pointwise"].cast({"rating": pl.Float64}), candidate_lists=True),
                *pairwise_splits(tuples)],
        graph=None if not graph_files else BenchmarkGraph(
            citations=t["graph_citations"].cast(GRAPH_CITATIONS_SCHEMA), topics=t["graph_topics"].cast(GRAPH_TOPICS_SCHEMA),
            reviewer_institutions=t["graph_institutions"].cast(GRAPH_INSTITUTIONS_SCHEMA),
            coauthors=t["graph_coauthors"].cast(GRAPH_COAUTHORS_SCHEMA)),
    )
