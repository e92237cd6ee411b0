"""LLM verification of the clusters the exact rules left apart (the clustering prompt)."""

from __future__ import annotations

import json
import re
from typing import Any

from revbench.clients.llm import LlmClient, prompt_hash
from revbench.retry import PermanentError, TransientError
from revbench.tasks.disambiguate import Decider, Decision, Instance
from revbench.templates import render

TEMPLATE = "prompts/author_clusters.j2"
_OBJECT = re.compile(r"\{.*\}", re.S)


class InvalidAnswer(ValueError):
    """The answer is not the JSON asked for, or does not cover every instance exactly once."""


def parse_clusters(answer: str, n: int) -> list[list[int]]:
    """Strictly validated ``{"clusters": [[1, 2], [3]]}``: each of 1..n exactly once."""
    match = _OBJECT.search(answer)
    if not match:
        raise InvalidAnswer("no JSON object in the answer")
    try:
        obj = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(f"not JSON: {exc}") from exc
    clusters = obj.get("clusters") if isinstance(obj, dict) else None
    if not isinstance(clusters, list) or not all(isinstance(c, list) and c for c in clusters):
        raise InvalidAnswer('expected {"clusters": [[...], ...]}')
    flat = [x for c in clusters for x in c]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        raise InvalidAnswer("instances must be integers")
    unknown = sorted(set(flat) - set(range(1, n + 1)))
    if unknown:
        raise InvalidAnswer(f"unknown instances {unknown}")
    dup = sorted(x for x in set(flat) if flat.count(x) > 1)
    if dup:
        raise InvalidAnswer(f"instances listed twice {dup}")
    missing = sorted(set(range(1, n + 1)) - set(flat))
    if missing:
        raise InvalidAnswer(f"instances missing {missing}")
    return [sorted(c) for c in clusters]


def llm_decider(client: LlmClient) -> Decider:
    """Ask the LLM once per block (cached by prompt hash); an invalid or failed answer is asked
    once more, uncached, and then leaves every instance apart. Every call is recorded."""

    def decide(key: str, instances: list[Instance]) -> Decision:
        prompt, version = render(TEMPLATE, instances=instances)
        record: dict[str, Any] = {"prompt_hash": prompt_hash(client.settings.model, prompt), "model": client.settings.model,
                                  "template": TEMPLATE, "template_version": version, "instances": len(instances)}
        errors = []
        for attempt in range(2):
            hits = client.cache_hits
            try:
                answer = client.complete(prompt, meta={"template": TEMPLATE, "template_version": version}, use_cache=attempt == 0)
            except (TransientError, PermanentError) as exc:
                errors.append(f"call failed: {exc}")
                continue
            record.update(answer=answer, cached=client.cache_hits > hits)
            try:
                groups = parse_clusters(answer, len(instances))
            except InvalidAnswer as exc:
                errors.append(str(exc))
                continue
            merged = [g for g in groups if len(g) > 1]
            evidence = "; ".join(" = ".join(instances[i - 1].affiliations[0] for i in g) for g in merged)
            return Decision(groups, "llm", evidence, {**record, "valid": True, "errors": "; ".join(errors)})
        return Decision([[i] for i in range(1, len(instances) + 1)], "llm", "",
                        {**record, "valid": False, "errors": "; ".join(errors)})

    return decide
