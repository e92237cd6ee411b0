"""``revbench labels`` as a flow (``flows.labels.labels_flow``): in-process it is ``write_labels``,
same folder, same result, same errors; tracked, it runs through Prefect and publishes what it
wrote and its agreement as artifacts; ``write_labels`` keeps its name and signature for its
callers."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from revbench.errors import InputError
from revbench.flows.labels import LabelsResult, labels_flow, summary_rows, write_labels
from revbench.settings import Settings
from revbench.tasks.weak_labels import MIN_AGREEMENT_POSITIVES
from tests.graph.test_weak_labels import world  # noqa: F401 (the hand-made warehouse, a fixture)


def test_write_labels_keeps_its_signature() -> None:
    params = inspect.signature(write_labels).parameters
    assert list(params) == ["settings", "source", "out", "experts", "negatives", "seed", "min_positives"]
    assert [params[p].default for p in ("experts", "negatives", "seed", "min_positives")] == [15, 20, 0,
                                                                                              MIN_AGREEMENT_POSITIVES]
    assert list(inspect.signature(labels_flow.fn).parameters) == list(params)


def test_in_process_the_flow_is_write_labels(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    direct = write_labels(world, "citations", tmp_path / "direct", experts=1)
    flowed = labels_flow.fn(world, "citations", tmp_path / "flowed", experts=1)
    assert isinstance(flowed, LabelsResult)
    assert {**vars(flowed), "out": ""} == {**vars(direct), "out": ""}
    assert flowed.out == str(tmp_path / "flowed")
    files = sorted(p.name for p in (tmp_path / "direct").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "flowed").iterdir())
    assert all((tmp_path / "direct" / f).read_bytes() == (tmp_path / "flowed" / f).read_bytes()
               for f in files if f.endswith(".parquet"))


def test_the_flow_stops_as_write_labels_does(settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no warehouse at"):
        labels_flow.fn(settings, "citations", tmp_path / "weak")
    assert not (tmp_path / "weak").exists()


def test_the_summary_names_sizes_and_agreement(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    r = write_labels(world, "authorship", tmp_path / "weak", experts=1, min_positives=1)
    rows = {row["what"]: row["value"] for row in summary_rows(r)}
    assert rows["source"] == "authorship" and rows["version"] == r.version
    assert (rows["submissions"], rows["reviewers"], rows["weak positives"], rows["candidates"]) == (
        r.submissions, r.reviewers, r.positives, r.candidates)
    assert (rows["rated pairs"], rows["Kendall tau"], rows["AUC"]) == (r.agreement.n_pairs, r.agreement.kendall_tau,
                                                                       r.agreement.auc)


@pytest.mark.slow
def test_tracked_the_flow_publishes_what_it_wrote(prefect_server: str, world: Settings,  # noqa: F811
                                                  tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    r = labels_flow(world, "citations", tmp_path / "weak", experts=1)
    assert isinstance(r, LabelsResult) and (tmp_path / "weak" / "labels.parquet").is_file()
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["labels-summary", "labels-agreement"])))
    by_key = {a.key: a for a in arts}
    assert set(by_key) == {"labels-summary", "labels-agreement"}
    assert r.version in str(by_key["labels-summary"].data) and str(tmp_path / "weak") in by_key["labels-summary"].description
    assert r.agreement.line() in str(by_key["labels-agreement"].data)
