"""The ``weak`` kind: a benchmark of weak labels from the graph that ``revbench labels`` writes,
checked against its manifest first (as a release is).

A folder holds ``submissions.parquet`` (``paper_id, title, abstract, year``), ``profiles.parquet``
(``reviewer_id`` and the same columns), ``labels.parquet`` (``reviewer_id, paper_id, label``: 1 a
weak positive, 0 a sampled candidate) and ``manifest.json`` (how it was made, the agreement with
the survey, and every file's bytes and sha256). Where the warehouse had a graph, the four
``graph_*.parquet`` files hold it around the submissions and profile papers (the frames of
:class:`~revbench.evaluation.model.BenchmarkGraph`, warehouse ids); a folder without them (written
before they were) reads with no graph.

Its version is what it holds: 12 hex digits of sha256 over every file's name and sha256
(:func:`weak_version`), computed when it is written and again from the bytes read when it is read,
so a changed file is another version. A manifest whose ``version`` is not its files' is refused
(labels inverted and the file list re-hashed to match would otherwise be evaluated under the
untouched folder's version), except the labels-only version that folders written before carried,
which is checked against the labels read and then superseded by the files' own.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import InputError, ReleaseTampered
from revbench.evaluation.importers.registry import benchmark_kind
from revbench.evaluation.model import (
    GRAPH_CITATIONS_SCHEMA,
    GRAPH_COAUTHORS_SCHEMA,
    GRAPH_INSTITUTIONS_SCHEMA,
    GRAPH_TOPICS_SCHEMA,
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    SPLIT_POINTWISE,
    Benchmark,
    BenchmarkGraph,
    Split,
)
from revbench.evaluation.importers.release import read_listed
from revbench.files import file_sha256, replacing, write_atomic, writing_folder
from revbench.release_files import MANIFEST, verify_release

KIND = "revbench-weak-labels"
FILES = {"submissions": PAPERS_SCHEMA, "profiles": PROFILE_SCHEMA,
         "labels": {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "label": pl.Int8}}
GRAPH_FILES = {"graph_citations": GRAPH_CITATIONS_SCHEMA, "graph_topics": GRAPH_TOPICS_SCHEMA,
               "graph_institutions": GRAPH_INSTITUTIONS_SCHEMA, "graph_coauthors": GRAPH_COAUTHORS_SCHEMA}
"""The graph's files (named as a release names them) and their schemas."""
GRAPH_FRAMES = dict(zip(GRAPH_FILES, ("citations", "topics", "reviewer_institutions", "coauthors"), strict=True))
"""The :class:`BenchmarkGraph` frame each graph file holds."""


def weak_version(sha256s: dict[str, str]) -> str:
    """A weak benchmark's version: 12 hex digits of sha256 over each file's name and sha256
    (``{path: sha256}``), in name order; any changed, added or dropped file changes it."""
    lines = "".join(f"{name}\t{digest}\n" for name, digest in sorted(sha256s.items()))
    return hashlib.sha256(lines.encode()).hexdigest()[:12]


