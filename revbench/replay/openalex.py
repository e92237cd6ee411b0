"""OpenAlex: the SYNTHETIC world's papers as works, by arXiv's DOI (``10.48550/arXiv.<id>``) or by
work id, and as lists by a ``doi:`` or ``openalex:`` filter of OR'ed values with cursor paging; the
people as authors, one by id or listed by an ``openalex:`` filter.

With the world's graph (``graph/``), a work carries ``referenced_works`` (the W ids of the
works it cites inside the world; OpenAlex lists only works it knows), its topics with domain, field
and subfield, and authorships whose institutions carry ROR ids beside the name variant the paper
wrote; each author has an OpenAlex id made from the person, never from the name (which would
merge the world's homonyms), except that the people the graph's ``openalex_profiles`` splits have
some papers under a second id, and some authorships show no ORCID although the person has one;
``/authors/<id>`` answers their affiliations with years (under either id). A world
without a graph answers works with none of these. Anything else is answered as OpenAlex answers
it: an unknown DOI or id with its HTML 404 page, a filter it cannot read with its 400 JSON error.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router

from revbench.replay.context import ReplayContext, replay_of

if TYPE_CHECKING:
    from revbench.synth.graph_files import GraphStore

NOT_FOUND_HTML = (b"<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n<p>The "
                  b"requested URL was not found on the server. If you entered the URL manually please check your "
                  b"spelling and try again.</p>\n")
"""OpenAlex's answer to an unknown DOI or id, byte for byte (recorded in ../shared/external/real-responses/openalex)."""
ARXIV_DOI = "10.48550/arxiv."
MAX_OR_VALUES = 100
"""Values OR'ed in one filter, as OpenAlex documents it (developers.openalex.org, "Filter")."""
WORK_FILTERS = ("doi", "openalex", "ids.openalex")
AUTHOR_FILTERS = ("openalex", "ids.openalex")
_TAG = {name: re.compile(f"<{name}>(.*?)</{name}>", re.S) for name in ("title", "published", "name")}


def work_id(arxiv_id: str) -> str:
    """The world's stable OpenAlex id of a paper."""
    return "W9" + str(int(hashlib.sha1(arxiv_id.encode()).hexdigest()[:12], 16) % 10**9).zfill(9)


def author_id(person_id: str) -> str:
    """The world's stable OpenAlex id of a person."""
    return "A9" + str(int(hashlib.sha1(person_id.encode()).hexdigest()[:12], 16) % 10**9).zfill(9)


def _cited_id(ref: dict[str, Any]) -> str:
    if ref["arxiv_id"]:
        return work_id(ref["arxiv_id"])
    return "W8" + str(int(ref["s2_id"][:12], 16) % 10**9).zfill(9)


def _institution(inst: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"https://openalex.org/{inst['openalex_id']}", "display_name": inst["name"],
            "ror": f"https://ror.org/{inst['ror']}", "country_code": inst["country"], "type": inst["type"],
            "lineage": [f"https://openalex.org/{inst['openalex_id']}"]}


def with_graph(work: dict[str, Any], arxiv_id: str, graph: GraphStore) -> dict[str, Any]:
    """The work with what the graph knows of it: references, topics, authors' ids and institutions."""
    refs = [_cited_id(r) for r in graph.references(arxiv_id) if r["in_world"]]
    topics = (graph.topics(arxiv_id) or {}).get("openalex", [])
    insts = graph.institutions
    year = work["publication_year"]
    second, no_orcid = graph.openalex_profiles()
    for position, (authorship, pid) in enumerate(zip(work["authorships"], graph.authors(arxiv_id), strict=False)):
        person = graph.person(pid) or {}
        orcid = None if f"{arxiv_id}:{position}" in no_orcid else person.get("orcid")
        profile = author_id(f"{pid}#2" if arxiv_id in second.get(pid, ()) else pid)
        authorship["author"] = {"id": f"https://openalex.org/{profile}", "display_name": person.get("name"),
                                "orcid": f"https://orcid.org/{orcid}" if orcid else None}
        now = [a for a in graph.affiliations(pid) if year is None or a["first_year"] <= year <= a["last_year"]]
        raw = []
        for a in now:
            variants = insts[a["inst"]]["variants"]
            raw.append(variants[int(hashlib.sha1(f"{arxiv_id}/{position}".encode()).hexdigest()[:6], 16) % len(variants)])
        authorship["institutions"] = [_institution(insts[a["inst"]]) for a in now]
        authorship["countries"] = sorted({insts[a["inst"]]["country"] for a in now if insts[a["inst"]]["country"]})
        authorship["raw_affiliation_strings"] = raw
        authorship["affiliations"] = [{"raw_affiliation_string": r, "institution_ids": [_institution(insts[a["inst"]])["id"]]}
                                      for r, a in zip(raw, now, strict=True)]
    return {**work, "referenced_works": [f"https://openalex.org/{w}" for w in refs], "referenced_works_count": len(refs),
            "topics": topics, "primary_topic": topics[0] if topics else None}


