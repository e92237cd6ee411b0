"""Releases from a real survey round: byte-identical rebuilds, checksums, the privacy audit
refusing planted identifiers with nothing written, stable ids and exact CHANGES across releases,
and the RATE-format JSON read back by the lrbench importer."""

from __future__ import annotations

import json

import httpx
import polars as pl
import pytest

from revbench.errors import UsageError
from revbench.evaluation.importers.lrbench import load_lrbench
from revbench.files import file_sha256 as sha256_file
from revbench.flows.ratings import ratings_flow
from revbench.flows.release import PrivacyAuditFailed, release_flow
from revbench.schemas.release import FREE_TEXT, RELEASE_TABLES
from revbench.tasks.release import read_tables, verify_release
from revbench.warehouse import Warehouse
from tests.support.survey import paused_run_id, run_cli_env
from tests.support.waiting import assert_waiting, flow_messages, form_of, shown_in_ui

KEY = "release-test-key-" + "k" * 20


def test_the_release_schema_has_no_free_text_but_titles_and_abstracts() -> None:
    for t in RELEASE_TABLES:
        for c in t.columns:
            if c.dtype == pl.Utf8:
                assert c.name in FREE_TEXT or c.pattern, f"{t.name}.{c.name} is free text"


def test_a_rebuild_is_byte_identical_checksummed_and_readable_as_lrbench(rated) -> None:
    s, _ = rated
    first = release_flow.fn(s)
    assert first.version == "v1" and first.parent is None
    with pytest.raises(UsageError, match="--replace"):
        release_flow.fn(s, version="v1")
    again = release_flow.fn(s, version="v1", replace=True)
    old, new = s.releases_dir / ".replaced" / "v1-1", s.releases_dir / "v1"
    files = sorted(p.relative_to(new) for p in new.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(old) for p in old.rglob("*") if p.is_file())
    assert all((new / f).read_bytes() == (old / f).read_bytes() for f in files)
    manifest = json.loads((new / "manifest.json").read_text())
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) == {str(f) for f in files} - {"manifest.json"}
    for path, f in listed.items():
        assert sha256_file(new / path) == f["sha256"] and (new / path).stat().st_size == f["bytes"]
    tables = read_tables(new)
    for t in RELEASE_TABLES:
        assert listed[f"data/{t.name}.parquet"]["rows"] == tables[t.name].height == again.counts[t.name]
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        kept = wh.ratings.benchmark_frames(10)["ratings"]
    assert tables["pointwise"].height == kept.height
    assert tables["pointwise"]["reviewer_id"].str.contains(r"^r_[0-9a-f]{16}$").all()
    bench = load_lrbench(new)
    by = {sp.name: sp.tuples for sp in bench.splits}
    assert by["lr_paper_centric"].height == tables["paper_centric"].height
    assert by["lr_reviewer_centric"].height == tables["reviewer_centric"].height
    in_tuples = set(tables["paper_centric"]["paper_id"]) | set(tables["reviewer_centric"]["paper_pos"]) | set(
        tables["reviewer_centric"]["paper_neg"])  # a paper rated once, or only with ties, is in no tuple
    assert set(bench.submissions["paper_id"]) == in_tuples and in_tuples <= set(tables["papers"]["paper_id"])
    card = (new / "README.md").read_text()
    assert card.startswith("---\nlicense: cc-by-4.0") and "config_name: paper_centric" in card and "{{ " not in card  # BibTeX braces stay


def _rater_and_outsider(wh: Warehouse) -> tuple[str, str, str]:
    """A kept rater's name, one of their institutions, and the name of an author who never rated."""
    rater, place = wh._exec(
        """SELECT a.name, m.institution FROM authors a JOIN author_links l USING (author_id)
           JOIN mentions m USING (arxiv_id, position)
           WHERE a.author_id IN (SELECT reviewer_id FROM ratings WHERE status = 'kept') AND a.name LIKE '% %'
             AND m.institution LIKE '% %' ORDER BY 1, 2 LIMIT 1""")[0]
    outsider = wh._exec("""SELECT name FROM authors WHERE name LIKE '% %'
                           AND author_id NOT IN (SELECT reviewer_id FROM ratings) ORDER BY name LIMIT 1""")[0][0]
    return rater, place, outsider


