"""One local server that stands in for arXiv, Semantic Scholar, arxiv.org PDFs and GROBID.

It answers from recorded fixtures (a ``routes.json`` index of recorded responses) first and
from a synthetic world directory second, and injects transient faults at a seeded rate. It
binds to loopback only.

Mount points (the base URLs the clients are given):
``/arxiv/api/query``, ``/s2/graph/v1``, ``/arxiv/pdf/<id>v<n>``, ``/grobid/api/...``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import socket
import threading
import time
from dataclasses import dataclass
from bisect import bisect_left, bisect_right
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from revbench.replay.faults import FaultInjector, corrupt
from revbench.settings import ReplaySettings
from revbench.synth import render

_CAT = re.compile(r"cat:(\S+)")
_WINDOW = re.compile(r"lastUpdatedDate:\[(\d{12}) TO (\d{12})\]")


@dataclass
class RecordedRoute:
    """A recorded response and the request it answers."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    headers: dict[str, str]
    body: bytes


def load_fixtures(directory: Path) -> list[RecordedRoute]:
    """Read ``routes.json``: ``[{method, path, query?, status?, headers?, body_file}]``."""
    index = json.loads((directory / "routes.json").read_text())
    routes = []
    for r in index:
        routes.append(
            RecordedRoute(
                method=r.get("method", "GET").upper(),
                path=r["path"],
                query={k: str(v) for k, v in (r.get("query") or {}).items()},
                status=int(r.get("status", 200)),
                headers=r.get("headers", {}),
                body=(directory / r["body_file"]).read_bytes() if r.get("body_file") else b"",
            )
        )
    return routes


class WorldStore:
    """The synthetic world, indexed for the queries clients make."""

    def __init__(self, world_dir: Path, as_of: datetime | None = None):
        self.dir = world_dir
        self.manifest = json.loads((world_dir / "world.json").read_text())
        arxiv = pl.read_parquet(world_dir / "arxiv.parquet")
        self.by_category: dict[str, list[tuple[datetime, str, str]]] = {}
        for row in arxiv.iter_rows(named=True):
            visible = [v for v in row["versions"] if as_of is None or v["date"] <= as_of]
            if not visible:
                continue
            latest = visible[-1]
            for cat in row["categories"]:
                self.by_category.setdefault(cat, []).append((latest["date"], row["arxiv_id"], latest["entry"]))
        for entries in self.by_category.values():
            entries.sort(key=lambda e: (e[0], e[1]))
        self._dates: dict[str, list[datetime]] = {}
        s2 = pl.read_parquet(world_dir / "s2_papers.parquet")
        self.s2_papers = dict(zip(s2["arxiv_id"].to_list(), s2["json"].to_list(), strict=True))
        authors = pl.read_parquet(world_dir / "s2_authors.parquet")
        self.s2_authors = dict(zip(authors["author_id"].to_list(), authors["json"].to_list(), strict=True))
        self.pdfs: dict[str, bytes] = {}
        self.teis: dict[str, bytes] = {}
        docs_path = world_dir / "documents.parquet"
        if docs_path.exists():
            docs = pl.read_parquet(docs_path)
            for row in docs.iter_rows(named=True):
                self.pdfs[f"{row['arxiv_id']}v{row['version']}"] = row["pdf"]
                self.teis[row["pdf_sha256"]] = row["tei"]

    def query(self, category: str, lo: datetime, hi: datetime) -> list[str]:
        entries = self.by_category.get(category, [])
        dates = self._dates.setdefault(category, [e[0] for e in entries])
        # hi is a whole minute; every timestamp inside that minute belongs to the window.
        return [e[2] for e in entries[bisect_left(dates, lo) : bisect_right(dates, hi + timedelta(seconds=59.999999))]]


def _ts(s: str) -> datetime:
    return datetime.strptime(s, "%Y%m%d%H%M").replace(tzinfo=UTC)


