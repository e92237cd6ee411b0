"""A release of the benchmark: anonymous stable ids, the release tables, RATE's JSON layout and
what changed since the parent release (the privacy audit is ``revbench.tasks.privacy``). Pure
over frames, except the writers at the end, which put bytes on disk deterministically (sorted
rows, fixed writer settings, no wall-clock time inside any data file).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from revbench.files import file_sha256 as sha256_file
from revbench.release_files import VerifiedRelease, verify_release
from revbench.schemas.model import Table
from revbench.schemas.release import (
    GRAPH_TABLES,
    PAPER_CENTRIC,
    PAPERS,
    POINTWISE,
    PUBLICATION_DOCS,
    RELEASE_TABLES,
    REVIEWER_CENTRIC,
    REVIEWERS,
)


def release_id(key: bytes, kind: str, natural: str) -> str:
    """``r_``/``p_`` + 16 hex of HMAC-SHA256(key, kind:natural): the same person or paper keeps
    its id in every release made with the key, and nobody without it can link an id back."""
    prefix = {"reviewer": "r_", "paper": "p_", "institution": "i_"}[kind]
    return prefix + hmac.new(key, f"{kind}:{natural}".encode(), hashlib.sha256).hexdigest()[:16]


ADDRESS = re.compile(r"<?(?:\{[^{}@]{1,200}\}|\b[A-Za-z0-9._%+-]+)@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)\b>?")
ADDRESS_MARK = "[email]"
"""What a written e-mail address in a paper's text becomes in a release: real abstracts carry
their authors' addresses ("Correspondence to: ... <name@lab.org>"), which no release may hold."""


def redact_addresses_in(text: str) -> str:
    """``text`` with every address the privacy audit would call one (plain ``x@lab.org``, or
    grouped ``{x, y}@lab.org``) replaced by [email]; metrics such as ``Hits@10.In`` or
    ``mAP@0.5`` stay, by the audit's own rule."""
    from revbench.tasks.privacy_emails import unknown_address_ok

    return ADDRESS.sub(lambda m: ADDRESS_MARK if unknown_address_ok(m.group(1).lower(), "plain") else m.group(0), text)


def without_addresses(df: pl.DataFrame, columns: Iterable[str]) -> pl.DataFrame:
    """``df`` with every address written in ``columns`` replaced by [email] (:func:`redact_addresses_in`)."""
    return df.with_columns(pl.col(c).map_elements(redact_addresses_in, return_dtype=pl.Utf8) for c in columns)


