"""An OpenAI-compatible chat endpoint that answers revbench's own prompts deterministically."""

from __future__ import annotations

import hashlib
import json
import re

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from revbench.replay.context import replay_of


def unauthorized() -> Response:
    """What an OpenAI-compatible endpoint answers a key it does not know."""
    return JSONResponse({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                   "param": None, "code": "invalid_api_key"}}, status_code=401)


async def models(request: Request) -> Response:
    """``GET /llm/v1/models``: the models this server serves."""
    replay = replay_of(request)
    if replay.wrong_key("llm", request):
        return unauthorized()
    return JSONResponse({"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "revbench"}
                                                    for m in replay.llm_models]})


async def chat(request: Request) -> Response:
    """``POST /llm/v1/chat/completions``: :func:`stub_llm_answer` to the last message."""
    replay = replay_of(request)
    if replay.wrong_key("llm", request):
        return unauthorized()
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


router = Router([Route("/llm/v1/chat/completions", chat, methods=["POST"]), Route("/llm/v1/models", models, methods=["GET"])])
"""``POST /llm/v1/chat/completions`` and ``GET /llm/v1/models``."""


_WORD = re.compile(r"[A-Za-z]{4,}")


def _section(prompt: str, head: str) -> str:
    start = prompt.find(head)
    if start < 0:
        return ""
    rest = prompt[start + len(head):]
    end = rest.find("### ")
    return rest if end < 0 else rest[:end]


def _fields(line: str) -> tuple[int, dict[str, list[str]]] | None:
    """``3. names: A; B | affiliations: X | emails: ...`` -> (3, {"names": ["A", "B"], ...})."""
    m = re.match(r"^(\d+)\. (.*)$", line)
    if not m or "names:" not in m.group(2):
        return None
    out: dict[str, list[str]] = {}
    for part in m.group(2).split(" | "):
        key, _, value = part.partition(": ")
        sep = " / " if key.strip() == "papers" else ";"
        out[key.strip()] = [v.strip() for v in value.split(sep) if v.strip()]
    return int(m.group(1)), out


def _given(name: str) -> str:
    first = name.replace(",", " ").split()[0] if name.split() else ""
    return "" if len(first.rstrip(".")) <= 1 else first.lower()


def _apart(a: dict[str, list[str]], b: dict[str, list[str]]) -> bool:
    """What separates two instances for a careful reader of the prompt."""
    ga = {_given(n) for n in a.get("names", [])} - {""}
    gb = {_given(n) for n in b.get("names", [])} - {""}
    if ga and gb and not ga & gb:
        return True  # two different given names
    oa, ob = set(a.get("ORCIDs", [])), set(b.get("ORCIDs", []))
    if oa and ob and not oa & ob:
        return True  # two ORCID iDs, two people
    by_domain: dict[str, set[str]] = {}
    for e in a.get("emails", []):
        by_domain.setdefault(e.rpartition("@")[2], set()).add(e)
    for e in b.get("emails", []):
        mine = by_domain.get(e.rpartition("@")[2])
        if mine and e not in mine:
            return True  # two addresses at one institution's domain
    shared = set(a.get("co-authors", [])) & set(b.get("co-authors", []))
    words_a = {w.lower() for t in a.get("papers", []) for w in _WORD.findall(t)}
    words_b = {w.lower() for t in b.get("papers", []) for w in _WORD.findall(t)}
    emailed = bool(a.get("emails")) and bool(b.get("emails"))
    # Without addresses on both sides, same institution alone is thin: a homonym there would
    # look the same. Ask for a shared co-author or a shared topic.
    return not emailed and not shared and not (words_a & words_b)


def _stub_clusters(prompt: str) -> str:
    """Answer the clustering prompt as a careful verifier: the same institution (it knows the
    SYNTHETIC world's aliases, nothing else) and nothing that separates them (different given
    names, two addresses at one domain, no shared co-author or topic when emails are missing)."""
    from revbench.synth.vocab import INSTITUTIONS

    canon = {}
    for name, aliases, _dept, _dom in INSTITUTIONS:
        for variant in [name, *aliases]:
            canon[variant.lower()] = name
    clusters: list[list[int]] = []
    # A group takes an instance that shares a known institution with each of its members (people
    # hold two affiliations, so any shared one counts) and that nothing separates from them.
    groups: list[list[tuple[int, dict[str, list[str]], set[str]]]] = []
    for line in prompt.splitlines():
        parsed = _fields(line)
        if parsed is None:
            continue
        idx, f = parsed
        known = {canon.get(a.lower()) for a in f.get("affiliations", [])} - {None}
        if not known:
            clusters.append([idx])
            continue
        home = next((g for g in groups if all(k & known and not _apart(f, o) for _, o, k in g)), None)
        if home is None:
            groups.append([(idx, f, known)])
        else:
            home.append((idx, f, known))
    clusters += [[i for i, _, _ in g] for g in groups]
    return json.dumps({"clusters": sorted(sorted(c) for c in clusters)})


def stub_llm_answer(prompt: str) -> str:
    """What the replay LLM says to a prompt from ``templates/prompts``."""
    if "Decide which of them are the same person" in prompt:
        return _stub_clusters(prompt)
    if "### Abstract to rewrite" in prompt:
        # the collusion attack's rewrite: background on the keywords asked for, then the abstract
        terms = next((line.removeprefix("Use these keywords:").strip() for line in prompt.splitlines()
                      if line.startswith("Use these keywords:")), "")
        return f"Building on work on {terms}, we revisit this problem. {_section(prompt, '### Abstract to rewrite').strip()}"
    if "### Reviewer papers" in prompt:
        reviewer = {w.lower() for w in _WORD.findall(_section(prompt, "### Reviewer papers"))}
        paper = {w.lower() for w in _WORD.findall(_section(prompt, "### Submission"))}
        overlap = len(reviewer & paper) / max(len(paper), 1)
        if "0 to 100" in prompt:
            return f"The profile shares {len(reviewer & paper)} terms with the submission.\n{round(100 * overlap)}"
        return f"The profile shares {len(reviewer & paper)} terms with the submission.\n{1 + round(4 * overlap)}"
    if "### Paper" in prompt:
        title = _section(prompt, "### Paper").strip().split(":")[0]
        words = [w.lower() for w in _WORD.findall(title)]
        words = list(dict.fromkeys(words))[:6]
        while len(words) < 3:  # the prompt asks for 3 to 8
            words.append(f"topic {len(words) + 1}")
        return json.dumps({"keywords": words})
    return "I can only answer revbench prompts."