def test_planted_identifiers_stop_the_release_each_named_and_nothing_written(rated) -> None:
    s, _ = rated
    with Warehouse.open(s.warehouse_path) as wh:
        rated_papers = wh.ratings.benchmark_frames(10)["papers"]["paper_id"].to_list()
        rater, place, _ = _rater_and_outsider(wh)
        invitation = wh._exec("SELECT invitation_id FROM survey_invitations ORDER BY 1 LIMIT 1")[0][0]
        plants = ["write to jane.doe@uni.example for data", f"joint work with {rater}", f"done at {place}",
                  f"see {invitation}", "http://survey.example/r?token=abc", "host 10.1.2.3 logs",
                  "iD 0000-0002-1825-0097 on file", "call 1234-5678-9012-3456 now"]  # the second fails the check digit
        assert len(rated_papers) >= len(plants)
        for paper, text in zip(rated_papers, plants, strict=False):
            wh._exec("UPDATE papers SET abstract = abstract || ' ' || ? WHERE arxiv_id = ?", [text, paper])
    with pytest.raises(PrivacyAuditFailed) as err:
        release_flow.fn(s)
    kinds = {h.kind for h in err.value.hits}
    # The rater's institution is a note, never a reason to stop: public abstracts name institutions.
    assert kinds == {"email", "person_name", "survey_token", "url_with_query", "ip_address", "orcid"}
    assert [h.found for h in err.value.hits if h.kind == "orcid"] == ["0000-0002-1825-0097"]
    assert all(h.table == "papers" and h.field == "abstract" for h in err.value.hits)
    assert not (s.releases_dir / "v1").exists() and not list(s.releases_dir.glob(".building-*"))
    code, _out, msg = run_cli_env(s, "release")
    assert code == 6 and "privacy audit" in msg and "papers row" in msg and "field abstract" in msg
    assert "REVBENCH_RELEASE__REDACT_NAMES=true" in msg and "REVBENCH_RELEASE__REDACT_ADDRESSES=true" in msg


def test_public_text_naming_institutions_and_other_authors_releases_and_names_are_redacted_on_request(rated) -> None:
    s, _ = rated
    with Warehouse.open(s.warehouse_path) as wh:
        papers = wh.ratings.benchmark_frames(10)["papers"]["paper_id"].to_list()
        rater, place, outsider = _rater_and_outsider(wh)
        for paper, text in zip(papers, [f"Work done at {place}.", f"Following {outsider}, we ...",
                                        f"As {rater} showed before."], strict=False):
            wh._exec("UPDATE papers SET abstract = abstract || ' ' || ? WHERE arxiv_id = ?", [text, paper])
    with pytest.raises(PrivacyAuditFailed) as err:  # the rater's own name, and only it, stops the release
        release_flow.fn(s.with_overrides(release={"evaluate_after": False}))
    assert [(h.kind, h.found) for h in err.value.hits] == [("person_name", rater)]
    out = release_flow.fn(s.with_overrides(release={"evaluate_after": False, "redact_names": True}))
    abstracts = " ".join(read_tables(s.releases_dir / out.version)["papers"]["abstract"].to_list())
    assert f"Work done at {place}." in abstracts and f"Following {outsider}, we" in abstracts
    assert "As [name] showed before." in abstracts and rater not in abstracts