def build_tables(frames: dict[str, pl.DataFrame], key: bytes, profile_years: int,
                 redact_addresses: bool = False, redact_names: bool = False) -> dict[str, pl.DataFrame]:
    """The release tables from the warehouse's kept ``ratings`` (``reviewer_id, paper_id, rating``),
    ``tuples`` (``rating_tuples``), ``papers`` (``paper_id, title, abstract, year, category``) and
    ``profiles`` (``reviewer_id, paper_id, title, abstract, year``); reviewers' publications are
    those of the last ``profile_years`` years up to the newest rated paper. With
    ``redact_addresses``, e-mail addresses written in titles and abstracts become [email]
    (:func:`without_addresses`); without it the privacy audit stops the release on them. With
    ``redact_names``, the names, addresses and ORCIDs of ``people`` (the raters) written there
    become [name], [email], [orcid] (:func:`revbench.tasks.privacy.without_people`). With a
    ``graph`` (the frames of ``benchmark_graph``), the graph tables too (:func:`graph_tables`)."""
    if redact_names:
        from revbench.tasks.privacy import Auditor, without_people

        auditor = Auditor(frames["people"], ())
        frames = {**frames, "papers": without_people(frames["papers"], ("title", "abstract"), auditor),
                  "profiles": without_people(frames["profiles"], ("title", "abstract"), auditor)}
    if redact_addresses:
        frames = {**frames, "papers": without_addresses(frames["papers"], ("title", "abstract")),
                  "profiles": without_addresses(frames["profiles"], ("title", "abstract"))}
    rid = {r: release_id(key, "reviewer", r) for r in frames["ratings"]["reviewer_id"].unique().to_list()}
    pid = {p: release_id(key, "paper", p) for p in frames["ratings"]["paper_id"].unique().to_list()}
    r_, p_ = (lambda c: pl.col(c).replace_strict(rid)), (lambda c: pl.col(c).replace_strict(pid))
    ratings, t = frames["ratings"], frames["tuples"]
    pointwise = ratings.select(r_("reviewer_id").alias("reviewer_id"), p_("paper_id").alias("paper_id"),
                               pl.col("rating").cast(pl.Int64))
    pc = t.filter(pl.col("kind") == "paper_centric").select(
        p_("anchor_id").alias("paper_id"), r_("positive_id").alias("reviewer_pos"), r_("negative_id").alias("reviewer_neg"),
        "rating_pos", "rating_neg", "gap")
    rc = t.filter(pl.col("kind") == "reviewer_centric").select(
        r_("anchor_id").alias("reviewer_id"), p_("positive_id").alias("paper_pos"), p_("negative_id").alias("paper_neg"),
        "rating_pos", "rating_neg", "gap")
    papers = frames["papers"].filter(pl.col("paper_id").is_in(list(pid))).select(
        p_("paper_id").alias("paper_id"), pl.col("paper_id").alias("arxiv_id"), "title", "abstract", "category", "year")
    newest = int(frames["papers"]["year"].max() or 0)
    prof = frames["profiles"].filter(pl.col("reviewer_id").is_in(list(rid)) & (pl.col("year") > newest - profile_years))
    pubs = (prof.sort("reviewer_id", "year", "title", descending=[False, True, False])
            .group_by("reviewer_id", maintain_order=True)
            .agg(pl.struct("title", "abstract", "year").alias("publications")))
    reviewers = (pl.DataFrame({"reviewer_id": sorted(rid)}).join(pubs, on="reviewer_id", how="left")
                 .with_columns(pl.col("publications").fill_null(pl.lit([], dtype=pl.List(pl.Struct(
                     {"title": pl.Utf8, "abstract": pl.Utf8, "year": pl.Int64})))))
                 .select(r_("reviewer_id").alias("reviewer_id"), "publications"))
    out = {POINTWISE.name: pointwise, PAPER_CENTRIC.name: pc, REVIEWER_CENTRIC.name: rc, PAPERS.name: papers,
           REVIEWERS.name: reviewers}
    if frames.get("graph") is not None:
        out |= graph_tables(frames["graph"], frames["papers"].filter(pl.col("paper_id").is_in(list(pid))), prof, rid,
                            pid, key)
    return {t.name: t.conform(out[t.name]).sort(list(t.primary_key)) for t in RELEASE_TABLES + GRAPH_TABLES
            if t.name in out}


def graph_tables(graph: dict[str, pl.DataFrame], papers: pl.DataFrame, profiles: pl.DataFrame, rid: dict[str, str],
                 pid: dict[str, str], key: bytes) -> dict[str, pl.DataFrame]:
    """The graph tables of a release from ``graph`` (``citations``, ``topics``,
    ``reviewer_institutions``, ``coauthors`` over warehouse ids) restricted to the released
    ``papers``, the released publications ``profiles`` (titles as released) and the reviewers of
    ``rid``: rated papers by release id, publications by the sha1 of their title, institutions by
    ROR id or a keyed hash of their ``name:`` key (see ``schemas.release.GRAPH_TABLES``)."""
    ids = {p: hashlib.sha1(str(t).encode()).hexdigest() for p, t in profiles.select("paper_id", "title").iter_rows()}
    ids |= {p: pid[p] for p in papers["paper_id"].to_list()}
    inst = {k: k if k.startswith("ror:") else release_id(key, "institution", k)
            for k in graph["reviewer_institutions"]["institution_key"].unique().to_list()}
    known = list(ids)
    cites = (graph["citations"].filter(pl.col("citing_id").is_in(known) & pl.col("cited_id").is_in(known))
             .with_columns(pl.col("citing_id").replace_strict(ids), pl.col("cited_id").replace_strict(ids))
             .filter(pl.col("citing_id") != pl.col("cited_id")))
    # Two publications of one title are one id: their edges merge as the warehouse merges sources.
    infl = pl.col("is_influential")
    cites = cites.group_by("citing_id", "cited_id").agg(
        pl.when(infl.any()).then(True).when(infl.is_not_null().any()).then(False).otherwise(None).alias("is_influential"),
        pl.col("source").str.split(",").explode().unique().sort().str.join(","))
    topics = (graph["topics"].filter(pl.col("paper_id").is_in(known))
              .with_columns(pl.col("paper_id").replace_strict(ids))
              .group_by("paper_id", "scheme", "topic").agg(pl.col("score").max()))
    stints = (graph["reviewer_institutions"].filter(pl.col("reviewer_id").is_in(list(rid)))
              .with_columns(pl.col("reviewer_id").replace_strict(rid), pl.col("institution_key").replace_strict(inst)))
    co = graph["coauthors"].filter(pl.col("reviewer_id").is_in(list(rid)) & pl.col("other_id").is_in(list(rid)))
    co = co.with_columns(pl.col("reviewer_id").replace_strict(rid), pl.col("other_id").replace_strict(rid))
    return {"graph_citations": cites, "graph_topics": topics, "graph_institutions": stints, "graph_coauthors": co}