class ReplayApp:
    """The ASGI app and its state."""

    def __init__(
        self,
        settings: ReplaySettings,
        world_dir: Path | None = None,
        fixtures_dir: Path | None = None,
        as_of: datetime | None = None,
        fault_kinds: dict[str, tuple[str, ...]] | None = None,
    ):
        self.settings = settings
        self.world = WorldStore(world_dir, as_of=as_of) if world_dir else None
        self.fixtures = load_fixtures(fixtures_dir) if fixtures_dir else []
        self.faults = FaultInjector(
            settings.fault_rate, settings.fault_seed, settings.max_consecutive_faults, kinds=fault_kinds
        )
        self.app = Starlette(
            routes=[
                Route("/arxiv/api/query", self.arxiv_query, methods=["GET"]),
                Route("/arxiv/pdf/{name}", self.pdf, methods=["GET"]),
                Route("/s2/graph/v1/paper/batch", self.s2_batch, methods=["POST"]),
                Route("/s2/graph/v1/author/{author_id}/papers", self.s2_author_papers, methods=["GET"]),
                Route("/grobid/api/isalive", self.grobid_alive, methods=["GET"]),
                Route("/grobid/api/processHeaderDocument", self.grobid_header, methods=["POST"]),
                Route("/llm/v1/chat/completions", self.llm_chat, methods=["POST"]),
                Route("/_replay/stats", self.stats, methods=["GET"]),
            ]
        )
        # Recorded fixtures take precedence over the world and may answer any path.
        self.app.add_middleware(_FixtureMiddleware, replay=self)

    async def respond(self, service: str, key: str, status: int, body: bytes, content_type: str,
                      headers: dict[str, str] | None = None) -> Response:
        """Answer, unless the fault schedule says this attempt fails."""
        kind = self.faults.decide(service, key)
        if kind is None:
            return Response(body, status_code=status, media_type=content_type, headers=headers)
        if kind == "429":
            return Response(b"rate limited", status_code=429, media_type="text/plain",
                            headers={"Retry-After": str(self.settings.retry_after_seconds)})
        if kind in ("500", "503"):
            return Response(b"service unavailable", status_code=int(kind), media_type="text/plain")
        if kind == "timeout":
            await asyncio.sleep(self.settings.timeout_delay_seconds)
            return Response(body, status_code=status, media_type=content_type, headers=headers)
        if kind == "truncated":
            return _CutOffResponse(body, status_code=status, media_type=content_type, headers=headers)
        return Response(corrupt(body, kind, content_type), status_code=status, media_type=content_type, headers=headers)

    def _need_world(self) -> WorldStore:
        if self.world is None:
            raise LookupError("no world loaded")
        return self.world

    async def arxiv_query(self, request: Request) -> Response:
        q = request.query_params
        query = q.get("search_query", "")
        start = int(q.get("start", 0))
        per_page = int(q.get("max_results", 10))
        cat, window = _CAT.search(query), _WINDOW.search(query)
        entries: list[str] = []
        if self.world and cat and window:
            entries = self.world.query(cat.group(1), _ts(window.group(1)), _ts(window.group(2)))
        page = entries[start : start + per_page]
        body = render.atom_feed(page, query, len(entries), start, per_page)
        key = f"{query}|{start}|{per_page}"
        return await self.respond("arxiv", key, 200, body, "application/atom+xml; charset=utf-8")

    async def pdf(self, request: Request) -> Response:
        name = request.path_params["name"].removesuffix(".pdf")
        data = self.world.pdfs.get(name) if self.world else None
        if data is None:
            return await self.respond("pdf", name, 404, b"not found", "text/plain")
        return await self.respond("pdf", name, 200, data, "application/pdf")

    async def s2_batch(self, request: Request) -> Response:
        world = self._need_world()
        try:
            ids = (await request.json())["ids"]
        except (json.JSONDecodeError, KeyError, TypeError):
            return JSONResponse({"error": "body must be {\"ids\": [...]}"}, status_code=400)
        if len(ids) > 500:
            return JSONResponse({"error": "at most 500 ids"}, status_code=400)
        items = []
        for pid in ids:
            raw = world.s2_papers.get(pid.removeprefix("ARXIV:")) if pid.startswith("ARXIV:") else None
            items.append(raw if raw is not None else "null")
        body = ("[" + ",".join(items) + "]").encode("utf-8")
        key = hashlib.sha1(",".join(ids).encode()).hexdigest()
        return await self.respond("s2", key, 200, body, "application/json")

    async def s2_author_papers(self, request: Request) -> Response:
        world = self._need_world()
        author_id = request.path_params["author_id"]
        raw = world.s2_authors.get(author_id)
        if raw is None:
            return await self.respond("s2", f"author:{author_id}", 404, b'{"error":"Author not found"}', "application/json")
        papers = json.loads(raw)
        offset = int(request.query_params.get("offset", 0))
        limit = min(int(request.query_params.get("limit", 100)), 1000)
        chunk = papers[offset : offset + limit]
        page: dict[str, Any] = {"offset": offset, "data": chunk}
        if offset + limit < len(papers):
            page["next"] = offset + limit
        body = json.dumps(page, ensure_ascii=False).encode("utf-8")
        return await self.respond("s2", f"author:{author_id}:{offset}:{limit}", 200, body, "application/json")

    async def grobid_alive(self, request: Request) -> Response:
        return Response(b"true", media_type="text/plain")

    async def grobid_header(self, request: Request) -> Response:
        form = await request.form()
        upload = form.get("input")
        if upload is None or isinstance(upload, str):
            return Response(b"[BAD_INPUT_DATA] no input file", status_code=400, media_type="text/plain")
        pdf = await upload.read()
        sha = hashlib.sha256(pdf).hexdigest()
        tei = self.world.teis.get(sha) if self.world else None
        if tei is None:
            return await self.respond("grobid", sha, 500, b"[BAD_INPUT_DATA] PDF to XML conversion failed", "text/plain")
        return await self.respond("grobid", sha, 200, tei, "application/xml; charset=UTF-8")

    async def llm_chat(self, request: Request) -> Response:
        """An OpenAI-compatible stand-in: answers the project's prompts deterministically from
        word overlap (scores) or title words (keywords), in the format the prompts ask for."""
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
        return await self.respond("llm", key, 200, json.dumps(answer).encode(), "application/json")

    async def stats(self, request: Request) -> Response:
        return JSONResponse(self.faults.stats())


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


