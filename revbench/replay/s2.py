"""The Semantic Scholar Graph API: paper batches, author publication lists and papers' references."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from revbench.replay.context import ReplayContext, replay_of

if TYPE_CHECKING:
    from revbench.replay.world_store import WorldStore


def forbidden() -> Response:
    """What S2 answers a request whose x-api-key it does not know."""
    return JSONResponse({"message": "Forbidden"}, status_code=403)


def page(items: list[Any], offset: int, limit: int) -> dict[str, Any]:
    """One page of a paged S2 list, as S2 writes it: ``next`` only while items remain."""
    body: dict[str, Any] = {"offset": offset, "data": items[offset : offset + limit]}
    if offset + limit < len(items):
        body["next"] = offset + limit
    return body


def world_references(world: WorldStore, arxiv_id: str) -> list[Any]:
    """A world paper's references as S2 answers them, from the world's graph (``graph/``): each
    edge with its contexts, intents and isInfluential, the cited paper with its S2 id (null for an
    outside work S2 could not match, kept by its title) and external ids. A world without a graph
    answers an empty list."""
    refs = world.graph.references(arxiv_id) if world.graph else []
    out = []
    for n, ref in enumerate(refs):
        ids: dict[str, Any] = {}
        if ref["arxiv"]:
            ids["ArXiv"] = ref["arxiv"]
        if ref["doi"] and not ref["doi"].startswith("10.48550/"):
            ids["DOI"] = ref["doi"]
        contexts = [f"SYNTHETIC context {k + 1} citing [{n + 1}] in {arxiv_id}." for k in range(ref["n_contexts"])]
        out.append({"contexts": contexts, "intents": ref["intents"],
                    "contextsWithIntent": [{"context": c, "intents": ref["intents"]} for c in contexts],
                    "isInfluential": ref["is_influential"],
                    "citedPaper": {"paperId": ref["s2_id"], "externalIds": ids or None, "title": ref["title"],
                                   "year": ref["year"], "authors": [{"authorId": None, "name": a} for a in ref["authors"]]}})
    return out


def _with_fields_of_study(world: WorldStore, arxiv_id: str, raw: str) -> str:
    """A paper record with its fields of study from the world's graph, as S2 answers a batch that
    asks for them (``s2FieldsOfStudy`` with each category's source, ``fieldsOfStudy`` the external
    ones); ingest asks no such field, so what it stores and hashes is as before."""
    record = json.loads(raw)
    topics = world.graph.topics(arxiv_id) if world.graph else None
    fos = topics["s2"] if topics else None
    if not isinstance(record, dict) or fos is None:
        return raw
    external = [f["category"] for f in fos if f["source"] == "external"]
    return json.dumps({**record, "s2FieldsOfStudy": fos, "fieldsOfStudy": external or None,
                       "publicationTypes": ["JournalArticle"]}, ensure_ascii=False)


def _fields(edges: list[Any], fields: str | None) -> list[Any]:
    """The edges with only the asked ``fields`` (S2 leaves the others out; the cited paper always
    carries its ``paperId``); all of them when none are named."""
    if not fields:
        return edges
    asked = {f.strip() for f in fields.split(",") if f.strip()}
    paper = asked | {"paperId"}
    return [{**{k: v for k, v in e.items() if k in asked and k != "citedPaper"},
             "citedPaper": {k: v for k, v in e["citedPaper"].items() if k in paper}} for e in edges]



async def batch(request: Request) -> Response:
    """``POST /s2/graph/v1/paper/batch``: each asked id's record, or null."""
    replay = replay_of(request)
    if replay.wrong_key("s2", request):
        return forbidden()
    world = replay.world  # without a world no paper is known: each id answers null, as S2 does
    try:
        ids = (await request.json())["ids"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return JSONResponse({"error": "body must be {\"ids\": [...]}"}, status_code=400)
    if len(ids) > 500:
        return JSONResponse({"error": "at most 500 ids"}, status_code=400)
    items = []
    fields = request.query_params.get("fields") or ""
    for pid in ids:
        raw = world.s2_papers.get(pid.removeprefix("ARXIV:")) if world and pid.startswith("ARXIV:") else None
        if raw is not None and "s2FieldsOfStudy" in fields.split(","):
            raw = _with_fields_of_study(world, pid.removeprefix("ARXIV:"), raw)
        items.append(raw if raw is not None else "null")
    body = ("[" + ",".join(items) + "]").encode("utf-8")
    return await replay.respond("s2", hashlib.sha1(",".join(ids).encode()).hexdigest(), 200, body, "application/json")


async def author_papers(request: Request) -> Response:
    """``GET /s2/graph/v1/author/<id>/papers``: one page of an author's papers."""
    replay = replay_of(request)
    if replay.wrong_key("s2", request):
        return forbidden()
    world = replay.need_world()
    author_id = request.path_params["author_id"]
    raw = world.s2_authors.get(author_id)
    if raw is None:
        return await replay.respond("s2", f"author:{author_id}", 404, b'{"error":"Author not found"}', "application/json")
    papers = json.loads(raw)
    offset = int(request.query_params.get("offset", 0))
    limit = min(int(request.query_params.get("limit", 100)), 1000)
    body = json.dumps(page(papers, offset, limit), ensure_ascii=False).encode("utf-8")
    return await replay.respond("s2", f"author:{author_id}:{offset}:{limit}", 200, body, "application/json")


def _arxiv_id_of(replay: ReplayContext, world: WorldStore, paper_id: str) -> str | None:
    """The world paper S2 knows as ``paper_id`` (``ARXIV:<id>`` or its S2 id), or None."""
    if paper_id[:6].upper() == "ARXIV:":
        aid = paper_id[6:]
        return aid if aid in world.s2_papers else None
    by_s2_id: dict[str, str] = replay.service_state("s2.by_s2_id", dict)
    if not by_s2_id:  # the world is fixed for the server's life: indexed once, on first use
        for aid, raw in world.s2_papers.items():
            record = json.loads(raw)
            if isinstance(record, dict) and isinstance(record.get("paperId"), str):
                by_s2_id[record["paperId"]] = aid
    return by_s2_id.get(paper_id)


async def references(request: Request) -> Response:
    """``GET /s2/graph/v1/paper/<id>/references``: one page of a paper's references."""
    replay = replay_of(request)
    if replay.wrong_key("s2", request):
        return forbidden()
    world = replay.need_world()
    paper_id = request.path_params["paper_id"]
    try:
        offset = int(request.query_params.get("offset", 0))
        limit = int(request.query_params.get("limit", 100))
    except ValueError:
        return JSONResponse({"error": "offset and limit must be integers"}, status_code=400)
    if offset < 0 or not 1 <= limit <= 1000:
        return JSONResponse({"error": "offset must be >= 0 and limit between 1 and 1000"}, status_code=400)
    aid = _arxiv_id_of(replay, world, paper_id)
    if aid is None:
        body = json.dumps({"error": f"Paper with id {paper_id} not found"}).encode("utf-8")
        return await replay.respond("s2", f"references:{paper_id}", 404, body, "application/json")
    refs = _fields(world_references(world, aid), request.query_params.get("fields"))
    body = json.dumps(page(refs, offset, limit), ensure_ascii=False).encode("utf-8")
    return await replay.respond("s2", f"references:{paper_id}:{offset}:{limit}", 200, body, "application/json")


router = Router([Route("/s2/graph/v1/paper/batch", batch, methods=["POST"]),
                 Route("/s2/graph/v1/author/{author_id}/papers", author_papers, methods=["GET"]),
                 Route("/s2/graph/v1/paper/{paper_id:path}/references", references, methods=["GET"])])
"""``POST /s2/graph/v1/paper/batch``, ``GET /s2/graph/v1/author/<id>/papers`` and
``GET /s2/graph/v1/paper/<id>/references``."""
