"""The conformance suite: real recorded answers of the services revbench reads (in
``../shared/external/real-responses``, with their sources in its README) through the real client
code. A local replay server serves each recorded body with its recorded status and headers, the
real client fetches it, and the parsed result is compared with expected values written beside
this suite (``expected/``) from an independent reading of each sample."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from revbench.replay.server import ReplayApp, ReplayServer
from revbench.settings import ReplaySettings

REAL = Path(__file__).resolve().parents[3] / "shared" / "external" / "real-responses"
EXPECTED = Path(__file__).resolve().parents[1] / "conformance" / "expected"

# CI has ../shared beside the checkout; without it (a copy of the project alone) each module skips
# with ``needs_samples``, except under CI=true, where test_samples_present.py fails the run.
needs_samples = pytest.mark.skipif(not REAL.exists(), reason="../shared/external/real-responses is not beside the project")


def expected(name: str) -> Any:
    """The expected values of one service's samples (``expected/<name>.json``)."""
    return json.loads((EXPECTED / f"{name}.json").read_text(encoding="utf-8"))


@contextmanager
def serving(tmp: Path, routes: list[dict[str, Any]]) -> Iterator[str]:
    """A replay server answering ``routes`` (``{method, path, query?, status?, headers?, body: bytes}``)
    with the recorded bytes, and nothing else (no world, no injected faults); yields its base URL."""
    tmp.mkdir(parents=True, exist_ok=True)
    index = []
    for i, r in enumerate(routes):
        body = tmp / f"body-{i}"
        body.write_bytes(r["body"])
        index.append({k: v for k, v in r.items() if k != "body"} | {"body_file": body.name})
    (tmp / "routes.json").write_text(json.dumps(index))
    app = ReplayApp(ReplaySettings(fault_rate=0.0), fixtures_dir=tmp)
    with ReplayServer(app) as server:
        yield server.base


def through_grobid(serve: Any, settings: Any, sample: Path, endpoint: str, ask: Any, **grobid: Any) -> Any:
    """``sample`` (a recorded TEI) served as GROBID's answer at ``endpoint``, fetched by the real
    client (``ask(client)`` returns what it parsed and the TEI text); checks that the recorded
    bytes came through unchanged in one request, and returns what was parsed."""
    from revbench.clients.grobid import GrobidHeaderClient

    body = sample.read_bytes()
    route = {"method": "POST", "path": f"/grobid/api/{endpoint}", "status": 200,
             "headers": {"content-type": "application/xml; charset=UTF-8"}, "body": body}
    with serve([route]) as base:
        s = settings.with_overrides(grobid={"base_url": f"{base}/grobid", **grobid})
        client = GrobidHeaderClient(s.grobid, s.http)
        parsed, tei = ask(client)
    assert tei.encode("utf-8") == body  # the recorded bytes came through the transport unchanged
    assert client.requests_made == 1
    return parsed
