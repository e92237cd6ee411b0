"""Recorded exchanges the replay server answers before its synthetic world: a directory holding
``routes.json`` (our own index of recorded answers) and/or VCR cassettes (``*.yaml``, as vcrpy
and its ports write them), so a run can meet real services' recorded answers byte for byte.

Cassettes come in the dialects their recorders write: vcrpy's (``interactions``, ``status.code``,
``body.string`` as text or as ``!!binary`` bytes still compressed as the service sent them, with
their ``Content-Encoding``), vcr.py ports' (``status_code``, ``content``) and R ``vcr``'s
(``http_interactions``, a bare ``status`` or ``status.status_code``, the body already decoded though
``content-encoding: gzip`` is still among the headers). A compressed body is served decompressed:
the server sets its own transfer headers, ``Content-Encoding`` among them.

A recorded URL is moved onto the replay server's mount points by its host and path
(``api.semanticscholar.org/graph/v1/...`` -> ``/s2/graph/v1/...``, ``export.arxiv.org/api/query``
-> ``/arxiv/api/query``, ``arxiv.org/pdf/...`` -> ``/arxiv/pdf/...``, ``.../api/process...`` of
GROBID -> ``/grobid/api/...``, ``api.openalex.org/...`` -> ``/openalex/...``), its percent-escapes
decoded as the server decodes a request's path. A cassette request matches on method, path and its query
parameters except ``fields``, ``limit`` and ``max_results``: our clients choose their own fields
and page sizes, and a recorded page is an answer any page size may get. Identical recorded requests
are answered in their recorded order, the last one repeating, as VCR plays them back.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

from revbench.errors import InputError

# Headers that describe the recorded transfer, not the answer: the server sets its own.
_TRANSFER_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive", "date",
                     "server"}
# Query parameters a client chooses for itself; a recorded answer stands for any value of them.
_FREE_PARAMS = {"fields", "limit", "max_results"}


@dataclass
class RecordedRoute:
    """A recorded response and the request it answers."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    headers: dict[str, str]
    body: bytes
    body_contains: bytes | None = None
    """When set, the request's body must contain these bytes (tells uploads apart, e.g. PDFs to GROBID)."""

    def signature(self) -> tuple[Any, ...]:
        """What a request must show to get this answer; recordings sharing one are played in turn."""
        return self.method, self.path, tuple(sorted(self.query.items())), self.body_contains


def mount_path(url: str) -> tuple[str, dict[str, str]]:
    """A recorded URL's path on the replay server and its query parameters."""
    parts = urlsplit(url)
    host, path = parts.hostname or "", unquote(parts.path or "/")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if host.endswith("semanticscholar.org") and path.startswith("/graph/"):
        path = "/s2" + path
    elif host.endswith("arxiv.org") and (path.startswith("/api/query") or path.startswith("/pdf/")):
        path = "/arxiv" + path
    elif host == "api.openalex.org":
        path = "/openalex" + path
    elif "/api/process" in path or path.endswith("/api/isalive"):
        path = "/grobid" + path[path.index("/api/"):]
    return path, query


def _text(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value or "").encode("utf-8")


def _decoded(body: bytes, encoding: str) -> bytes:
    """A body as the service meant it: unpacked when it is still compressed (vcrpy keeps the bytes
    as sent; R's vcr keeps them decoded under the same header, so the bytes decide)."""
    kind = encoding.strip().lower()
    if kind in ("gzip", "x-gzip") and body[:2] == b"\x1f\x8b":
        return gzip.decompress(body)
    if kind == "deflate" and body[:1] == b"\x78":
        return zlib.decompress(body)
    return body