def world_author(graph: GraphStore, pid: str, aid: str) -> dict[str, Any]:
    """A person as OpenAlex's ``/authors/<id>`` answers: their affiliations, each with its years."""
    person, insts = graph.person(pid) or {}, graph.institutions
    orcid = person.get("orcid")
    affs = [{"institution": _institution(insts[a["inst"]]), "years": list(range(a["last_year"], a["first_year"] - 1, -1))}
            for a in graph.affiliations(pid)]
    return {"id": f"https://openalex.org/{aid}", "display_name": person["name"],
            "orcid": f"https://orcid.org/{orcid}" if orcid else None, "affiliations": affs,
            "last_known_institutions": [aff["institution"] for aff in affs[:1]]}


def world_work(arxiv_id: str, entry: str) -> dict[str, Any]:
    def first(tag: str) -> str:
        m = _TAG[tag].search(entry)
        return html.unescape(" ".join(m.group(1).split())) if m else ""

    doi = f"https://doi.org/10.48550/arxiv.{arxiv_id}"
    published = first("published")[:10]
    wid = work_id(arxiv_id)
    names = [html.unescape(n) for n in _TAG["name"].findall(entry)]
    return {
        "id": f"https://openalex.org/{wid}", "doi": doi, "title": first("title"), "display_name": first("title"),
        "publication_year": int(published[:4]) if published[:4].isdigit() else None,
        "publication_date": published or None, "ids": {"openalex": f"https://openalex.org/{wid}", "doi": doi},
        "type": "preprint", "authorships": [
            {"author_position": "first" if i == 0 else "last" if i == len(names) - 1 else "middle",
             "author": {"id": None, "display_name": n, "orcid": None}, "institutions": [], "countries": [],
             "is_corresponding": False, "raw_author_name": n, "raw_affiliation_strings": [], "affiliations": []}
            for i, n in enumerate(names)],
        "primary_topic": None, "topics": [], "referenced_works_count": 0, "referenced_works": [],
        "abstract_inverted_index": None,
    }


class _Works:
    """The world's papers as OpenAlex works, indexed once by DOI and by work id."""

    def __init__(self, replay: ReplayContext):
        self.by_doi: dict[str, tuple[str, str]] = {}
        self.by_id: dict[str, str] = {}
        world = replay.world
        self.graph = world.graph if world else None
        # A person OpenAlex split answers under both ids (its ``#2`` profile id is made from the person too).
        self.authors = ({author_id(key): pid for pid in self.graph.person_ids() for key in (pid, f"{pid}#2")}
                        if self.graph else {})
        for entries in (world.by_category.values() if world else []):
            for _date, arxiv_id, entry in entries:
                self.by_doi[ARXIV_DOI + arxiv_id.lower()] = (arxiv_id, entry)
                self.by_id[work_id(arxiv_id)] = ARXIV_DOI + arxiv_id.lower()

    def find(self, key: str) -> dict[str, Any] | None:
        k = key.strip()
        for prefix in ("https://doi.org/", "http://doi.org/", "doi:", "https://openalex.org/"):
            if k.lower().startswith(prefix):
                k = k[len(prefix):]
        doi = self.by_id.get(k.upper(), k.lower())
        hit = self.by_doi.get(doi)
        if hit is None:
            return None
        return with_graph(world_work(*hit), hit[0], self.graph) if self.graph else world_work(*hit)

    def author(self, key: str) -> dict[str, Any] | None:
        aid = key.strip().rpartition("/")[2].upper()
        pid = self.authors.get(aid)
        return world_author(self.graph, pid, aid) if pid and self.graph else None


def _selected(work: dict[str, Any], select: str | None) -> dict[str, Any]:
    keys = [k.strip() for k in (select or "").split(",") if k.strip()]
    return {k: work[k] for k in keys if k in work} if keys else work


def _bad_request(message: str) -> bytes:
    return json.dumps({"error": "Invalid query parameters error.", "message": message}).encode()



def _works(replay: ReplayContext) -> _Works:
    """This server's works and authors, indexed on first use (the world is fixed for its life)."""
    return replay.service_state("openalex.works", lambda: _Works(replay))


async def _entity(request: Request, kind: str, found: dict[str, Any] | None) -> Response:
    """One work or author as OpenAlex answers it (``select`` honoured), or its HTML 404."""
    replay = replay_of(request)
    key = f"{kind}:{request.path_params['key']}"
    if found is None:
        return await replay.respond("openalex", key, 404, NOT_FOUND_HTML, "text/html; charset=utf-8")
    body = json.dumps(_selected(found, request.query_params.get("select")), ensure_ascii=False).encode()
    return await replay.respond("openalex", key, 200, body, "application/json")


