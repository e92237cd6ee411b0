"""``revbench doctor``'s arXiv and Semantic Scholar probes on the services' real recorded answers
(the rest of the doctor is tested against the stand-ins in tests/app/test_doctor.py): a real
feed or batch passes, a real error body fails in one line that carries the service's own words."""

from __future__ import annotations

import json
from typing import Any

import pytest

from revbench.app.doctor import run_probes
from revbench.health import Probe
from revbench.settings import Settings
from tests.conformance.test_s2 import BATCH, _interactions
from tests.support.conformance import REAL, expected, needs_samples

pytestmark = needs_samples

ARXIV = expected("arxiv")
S2 = expected("s2")["files"]


def _probe(settings: Settings, service: str) -> Probe:
    [probe] = run_probes(settings, None, {service}, 5.0)
    assert probe.service == service
    return probe


def _arxiv(serve: Any, name: str) -> Probe:
    status = json.loads((REAL / "arxiv" / "responses.json").read_text())[name]["status_code"]
    route = {"method": "GET", "path": "/api/query", "status": status, "headers": {"content-type": "application/atom+xml"},
             "body": (REAL / "arxiv" / name).read_bytes()}  # any query: the probe asks its own
    with serve([route]) as base:
        return _probe(Settings().with_overrides(arxiv={"base_url": f"{base}/api/query", "delay_seconds": 0}), "arxiv")


def _s2(serve: Any, status: int, body: bytes) -> Probe:
    with serve([{"method": "POST", "path": BATCH, "status": status, "body": body,
                 "headers": {"content-type": "application/json"}}]) as base:
        return _probe(Settings().with_overrides(s2={"base_url": f"{base}/s2/graph/v1", "keyless_delay_seconds": 0}), "s2")


def test_a_real_feed_passes_the_arxiv_probe(serve: Any) -> None:
    name = "q_testing_s0_m10_bc5a6c384fe9.xml"
    probe = _arxiv(serve, name)
    first = ARXIV[name]["entries"][0]["arxiv_id"]
    assert probe.status == "ok" and f"{first} of {ARXIV[name]['total']} results" in probe.detail


def test_a_real_empty_feed_is_a_warning(serve: Any) -> None:
    probe = _arxiv(serve, "id_0000.0000_s0_m100_8b51d9633a68.xml")
    assert probe.status == "warn" and "held no entry (0 results)" in probe.detail


def test_a_real_error_feed_fails_with_arxivs_words(serve: Any) -> None:
    name = next(n for n, v in ARXIV.items() if not n.startswith("_") and "error" in v)
    probe = _arxiv(serve, name)
    assert probe.status == "fail" and ARXIV[name]["error"] in probe.detail and "\n" not in probe.detail
    assert "ARXIV__BASE_URL" in probe.fix


def test_a_real_one_paper_batch_passes_the_s2_probe(serve: Any) -> None:
    [(_m, _u, status, body)] = _interactions("test_get_papers.yaml")
    one = json.dumps(json.loads(body)[:1]).encode()  # the probe sends one id: the real answer's first paper
    probe = _s2(serve, status, one)
    assert probe.status == "ok" and probe.detail.startswith("no key: the shared keyless pool")


@pytest.mark.parametrize("name", ["test_bad_query_parameters.yaml", "test_not_found.yaml"])
def test_a_real_error_body_fails_the_s2_probe_with_its_text(serve: Any, name: str) -> None:
    status, body = _interactions(name)[0][2:]
    want = S2[name].get("error") or S2[name]["errors"][0]
    probe = _s2(serve, status, body)
    assert probe.status == "fail" and f"HTTP {status}" in probe.detail and want in probe.detail
    assert "\n" not in probe.detail and "S2__BASE_URL" in probe.fix