def _vcr_route(interaction: Any, where: str) -> RecordedRoute:
    try:
        request, response = interaction["request"], interaction["response"]
        path, query = mount_path(request["uri"])
        status = response.get("status")
        code = (status.get("code", status.get("status_code")) if isinstance(status, dict)
                else (status or response.get("status_code", 200)))
        body = response.get("body")
        raw = body.get("string") if isinstance(body, dict) else response.get("content", body)
        headers, encoding = {}, ""
        for name, values in (response.get("headers") or {}).items():
            value = values[0] if isinstance(values, list) and values else values
            if name.lower() == "content-encoding" and value is not None:
                encoding = str(value)
            if name.lower() not in _TRANSFER_HEADERS and value is not None:
                headers[name.lower()] = str(value)
        return RecordedRoute(method=str(request.get("method", "GET")).upper(), path=path,
                             query={k: v for k, v in query.items() if k not in _FREE_PARAMS}, status=int(code),
                             headers=headers, body=_decoded(_text(raw), encoding))
    except (KeyError, TypeError, ValueError, AttributeError, OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{where}: not a VCR interaction (request.uri, response.status and body expected: {exc})") from None


def load_cassette(path: Path) -> list[RecordedRoute]:
    """Every interaction of one VCR cassette, in recorded order."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable YAML cassette ({str(exc).splitlines()[0]})") from None
    # vcrpy writes `interactions`, R's vcr `http_interactions`.
    interactions = (data.get("interactions", data.get("http_interactions")) if isinstance(data, dict) else None)
    if not isinstance(interactions, list):
        raise InputError(f"{path}: a VCR cassette has a list of 'interactions' (R's vcr: 'http_interactions')")
    return [_vcr_route(x, f"{path} interaction {i}") for i, x in enumerate(interactions)]


def load_routes_index(directory: Path) -> list[RecordedRoute]:
    """``routes.json``: ``[{method, path, query?, status?, headers?, body_file?, body_contains?}]``."""
    index_path = directory / "routes.json"
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{index_path}: not a readable JSON list of routes ({exc})") from None
    routes = []
    for i, r in enumerate(index):
        if not isinstance(r, dict) or "path" not in r:
            raise InputError(f"{index_path} item {i}: expected an object with at least 'path'")
        body_file = directory / r["body_file"] if r.get("body_file") else None
        if body_file is not None and not body_file.is_file():
            raise InputError(f"{index_path} item {i}: body_file {r['body_file']!r} is not in {directory}")
        routes.append(RecordedRoute(
            method=r.get("method", "GET").upper(), path=r["path"],
            query={k: str(v) for k, v in (r.get("query") or {}).items()}, status=int(r.get("status", 200)),
            headers={k.lower(): str(v) for k, v in (r.get("headers") or {}).items()},
            body=body_file.read_bytes() if body_file else b"",
            body_contains=r["body_contains"].encode("utf-8") if r.get("body_contains") else None,
        ))
    return routes


def load_recordings(directory: Path) -> list[RecordedRoute]:
    """Everything one directory records: ``routes.json`` first, then each cassette by file name."""
    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory of recorded answers")
    routes = load_routes_index(directory) if (directory / "routes.json").exists() else []
    for cassette in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        routes += load_cassette(cassette)
    if not routes:
        raise InputError(f"{directory}: neither routes.json nor a *.yaml VCR cassette")
    return routes


class Playback:
    """Picks the recorded answer for a request: the first signature that matches, and among
    recordings of that signature the next one in turn (the last one repeats)."""

    def __init__(self, routes: list[RecordedRoute]):
        self.groups: dict[tuple[Any, ...], list[RecordedRoute]] = {}
        for r in routes:
            self.groups.setdefault(r.signature(), []).append(r)
        self.played: dict[tuple[Any, ...], int] = {}
        # Fixed by the recordings: asked on every request, so worked out once.
        self._body_keys = {(sig[0], sig[1]) for sig, rs in self.groups.items() if rs[0].body_contains}

    def wants_body(self, method: str, path: str) -> bool:
        """Whether telling this request's answers apart needs its body."""
        return (method, path) in self._body_keys

    def pick(self, method: str, path: str, query: dict[str, str], body: bytes | None) -> RecordedRoute | None:
        """The answer for this request, or None when nothing recorded matches."""
        for sig, rs in self.groups.items():
            r = rs[0]
            if (r.method == method and r.path == path and all(query.get(k) == v for k, v in r.query.items())
                    and (r.body_contains is None or (body is not None and r.body_contains in body))):
                n = self.played.get(sig, 0)
                self.played[sig] = n + 1
                return rs[min(n, len(rs) - 1)]
        return None