def test_two_releases_keep_ids_and_changes_list_exactly_the_difference(rated) -> None:
    import re

    s, info = rated
    # Before the first release one respondent skips a paper on the page (no rating); after it,
    # they come back and rate it: the second release has one rating more.
    email = next(e for e in info["emails"] if e.to != info["liner"] and len(e.papers) >= 2)
    with httpx.Client(follow_redirects=True, timeout=30) as http:
        page = http.get(email.page_url)
        ids = list(dict.fromkeys(re.findall(r'name="answer-([^"]+)"', page.text)))
        http.post(email.page_url, data={f"answer-{ids[0]}": "skip"}).raise_for_status()
        ratings_flow.fn(s, decide="drop")
        # Only a published release is a parent: CHANGES.md is what changed for those who have it.
        release_flow.fn(s.with_overrides(release={"evaluate_after": False}), approve="yes")
        http.post(email.page_url, data={f"answer-{ids[0]}": "1"}).raise_for_status()  # unlike their others: no flag
    ratings_flow.fn(s, decide="drop")
    second = release_flow.fn(s)
    assert second.version == "v2" and second.parent == "v1"
    a, b = read_tables(s.releases_dir / "v1"), read_tables(s.releases_dir / "v2")
    changes = (s.releases_dir / "v2" / "CHANGES.md").read_text()
    for t in RELEASE_TABLES:
        cols = [c for c in t.names if c != "publications"]
        ra = {tuple(r) for r in a[t.name].select(cols).iter_rows()}
        rb = {tuple(r) for r in b[t.name].select(cols).iter_rows()}
        assert f"| {t.name} | {len(rb - ra)} | {len(ra - rb)} |" in changes
        for row in rb - ra:
            assert f"- {' '.join(map(str, row[:6]))}" in changes
        for row in ra - rb:
            assert f"- {' '.join(map(str, row[:6]))}" in changes
    pa = {tuple(r) for r in a["pointwise"].iter_rows()}
    pb = {tuple(r) for r in b["pointwise"].iter_rows()}
    assert pa < pb and len(pb - pa) == 1 and next(iter(pb - pa))[2] == 1
    # Unchanged reviewers and papers keep their ids: every id of v1 is in v2, with the same paper.
    assert set(a["reviewers"]["reviewer_id"]) <= set(b["reviewers"]["reviewer_id"])
    assert a["papers"].join(b["papers"], on="paper_id", how="anti").height == 0
    assert a["papers"].select("paper_id", "arxiv_id").equals(
        b["papers"].filter(pl.col("paper_id").is_in(a["papers"]["paper_id"].implode())).select("paper_id", "arxiv_id"))


def test_no_key_no_release(answered) -> None:
    s, _ = answered
    code, _out, err = run_cli_env(s, "release")
    assert code == 2 and "REVBENCH_RELEASE__ID_KEY" in err


def test_the_parquet_and_the_json_of_a_release_evaluate_to_identical_numbers(rated) -> None:
    from revbench.flows.evaluate import evaluate_flow

    s, _ = rated
    out = release_flow.fn(s)
    # Scorers that judge each pair on its own texts. bm25's and tpms's IDF is over the benchmark's
    # whole profile corpus, and the JSON holds only reviewers who are in some tuple, so those two
    # may differ by design.
    rows = evaluate_flow.fn(s, benchmarks=[f"release={out.dir}", f"lrbench={out.dir}"],
                            scorers=["embedding", "embedding:pooling=mean"], bootstrap=0).rows
    got = {(r["benchmark"], r["split"], r["scorer"], r["metric"]): r["value"] for r in rows}
    pairs = [("paper_centric", "lr_paper_centric"), ("reviewer_centric", "lr_reviewer_centric")]
    compared = 0
    for (b, split, scorer, metric), value in got.items():
        for ours, theirs in pairs:
            if b == "release" and split == ours and metric in ("loss", "accuracy", "easy_accuracy", "hard_accuracy"):
                assert value == pytest.approx(got[("lrbench", theirs, scorer, metric)], abs=1e-12), (split, scorer, metric)
                compared += 1
    assert compared == 2 * 2 * 4
    assert ("release", "pointwise", "embedding", "loss") in got


