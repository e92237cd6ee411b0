"""An OpenAI-compatible chat endpoint that answers revbench's own prompts deterministically."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from revbench.replay.server import ReplayApp


def routes(replay: ReplayApp) -> list[Route]:
    """``POST /llm/v1/chat/completions``."""

    async def chat(request: Request) -> Response:
        try:
            body = await request.json()
            prompt = body["messages"][-1]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            return JSONResponse({"error": {"message": "messages[-1].content required"}}, status_code=400)
        content = stub_llm_answer(prompt)
        answer = {
            "id": "chatcmpl-replay", "object": "chat.completion", "created": 0, "model": body.get("model", "replay"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split()), "total_tokens": 0},
        }
        key = hashlib.sha1(prompt.encode()).hexdigest()
        return await replay.respond("llm", key, 200, json.dumps(answer).encode(), "application/json")

    return [Route("/llm/v1/chat/completions", chat, methods=["POST"])]


_WORD = re.compile(r"[A-Za-z]{4,}")


def _section(prompt: str, head: str) -> str:
    start = prompt.find(head)
    if start < 0:
        return ""
    rest = prompt[start + len(head):]
    end = rest.find("### ")
    return rest if end < 0 else rest[:end]


def _stub_clusters(prompt: str) -> str:
    """Group numbered instances whose affiliations are one institution, the way a model that
    knows institution names would (it knows the synthetic world's aliases, nothing else)."""
    from revbench.synth.vocab import INSTITUTIONS

    canon = {}
    for name, aliases, _dept, _dom in INSTITUTIONS:
        for variant in [name, *aliases]:
            canon[variant.lower()] = name
    groups: dict[str, list[int]] = {}
    singles: list[list[int]] = []
    for line in prompt.splitlines():
        m = re.match(r"^(\d+)\. names: .*?\| affiliations: ([^|]*)", line)
        if not m:
            continue
        idx = int(m.group(1))
        known = {canon.get(a.strip().lower()) for a in m.group(2).split(";")} - {None}
        if len(known) == 1:
            groups.setdefault(known.pop(), []).append(idx)
        else:
            singles.append([idx])
    return json.dumps({"clusters": sorted(list(groups.values()) + singles)})


def stub_llm_answer(prompt: str) -> str:
    """What the replay LLM says to a prompt from ``templates/prompts``."""
    if "Decide which of them are the same person" in prompt:
        return _stub_clusters(prompt)
    if "### Reviewer papers" in prompt:
        reviewer = {w.lower() for w in _WORD.findall(_section(prompt, "### Reviewer papers"))}
        paper = {w.lower() for w in _WORD.findall(_section(prompt, "### Submission"))}
        overlap = len(reviewer & paper) / max(len(paper), 1)
        if "0 to 100" in prompt:
            return f"The profile shares {len(reviewer & paper)} terms with the submission.\n{round(100 * overlap)}"
        return f"The profile shares {len(reviewer & paper)} terms with the submission.\n{1 + round(4 * overlap)}"
    if "### Paper" in prompt:
        title = _section(prompt, "### Paper").strip().split(":")[0]
        words = [w for w in _WORD.findall(title)]
        return ", ".join(words[:6]) or "none"
    return "I can only answer revbench prompts."