class _CutOffResponse(Response):
    """Declares the whole body's length, sends half of it, and drops the connection: what a
    truncated transfer looks like to a client."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2], "more_body": True})


class _QuietCutOffs(logging.Filter):
    # uvicorn reports every deliberately unfinished response as an ASGI error.
    def filter(self, record: logging.LogRecord) -> bool:
        return "without completing response" not in record.getMessage()


logging.getLogger("uvicorn.error").addFilter(_QuietCutOffs())


class _FixtureMiddleware:
    """Serves recorded responses before the world routes see the request."""

    def __init__(self, app: Any, replay: ReplayApp):
        self.app = app
        self.replay = replay

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.replay.fixtures:
            request = Request(scope, receive)
            for r in self.replay.fixtures:
                if r.method == request.method and r.path == request.url.path and all(
                    request.query_params.get(k) == v for k, v in r.query.items()
                ):
                    ctype = r.headers.get("content-type", "application/octet-stream")
                    headers = {k: v for k, v in r.headers.items() if k.lower() != "content-type"}
                    service = service_of(r.path)
                    key = f"fixture:{r.method}:{r.path}:{sorted(request.query_params.items())}"
                    response = await self.replay.respond(service, key, r.status, r.body, ctype, headers)
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def service_of(path: str) -> str:
    """Which service a path belongs to (decides the fault kinds it can get)."""
    if path.startswith("/arxiv/pdf/"):
        return "pdf"
    head = path.strip("/").split("/")[0]
    return head if head in ("arxiv", "s2", "grobid", "llm") else "arxiv"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ReplayServer:
    """Runs a ``ReplayApp`` under uvicorn in a background thread of this process."""

    def __init__(self, replay: ReplayApp, host: str = "127.0.0.1", port: int = 0):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the replay server binds to loopback only")
        self.replay = replay
        self.host = host
        self.port = port or free_port(host)
        config = uvicorn.Config(replay.app, host=host, port=self.port, log_level="warning", access_log=False,
                                timeout_keep_alive=30)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ReplayServer:
        self._thread = threading.Thread(target=self.server.run, name="replay-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("replay server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def client_env(base: str) -> dict[str, str]:
    """Environment that points every client at a replay server at ``base``, with no pacing."""
    return {
        "REVBENCH_ARXIV__BASE_URL": f"{base}/arxiv/api/query",
        "REVBENCH_ARXIV__DELAY_SECONDS": "0",
        "REVBENCH_S2__BASE_URL": f"{base}/s2/graph/v1",
        "REVBENCH_S2__DELAY_SECONDS": "0",
        "REVBENCH_PDF__BASE_URL": f"{base}/arxiv",
        "REVBENCH_GROBID__BASE_URL": f"{base}/grobid",
        "REVBENCH_GROBID__BUSY_SLEEP_SECONDS": "0",
        "REVBENCH_LLM__BASE_URL": f"{base}/llm/v1",
    }