def test_others_can_load_the_release_with_datasets_duckdb_polars_and_croissant(rated, tmp_path, monkeypatch) -> None:
    import datasets
    import duckdb
    import mlcroissant as mlc

    s, _ = rated
    out = release_flow.fn(s)
    d = s.releases_dir / out.version
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    tables = read_tables(d)
    for t in RELEASE_TABLES:
        # A cache of its own: datasets keys a local folder's cache by the folder's name and config, not
        # its bytes, so another "v1" loaded earlier on this machine would be served instead.
        loaded = datasets.load_dataset(str(d), name=t.name, split="train", cache_dir=str(tmp_path / "hf-cache"))
        assert loaded.num_rows == tables[t.name].height and loaded.column_names == t.names
        assert duckdb.sql(f"SELECT count(*) FROM '{d / 'data' / (t.name + '.parquet')}'").fetchall()[0][0] == tables[t.name].height
    ds = mlc.Dataset(jsonld=str(d / "croissant.json"))
    assert not ds.metadata.ctx.issues.errors and not ds.metadata.ctx.issues.warnings
    first = next(iter(ds.records("pointwise")))
    assert first["pointwise/rating"] in range(1, 6) and first["pointwise/reviewer_id"].decode().startswith("r_")
    pubs = next(iter(ds.records("reviewers")))["reviewers/publications"]
    assert isinstance(pubs, list)
    sha = {f["path"]: f["sha256"] for f in json.loads((d / "manifest.json").read_text())["files"]}
    assert "croissant.json" in sha
    declared = {o["contentUrl"]: o["sha256"] for o in json.loads((d / "croissant.json").read_text())["distribution"]}
    assert declared == {p: h for p, h in sha.items() if p.endswith(".parquet")}
    verify_release(d)  # none of those readers left a file in the folder or changed one


def test_a_release_is_published_on_the_curators_go_evaluated_and_followed_across_releases(rated) -> None:
    s, info = rated
    built = release_flow.fn(s)  # in-process, no go given, no auto-approval: built, not published
    assert built.status == "built" and built.evaluation is None
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.release.release_state("v1")["status"] == "built"
    code, _out, err = run_cli_env(s, "release", "--approve", "perhaps")
    assert code == 2 and "--approve 'perhaps'" in err
    published = release_flow.fn(s, version="v1", approve="yes", approver="ada")
    assert published.status == "published" and published.decided_by == "ada" and published.evaluation is not None
    with pytest.raises(UsageError, match="already published"):
        release_flow.fn(s, version="v1", approve="no")
    # A second release after one answer changed (a link opened and confirmed: opening alone records
    # nothing), published by the unattended setting.
    from revbench.synth.respondents import confirm

    email = next(e for e in info["emails"] if e.to != info["liner"] and e.papers)
    with httpx.Client(follow_redirects=True, timeout=30) as http:
        confirm(http, email.papers[0][1][2])
    ratings_flow.fn(s, decide="drop")
    second = release_flow.fn(s.with_overrides(release={"auto_approve": True}))
    assert second.status == "published" and second.decided_by == "REVBENCH_RELEASE__AUTO_APPROVE"
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        rows = wh.evaluate.release_results("loss", "average")
    assert rows["version"].unique(maintain_order=True).to_list() == ["v1", "v2"]
    assert set(rows["scorer"]) == set(s.ratings.evaluate_scorers)
    code, out, err = run_cli_env(s, "report", "--releases", "--metric", "accuracy", "--split", "pointwise")
    assert code == 0, err
    assert "v1" in out and "v2" in out and (s.data_dir / "reports" / "releases" / "accuracy-pointwise.png").stat().st_size > 0


def test_a_tracked_release_waits_for_the_curator_and_lets_go_of_the_warehouse(prefect_server, rated) -> None:
    import threading

    from prefect.flow_runs import resume_flow_run

    s, _ = rated
    s = s.with_overrides(release={"evaluate_after": False})
    result: dict[str, object] = {}
    runner = threading.Thread(target=lambda: result.update(out=release_flow(s)))
    with flow_messages() as said:
        runner.start()
        run_id = paused_run_id(runner, result)
        assert_waiting(s, run_id, said, "go to publish release v1", "revbench release --version v1 --approve yes|no")
    description, schema = form_of(run_id)
    assert "Privacy audit passed" in description and "every row is new" in description
    assert "| table | added | removed |" in description
    assert schema["properties"]["publish"]["default"] is False
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:  # released while it waits
        assert wh.release.release_state("v1")["status"] == "built"
    resume_flow_run(run_id, run_input={"publish": False, "approver": "curator bo", "reason": "numbers look off"})
    runner.join(timeout=120)
    out = result["out"]
    assert out.status == "rejected" and out.decided_by == "curator bo"  # type: ignore[attr-defined]
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        state = wh.release.release_state("v1")
    assert state["status"] == "rejected" and state["reason"] == "numbers look off"
    # Not a plain green Completed: the state, the run's name, its log and an artifact say rejected.
    assert shown_in_ui(run_id, "release v1 rejected") == "Rejected"