def write_weak(out: Path, frames: dict[str, pl.DataFrame], meta: dict[str, Any]) -> dict[str, Any]:
    """Write ``frames`` (the keys of :data:`FILES`, and of :data:`GRAPH_FILES` where the benchmark
    has a graph) and a manifest with ``meta`` into the folder ``out`` (existing: it must be empty or
    a weak benchmark, whose files are replaced); returns the manifest."""
    if out.is_dir() and any(out.iterdir()):
        old = out / "manifest.json"
        try:
            ours = json.loads(old.read_text()).get("kind") == KIND
        except (OSError, ValueError, AttributeError):
            ours = False
        if not ours:
            raise InputError(f"--out {out} holds other files; give an empty folder or an earlier weak benchmark")
    # Each file replaces its old self whole and the manifest goes last, so a run killed midway
    # leaves a folder a rerun still knows as ours (and that a reader refuses until then); a new
    # folder appears only once written.
    with writing_folder(out) as folder:
        listed = []
        graph = GRAPH_FILES if all(name in frames for name in GRAPH_FILES) else {}
        for name, schema in (FILES | graph).items():
            path = folder / f"{name}.parquet"
            with replacing(path) as tmp:
                frames[name].select(list(schema)).cast(schema).write_parquet(tmp, statistics=False)
            listed.append({"path": path.name, "bytes": path.stat().st_size, "sha256": file_sha256(path)})
        for name in set(GRAPH_FILES) - set(graph):  # an earlier benchmark's graph, not this one's
            (folder / f"{name}.parquet").unlink(missing_ok=True)
        version = weak_version({f["path"]: f["sha256"] for f in listed})
        manifest = {"kind": KIND, "version": version, **meta, "files": listed}
        write_atomic(folder / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    return manifest


@benchmark_kind("weak")
def load_weak(path: Path) -> Benchmark:
    """A weak benchmark folder: every file checked against ``manifest.json`` first (one line names
    the first that differs), then parsed from the very bytes checked; its version computed from
    them (:func:`weak_version`; a manifest that says another is refused). One pointwise split
    whose candidate lists are each submission's weak positives (rating 5) and sampled candidates
    (rating 1), so the ranking metrics count the positives relevant. Its ``graph`` comes from the
    ``graph_*`` files where the folder carries them, else None; ``labels_from`` is the manifest's
    ``source``."""
    if not (path / MANIFEST).is_file():
        raise InputError(f"{path}: not a weak benchmark (no manifest.json; write one with `revbench labels`)")
    verified = verify_release(path, what="weak benchmark")
    if verified.manifest.get("kind") != KIND:
        raise InputError(f"{path / MANIFEST}: kind {verified.manifest.get('kind')!r}, not {KIND!r}")
    graph = [name for name in GRAPH_FILES if (path / f"{name}.parquet").is_file()]
    if graph and len(graph) < len(GRAPH_FILES):
        lacking = next(name for name in GRAPH_FILES if name not in graph)
        raise InputError(f"{path}: the weak benchmark carries part of a graph (no {lacking}.parquet)")
    read = {f["path"]: read_listed(verified, f["path"], "weak benchmark") for f in verified.manifest["files"]}
    version = weak_version({name: hashlib.sha256(data).hexdigest() for name, data in read.items()})
    said = verified.manifest.get("version")
    labels = read.get("labels.parquet")
    # Folders written before the version covered every file carry their labels' digest: still checked.
    older = hashlib.sha256(labels).hexdigest()[:12] if labels is not None else None
    if said not in (version, older):
        raise ReleaseTampered(f"{path / MANIFEST}: version {said!r} is not the version of the files it lists ({version}); "
                              "the weak benchmark is not as it was built (nothing was read from it or written)")
    try:
        t = {name: pl.read_parquet(io.BytesIO(read[f"{name}.parquet"])).select(list(schema)).cast(schema)
             for name, schema in (FILES | (GRAPH_FILES if graph else {})).items()}
    except KeyError as exc:
        raise InputError(f"{path}: {exc.args[0]} is not listed in manifest.json; the weak benchmark cannot be read") from None
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"{path}: a weak benchmark file cannot be read ({str(exc).splitlines()[0]})") from None
    ratings = t["labels"].select("reviewer_id", "paper_id",
                                 (1.0 + 4.0 * pl.col("label").cast(pl.Float64)).alias("rating")).cast(RATINGS_SCHEMA)
    source = verified.manifest.get("source")
    return Benchmark(name="weak", version=version, digest=verified.digest, submissions=t["submissions"],
                     draws=[t["profiles"]], splits=[Split(SPLIT_POINTWISE, ratings=ratings, candidate_lists=True)],
                     graph=BenchmarkGraph(**{GRAPH_FRAMES[name]: t[name] for name in GRAPH_FILES}) if graph else None,
                     labels_from=source if isinstance(source, str) else None)