def rate_json(tables: dict[str, pl.DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """The tuples in the layout of LR-bench's evaluation files (read by RATE's evaluation code and
    revbench's ``lrbench`` importer): ``evaluations_pc`` and ``evaluations_rc``."""
    paper = {r["paper_id"]: r for r in tables["papers"].iter_rows(named=True)}
    pubs = {r: [{"title": p["title"], "abstract": p["abstract"], "year": p["year"]} for p in ps]
            for r, ps in tables["reviewers"].select("reviewer_id", "publications").iter_rows()}

    def p_side(p: str) -> dict[str, Any]:
        return {"paper_id": p, "paper_title": paper[p]["title"], "abstract": paper[p]["abstract"]}

    pc = [{"anchor": p_side(p), "positive": {"author_id": a, "score": sa, "papers": pubs[a]},
           "negative": {"author_id": b, "score": sb, "papers": pubs[b]}, "type": "paper_centric"}
          for p, a, b, sa, sb, _g in tables["paper_centric"].iter_rows()]
    rc = [{"anchor": {"author_id": r, "papers": pubs[r]}, "positive": {**p_side(a), "score": sa},
           "negative": {**p_side(b), "score": sb}, "type": "reviewer_centric"}
          for r, a, b, sa, sb, _g in tables["reviewer_centric"].iter_rows()]
    return {"evaluations_pc": pc, "evaluations_rc": rc}


def changes(current: dict[str, pl.DataFrame], parent: dict[str, pl.DataFrame] | None) -> dict[str, dict[str, list[Any]]]:
    """Rows added and removed per table since the parent release (by primary key; a rating whose
    value changed shows as removed and added); a graph table either side lacks counts as empty there."""
    out: dict[str, dict[str, list[Any]]] = {}
    for t in RELEASE_TABLES + GRAPH_TABLES:
        if t in GRAPH_TABLES and t.name not in current and (parent is None or t.name not in parent):
            continue
        cols = [c for c in t.names if c != "publications"]
        now = {tuple(r) for r in current[t.name].select(cols).iter_rows()} if t.name in current else set()
        before = {tuple(r) for r in parent[t.name].select(cols).iter_rows()} if parent and t.name in parent else set()
        out[t.name] = {"added": sorted(now - before), "removed": sorted(before - now)}
    return out


def changes_markdown(version: str, parent: str | None, diff: dict[str, dict[str, list[Any]]]) -> str:
    """``CHANGES.md``: counts per table, then every row added and removed."""
    against = (f"Against {parent}, the latest published release." if parent
               else "No release was published before: every row is new.")
    lines = [f"# Changes in {version}", "", against, "", "| table | added | removed |", "|---|---|---|"]
    lines += [f"| {t} | {len(d['added'])} | {len(d['removed'])} |" for t, d in diff.items()]
    for t, d in diff.items() if parent else ():  # with no parent every row is new: counts only
        for what in ("added", "removed"):
            if d[what]:
                lines += ["", f"## {t}: {what}", ""]
                lines += [f"- {' '.join(str(x) for x in row[:6])}" for row in d[what]]
    return "\n".join(lines) + "\n"


def write_files(out: Path, tables: dict[str, pl.DataFrame], rate: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """The data files of a release (parquet per table, RATE's JSON); returns rows per file."""
    (out / "data").mkdir(parents=True, exist_ok=True)
    rows = {}
    for name, df in tables.items():
        df.write_parquet(out / "data" / f"{name}.parquet", compression="zstd", compression_level=9, statistics=False,
                         row_group_size=1 << 20)
        rows[f"data/{name}.parquet"] = df.height
    for name, items in rate.items():
        (out / f"{name}.json").write_text(json.dumps(items, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        rows[f"{name}.json"] = len(items)
    return rows


LICENSE_URLS = {"cc-by-4.0": "https://creativecommons.org/licenses/by/4.0/",
                "cc-by-sa-4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
                "cc-by-nc-4.0": "https://creativecommons.org/licenses/by-nc/4.0/", "cc0-1.0": "https://creativecommons.org/publicdomain/zero/1.0/"}


def semver(version: str) -> str:
    """Croissant wants MAJOR.MINOR.PATCH: ``v3`` is 3.0.0, a semver stays, anything else 0.0.0."""
    if m := re.fullmatch(r"v(\d+)", version):
        return f"{int(m.group(1))}.0.0"
    return version if re.fullmatch(r"\d+\.\d+\.\d+", version) else "0.0.0"


def croissant(out: Path, name: str, version: str, license: str, description: str, published: str | None,
              title: str | None = None, cite_as: str | None = None, url: str | None = None) -> dict[str, Any]:
    """Croissant (ML Commons) JSON-LD for the parquet files of a release in ``out``: one
    FileObject per file with its sha256, one RecordSet per table with a typed field per column
    (the reviewers' publications as a repeated field of title, abstract and year), built and
    checked with ``mlcroissant``. ``published`` is a date taken from the data, not the clock;
    ``title`` (default ``name``) is Croissant's name and ``cite_as`` its citation (default
    ``name version``); the URL is made of ``name``."""
    import logging

    # mlcroissant reports through the root logger, whose first use would bind a handler to
    # whatever stderr is at that moment; its findings are checked below, not printed.
    quiet = logging.NullHandler()
    logging.getLogger().addHandler(quiet)
    logging.getLogger("absl").setLevel(logging.ERROR)
    try:
        return _croissant(out, name, version, license, description, published, title, cite_as, url)
    finally:
        logging.getLogger().removeHandler(quiet)


def _croissant(out: Path, name: str, version: str, license: str, description: str, published: str | None,
               title: str | None, cite_as: str | None, url: str | None) -> dict[str, Any]:
    import datetime as dt

    import mlcroissant as mlc

    def kind(dtype: pl.DataType) -> Any:
        return {pl.Int64: mlc.DataType.INTEGER, pl.Float64: mlc.DataType.FLOAT,
                pl.Boolean: mlc.DataType.BOOL}.get(dtype, mlc.DataType.TEXT)  # type: ignore[call-overload]

    files, record_sets = [], []
    for t in present_tables(out):
        path = out / "data" / f"{t.name}.parquet"
        fid = f"{t.name}-parquet"
        files.append(mlc.FileObject(id=fid, name=fid, content_url=f"data/{t.name}.parquet",
                                    encoding_formats=["application/x-parquet"], sha256=sha256_file(path)))
        fields = []
        for c in t.columns:
            src = mlc.Source(file_object=fid, extract=mlc.Extract(column=c.name))
            if isinstance(c.dtype, pl.List):
                subs = [mlc.Field(id=f"{t.name}/{c.name}/{k}", name=k, description=PUBLICATION_DOCS[k],
                                  data_types=[kind(v)],
                                  source=mlc.Source(file_object=fid, extract=mlc.Extract(column=c.name),
                                                    transforms=[mlc.Transform(json_path=k)]))
                        for k, v in c.dtype.inner.to_schema().items()]  # type: ignore[attr-defined]
                fields.append(mlc.Field(id=f"{t.name}/{c.name}", name=c.name, description=c.doc, repeated=True,
                                        sub_fields=subs, data_types=[]))
            else:
                fields.append(mlc.Field(id=f"{t.name}/{c.name}", name=c.name, description=c.doc or None,
                                        data_types=[kind(c.dtype)], source=src))
        record_sets.append(mlc.RecordSet(id=t.name, name=t.name, description=t.doc, fields=fields, key=list(t.primary_key)))
    meta = mlc.Metadata(name=title or name, description=description, license=LICENSE_URLS.get(license, license),
                        url=url or None, version=semver(version),
                        date_published=dt.datetime.fromisoformat(published) if published else None,
                        cite_as=cite_as or f"{name} {version}", distribution=files, record_sets=record_sets)
    if meta.ctx.issues.errors:
        raise ValueError(f"the Croissant metadata does not validate: {meta.ctx.issues.report()}")
    return meta.to_json()


def read_tables(release: Path | VerifiedRelease) -> dict[str, pl.DataFrame]:
    """A release's tables from its parquet files, once they match its manifest (a folder is
    verified here against its own manifest; a ``VerifiedRelease`` already was)."""
    checked = release if isinstance(release, VerifiedRelease) else verify_release(release)
    return {t.name: pl.read_parquet(checked.path / "data" / f"{t.name}.parquet") for t in present_tables(checked.path)}


def present_tables(folder: Path) -> tuple[Table, ...]:
    """The tables of the release in ``folder``: every one of ``RELEASE_TABLES``, and the graph's
    where it carries them (a release built before the graph, or from a warehouse without one, has none)."""
    return RELEASE_TABLES + tuple(t for t in GRAPH_TABLES if (folder / "data" / f"{t.name}.parquet").is_file())


def choose_parent(releases: pl.DataFrame, version: str) -> str | None:
    """The parent of a new build of ``version`` among ``releases`` (``version, parent, status,
    built_at``): the newest published release other than ``version`` whose own ancestry does not
    pass through ``version``. Only published releases are parents (CHANGES.md says what changed
    for those who have the last one), and the parent chain never loops."""
    parents = dict(zip(releases["version"].to_list(), releases["parent"].to_list(), strict=True))
    published = releases.filter(pl.col("status") == "published").sort("built_at", "version", descending=True)
    for candidate in published["version"].to_list():
        seen: set[str] = set()
        p = candidate
        while p is not None and p != version and p not in seen:
            seen.add(p)
            p = parents.get(p)
        if p != version:
            return candidate
    return None


def next_version(names: Iterable[str]) -> str:
    """``v<N+1>`` after the highest ``vN`` among folder ``names`` (``v1`` when there is none)."""
    n = max((int(m.group(1)) for name in names if (m := re.fullmatch(r"v(\d+)", name))), default=0)
    return f"v{n + 1}"


def changed(diff: dict[str, dict[str, list[Any]]]) -> bool:
    """Whether :func:`changes` found any row added or removed."""
    return any(d["added"] or d["removed"] for d in diff.values())


def size_category(n: int) -> str:
    """The Hugging Face size category of a dataset of ``n`` rows."""
    return "n<1K" if n < 1000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "100K<n<1M"


def release_counts(events: pl.DataFrame, ratings: pl.DataFrame, flags: int, tables: dict[str, pl.DataFrame]) -> dict[str, int]:
    """What the manifest and the card count: survey events (duplicates and skips among them), the
    ratings by status, the quality ``flags``, and the rows of each release table."""
    disp = dict(events.group_by("disposition").len().iter_rows()) if events.height else {}
    return {"events": events.height, "ratings": ratings.height, "duplicates": disp.get("superseded", 0),
            "skips": disp.get("skip", 0), "flags": flags,
            "kept": ratings.filter(pl.col("status") == "kept").height,
            "dropped": ratings.filter(pl.col("status") == "dropped").height,
            **{t.name: tables[t.name].height for t in RELEASE_TABLES + GRAPH_TABLES if t.name in tables}}


def file_docs(rows: dict[str, int]) -> list[dict[str, Any]]:
    """The data files for the card (``rows``: path -> rows, see :func:`write_files`), each with
    its row count and what it holds."""
    tables = RELEASE_TABLES + GRAPH_TABLES
    docs = {t.name: t.doc for t in tables} | {"evaluations_pc": "paper-centric tuples in LR-bench's JSON layout",
                                              "evaluations_rc": "reviewer-centric tuples in LR-bench's JSON layout"}
    return [{"path": p, "rows": n, "doc": docs[p.rsplit("/", 1)[-1].split(".")[0]]} for p, n in sorted(rows.items())]


def listed_files(folder: Path, rows: dict[str, int]) -> list[dict[str, Any]]:
    """Every file under ``folder`` for the manifest, in path order: path, rows (data files only),
    bytes and sha256."""
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        files.append({"path": rel, "rows": rows.get(rel), "bytes": path.stat().st_size, "sha256": sha256_file(path)})
    return files
