"""The wheel holds every module and data file of the source tree under ``revbench``, installs
into a fresh virtual environment, and runs from there."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from revbench.templates import version
from tests.support.evaluation import write_openreview

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"revbench": "revbench", "flows": "revbench/flows", "tasks": "revbench/tasks", "schemas": "revbench/schemas",
          "warehouse": "revbench/warehouse", "templates": "revbench/templates"}
EXTERNAL = ROOT.parent / "shared" / "external" / "lrbench-sample"


def source_files() -> set[str]:
    """Every file the package needs, at the path it must have once installed."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", *MAPPED], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    out = set()
    for rel in listed:
        top, _, rest = rel.partition("/")
        if (ROOT / rel).is_file() and "__pycache__" not in rel:
            out.add(f"{MAPPED[top]}/{rest}")
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the working tree (the build writes its own folders)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    for rel in listed:
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v", "-w",
                            str(work / "dist"), str(src)], check=True, capture_output=True, text=True, timeout=600)
    # Every folder of data is declared: setuptools says nothing about one it would install unasked.
    said = built.stdout + built.stderr
    assert "absent from the `packages` configuration" not in said and "absent from the packages" not in said, [
        line for line in said.splitlines() if "absent" in line][:3]
    return next((work / "dist").glob("revbench-*.whl"))


def test_wheel_holds_the_source_tree(wheel: Path) -> None:
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    assert names == source_files()
    assert {n.split("/")[0] for n in names} == {"revbench"}


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the wheel installed; its dependencies come from this test
    environment through a path file (no network, no second copy of torch)."""
    env = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300)
    site_dir = next((env / "lib").glob("python3.*/site-packages"))
    (site_dir / "_deps.pth").write_text("\n".join(p for p in site.getsitepackages() if "site-packages" in p) + "\n")
    # pip runs against the new interpreter (--python), so the console script is the new env's own;
    # --ignore-installed keeps it from uninstalling the revbench it sees through the path file.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "--no-deps",
                    "--no-index", "--ignore-installed", "-q", str(wheel)], check=True, capture_output=True, timeout=300)
    return env


def _run(venv: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Nothing of ours, and none of the switches that would quiet a library for us.
    quieting = ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "PYTHONWARNINGS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API", "PYTHONPATH", *quieting))}
    # Read as a log or CI reads it: not a terminal, 80 columns.
    env.update(REVBENCH_DATA_DIR=str(cwd / "data"), COLUMNS="80")
    return subprocess.run([str(venv / "bin" / "revbench"), *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=900)


def test_installed_revbench_evaluates_and_adds_no_generic_names(venv: Path, tmp_path: Path) -> None:
    site_dir = next((venv / "lib").glob("python3.*/site-packages"))
    assert not {"flows", "tasks", "schemas", "warehouse", "templates"} & {p.name for p in site_dir.iterdir()}
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import revbench.flows, revbench.templates as t;"
                            "print(revbench.flows.__file__); print(t.version('prompts/author_clusters.j2'))"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout.split()
    assert where[0].startswith(str(site_dir)) and where[1] == version("prompts/author_clusters.j2")
    data = write_openreview(tmp_path / "or")
    (tmp_path / "gold_style.json").write_text(json.dumps({"ir": {"s1": 0.9, "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}))
    out = _run(venv, ["evaluate", "-b", f"openreview={data}", "-s", "tpms", "-s", "trivial",
                      "-p", f"oracle={tmp_path / 'gold_style.json'}", "--bootstrap", "0", "--json-out", "rows.json"], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {(r["scorer"], r["metric"]): r["value"] for r in json.loads((tmp_path / "rows.json").read_text())}
    assert rows[("oracle", "loss")] == 0.0 and rows[("trivial", "loss")] == 0.5 and ("tpms", "loss") in rows


@pytest.mark.skipif(not EXTERNAL.exists(), reason="../shared/external is not beside the project")
def test_installed_revbench_reproduces_rate_on_the_public_samples(venv: Path, tmp_path: Path) -> None:
    out = _run(venv, ["evaluate", "-p", f"rate_pc={EXTERNAL / 'RATE_pc.sample.json'}",
                      "-p", f"rate_rc={EXTERNAL / 'RATE_rc.sample.json'}", "--bootstrap", "0", "--json-out", "rows.json"],
               tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    loss = {r["scorer"]: r["value"] for r in json.loads((tmp_path / "rows.json").read_text()) if r["metric"] == "loss"
            and r["split"] != "average"}
    assert round(loss["rate_pc"], 6) == 0.5 and round(loss["rate_rc"], 6) == 0.112676


def test_installed_revbench_runs_the_demo(venv: Path, tmp_path: Path) -> None:
    out = _run(venv, ["demo", "--papers", "120", "--fault-rate", "0", "--no-track"], tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # The screen has the short story; every stage's full output is in the report beside it.
    full = (tmp_path / "data" / "reports" / "demo.txt").read_text()
    assert "COI audit against the SYNTHETIC truth: 0 invitations" in " ".join(full.split())
    assert re.search(r"Link scanners: [1-9]\d* requests on [1-9]\d* mailboxes .*?, 0 recorded anything", " ".join(full.split()))
    assert "Evaluation on the warehouse benchmark" in out.stdout and "link scanners: " in out.stdout
    assert (tmp_path / "data" / "reports" / "warehouse" / "report.md").exists()
    # Read at 80 columns, every scorer the report evaluated is named whole, and nothing is cut.
    rows = json.loads((tmp_path / "data" / "reports" / "warehouse" / "results.json").read_text())
    scorers = {r["scorer"] for r in rows}
    assert len(scorers) >= 5 and "…" not in out.stdout + full
    for name in scorers:
        assert name in out.stdout and re.search(rf"(scorer: |│ ){re.escape(name)}( |$)", full, re.M), name
    # Nothing from third parties: no Python warning, no progress bar of a library; each line of
    # the log is ours (a level and a message).
    said = out.stdout + out.stderr
    assert not re.search(r"\b\w*Warning\b", said), re.findall(r".*\w*Warning\b.*", said)[:3]
    assert "it/s]" not in said and "Loading weights" not in said
    assert all(re.match(r"(INFO|WARNING|ERROR) ", ln) for ln in out.stderr.splitlines() if ln.strip()), out.stderr[:2000]
