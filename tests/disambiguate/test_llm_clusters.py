"""The LLM path of disambiguation against a local OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from revbench.clients.llm import LlmClient
from revbench.settings import Settings
from revbench.tasks.disambiguate import Instance
from revbench.tasks.llm_clusters import InvalidAnswer, llm_decider, parse_clusters
from tests.support.common import on_replay

INSTANCES = [
    Instance([0], ["Li Chen"], ["MIT"], [], ["s2-7"], ["Ana Silva"], ["Sparse retrieval for reviewers"]),
    Instance([1], ["L. Chen"], ["Massachusetts Institute of Technology"], ["li@mit.example"], [], ["Ana Silva"]),
    Instance([2], ["Li Chen"], ["Peking University"], [], []),
]


def _client(s: Settings, tmp_path: Path) -> LlmClient:
    return LlmClient(s.llm, s.http, cache_dir=tmp_path / "cache")


def _recorded(tmp_path: Path, content: str) -> Path:
    d = tmp_path / "fixtures"
    d.mkdir()
    body = {"id": "chatcmpl-rec", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    (d / "answer.json").write_text(json.dumps(body))
    (d / "routes.json").write_text(json.dumps([{"method": "POST", "path": "/llm/v1/chat/completions",
                                                "headers": {"content-type": "application/json"}, "body_file": "answer.json"}]))
    return d


def test_a_correct_answer_merges_and_is_recorded(replay, settings, tmp_path: Path) -> None:
    client = _client(on_replay(settings, replay()), tmp_path)
    d = llm_decider(client)("chen|l", INSTANCES)
    assert d.groups == [[1, 2], [3]] and d.method == "llm"
    assert d.record["valid"] and d.record["model"] == "gpt-4o-mini" and d.record["template_version"].startswith("3-")
    assert json.loads(d.record["answer"]) == {"clusters": [[1, 2], [3]]}
    again = llm_decider(client)("chen|l", INSTANCES)
    assert again.groups == d.groups and client.requests_made == 1 and again.record["cached"]


@pytest.mark.parametrize(("answer", "why"), [
    ("They look like the same person to me.", "no JSON object"),
    ('{"clusters": [[1, 2]]}', "missing [3]"),
    ('{"clusters": [[1, 2], [2, 3]]}', "listed twice [2]"),
    ('{"clusters": [[1, 2], [3, 4]]}', "unknown instances [4]"),
    ('{"groups": [[1, 2, 3]]}', "expected"),
])
def test_a_bad_answer_is_asked_again_then_merges_nothing(replay, settings, tmp_path: Path, answer: str, why: str) -> None:
    app = replay(fixtures=_recorded(tmp_path, answer))
    client = _client(on_replay(settings, app), tmp_path)
    d = llm_decider(client)("chen|l", INSTANCES)
    assert d.groups == [[1], [2], [3]]
    assert not d.record["valid"] and why in d.record["errors"]
    assert app.faults.stats()["served"]["llm"] == 2  # the answer, then one retry


def test_a_timeout_merges_nothing(replay, settings, tmp_path: Path) -> None:
    app = replay(fault_rate=1.0, max_consecutive_faults=100, fault_kinds={"llm": ("timeout",)}, timeout_delay_seconds=1.0)
    s = on_replay(settings, app).with_overrides(http={"max_attempts": 2})
    d = llm_decider(_client(s, tmp_path))("chen|l", INSTANCES)
    assert d.groups == [[1], [2], [3]] and not d.record["valid"] and "call failed" in d.record["errors"]


def test_parse_clusters_strictness() -> None:
    assert parse_clusters('Sure! {"clusters": [[2, 1], [3]]}', 3) == [[1, 2], [3]]
    for bad in ['{"clusters": [[1, true], [2, 3]]}', '{"clusters": []}', '{"clusters": [[1], []]}', "[[1,2,3]]"]:
        with pytest.raises(InvalidAnswer):
            parse_clusters(bad, 3)


def test_the_prompt_shows_what_separates_homonyms_and_the_verifier_uses_it(replay, settings, tmp_path: Path) -> None:
    from revbench.templates import render

    twins = [
        Instance([0], ["Li Chen"], ["MIT"], ["li.chen@mit.example"], [], ["Ana Silva"], ["Graph learning"]),
        Instance([1], ["Li Chen"], ["Massachusetts Institute of Technology"], ["li.chen2@mit.example"], [], ["Bo Wu"]),
        Instance([2], ["Lei Chen"], ["MIT"], [], [], ["Ana Silva"]),
    ]
    prompt, _ = render("prompts/author_clusters.j2", instances=twins)
    assert "li.chen2@mit.example" in prompt and "co-authors: Ana Silva" in prompt and "papers: Graph learning" in prompt
    d = llm_decider(_client(on_replay(settings, replay()), tmp_path))("chen|l", twins)
    assert d.groups == [[1], [2], [3]]  # two addresses at one domain; two given names