def test_a_decision_made_by_command_ends_the_wait_of_the_run_waiting_for_it(prefect_server, rated) -> None:
    """The waiting block names a command that decides instead. Once it has decided (in its own
    process, without Prefect), the waiting run ends its wait by itself within seconds and
    finishes with that decision: its form is gone, `revbench status` no longer lists it, and the
    rejection shows on it in the UI."""
    import threading
    import time

    from prefect.client.orchestration import get_client

    from revbench.warehouse.status import read_status
    from tests.support.cli import cli

    s, _ = rated
    s = s.with_overrides(release={"evaluate_after": False})
    result: dict[str, object] = {}
    runner = threading.Thread(target=lambda: result.update(out=release_flow(s)))
    runner.start()
    run_id = paused_run_id(runner, result)
    res = cli(s, "release", "--version", "v1", "--approve", "no", "--approver", "curator ada", "--no-track")
    assert res.returncode == 0, res.stderr
    decided = time.monotonic()
    runner.join(timeout=60)
    assert not runner.is_alive() and time.monotonic() - decided < 30, "the waiting run did not end its wait"
    out = result["out"]
    assert out.status == "rejected" and out.decided_by == "curator ada"  # type: ignore[attr-defined]
    st = read_status(s.warehouse_path)
    assert st.waiting == [] and [r["status"] for r in st.runs if r["run_id"] == str(run_id)] == ["completed"]
    with get_client(sync_client=True) as client:
        assert not client.read_flow_run(run_id).state.is_paused()  # type: ignore[arg-type,union-attr]  # no form left
    assert shown_in_ui(run_id, "release v1 rejected") == "Rejected"
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        state = wh.release.release_state("v1")
    assert state["status"] == "rejected" and state["decided_by"] == "curator ada"


def test_no_release_is_made_that_equals_the_last_published_one_unless_forced(rated) -> None:
    """Nothing for nothing: a release that would equal the last published one is neither built
    nor put to a curator, `--force` builds it anyway, and `--only-if-changed` compares with the
    last published release, not with a newer rejected one."""
    from revbench.synth.respondents import confirm

    s, info = rated
    s = s.with_overrides(release={"evaluate_after": False})
    assert release_flow.fn(s, approve="yes", approver="ada").status == "published"  # v1
    same = release_flow.fn(s)
    assert same.unchanged and same.version == "v1" and same.status is None and not (s.releases_dir / "v2").exists()
    code, out, err = run_cli_env(s, "release", "--no-track")
    assert code == 0 and "Nothing changed since the published release v1" in " ".join(out.split()), err
    assert not (s.releases_dir / "v2").exists()
    code, _out, err = run_cli_env(s, "release", "--force", "--only-if-changed", "--no-track")
    assert code == 2 and "give one" in err
    # One answer changes; v2 is built from it and rejected: the last published release is still v1.
    email = next(e for e in info["emails"] if e.to != info["liner"] and e.papers)
    with httpx.Client(follow_redirects=True, timeout=30) as http:
        confirm(http, email.papers[0][1][2])
    ratings_flow.fn(s, decide="drop")
    assert release_flow.fn(s, approve="no").status == "rejected"  # v2
    third = release_flow.fn(s, only_if_changed=True)  # equal to the rejected v2, not to the published v1
    assert not third.unchanged and third.version == "v3" and third.parent == "v1" and third.status == "built"
    assert release_flow.fn(s, version="v3", approve="yes").status == "published"
    assert release_flow.fn(s).unchanged and not (s.releases_dir / "v4").exists()
    forced = release_flow.fn(s, force=True)
    assert forced.version == "v4" and forced.parent == "v3" and forced.status == "built"