async def work(request: Request) -> Response:
    """``GET /openalex/works/<key>``: one work, by DOI or work id."""
    return await _entity(request, "work", _works(replay_of(request)).find(request.path_params["key"]))


async def author(request: Request) -> Response:
    """``GET /openalex/authors/<id>``: one author."""
    return await _entity(request, "author", _works(replay_of(request)).author(request.path_params["key"]))


async def _listing(request: Request, kind: str, find: Callable[[_Works, str], dict[str, Any] | None],
                   names: tuple[str, ...]) -> Response:
    """``GET /openalex/<kind>?filter=<name>:v1|v2|...`` in OpenAlex's list shape (``meta.count``,
    ``meta.next_cursor``, ``results``), by cursor or page; each value's record once, in the order
    asked. A filter name OpenAlex does not have for the entity, more values than its OR limit or a
    cursor it never gave is its 400 JSON error. ``find`` looks a value up in the server's index
    (built on the first lookup)."""
    replay = replay_of(request)
    q = request.query_params
    filt = q.get("filter", "")
    name, _, value = filt.partition(":")
    where = f"list:{kind}:{filt}"
    try:
        per_page = int(q.get("per-page", q.get("per_page", "25")))
        page = int(q.get("page", "1"))
    except ValueError:
        return await replay.respond("openalex", where, 400, _bad_request("per-page and page are numbers"),
                                    "application/json")
    values = [v for v in value.split("|") if v]
    if name.lower() not in names:
        why = (f"{name} is not a valid field for {kind} in the replay world, which answers "
               f"filter={'|'.join(names)}:<value>[|<value>...]")
    elif not values or len(values) > MAX_OR_VALUES or not 1 <= per_page <= 200:
        why = (f"filter {name} takes 1 to {MAX_OR_VALUES} values OR'ed with |, and per-page 1 to 200; "
               f"got {len(values)} values and per-page {per_page}")
    else:
        why = ""
    if why:
        return await replay.respond("openalex", where, 400, _bad_request(why), "application/json")
    found = list({r["id"]: r for v in values if (r := find(_works(replay), v)) is not None}.values())
    cursor = q.get("cursor")
    meta: dict[str, Any] = {"count": len(found), "db_response_time_ms": 1, "page": None, "per_page": per_page,
                            "groups_count": None}
    if cursor is None:
        start = (page - 1) * per_page
        meta["page"] = page
    else:
        start = 0 if cursor == "*" else int(cursor.removeprefix("o")) if re.fullmatch(r"o\d+", cursor) else -1
        if start < 0:
            return await replay.respond("openalex", where, 400, _bad_request(f"bad cursor {cursor!r}"),
                                        "application/json")
    results = [_selected(r, q.get("select")) for r in found[start:start + per_page]]
    if cursor is not None:
        # As OpenAlex does: a next cursor after every page with results, null after the empty one.
        meta["next_cursor"] = f"o{start + per_page}" if results else None
    body = json.dumps({"meta": meta, "results": results, "group_by": []}, ensure_ascii=False).encode()
    return await replay.respond("openalex", f"{where}:{cursor}:{page}:{per_page}", 200, body, "application/json")


async def works_list(request: Request) -> Response:
    """``GET /openalex/works?filter=doi:...|...`` (or ``openalex:``)."""
    return await _listing(request, "works", _Works.find, WORK_FILTERS)


async def authors_list(request: Request) -> Response:
    """``GET /openalex/authors?filter=openalex:...|...``."""
    return await _listing(request, "authors", _Works.author, AUTHOR_FILTERS)


async def unknown(request: Request) -> Response:
    """Any other ``/openalex/...`` path: OpenAlex's HTML 404."""
    return await replay_of(request).respond("openalex", f"other:{request.url.path}", 404, NOT_FOUND_HTML,
                                          "text/html; charset=utf-8")


router = Router([Route("/openalex/works", works_list, methods=["GET"]),
                 Route("/openalex/authors", authors_list, methods=["GET"]),
                 Route("/openalex/works/{key:path}", work, methods=["GET"]),
                 Route("/openalex/authors/{key:path}", author, methods=["GET"]),
                 Route("/openalex/{kind:path}", unknown, methods=["GET"])])
"""``GET /openalex/works/<key>``, ``GET /openalex/works?filter=doi:...|...`` (cursor or page paging),
``GET /openalex/authors/<id>`` and ``GET /openalex/authors?filter=openalex:...|...`` (the world's
graph's people), and the HTML 404 for anything else."""
