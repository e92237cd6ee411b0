"""GROBID: the TEI header of each of the world's PDFs, looked up by the PDF's hash; its full text is
the header with a body citing the paper's references and their ``<listBibl>``, from the world's
graph (an empty list for a world without one)."""

from __future__ import annotations

import hashlib
import re
from typing import Any
from xml.sax.saxutils import escape

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from revbench.replay.context import replay_of


async def alive(request: Request) -> Response:
    """``GET /grobid/api/isalive``."""
    return Response(b"true", media_type="text/plain")


async def version(request: Request) -> Response:
    """``GET /grobid/api/version``: the release this server says it is."""
    # Recent GROBID answers its ServiceInfo as JSON; older servers answered the bare version as
    # text. Both forms are given here (text below 0.7), as the doctor must read both.
    v = replay_of(request).grobid_version
    if tuple(int(n) for n in re.findall(r"\d+", v)[:2]) < (0, 7):
        return Response(v.encode(), media_type="text/plain")
    return JSONResponse({"version": v, "revision": "replay"})


async def _answer(request: Request, fulltext: bool) -> Response:
    """The TEI of the uploaded PDF: its header, or (``fulltext``) with its body and references."""
    replay = replay_of(request)
    form = await request.form()
    upload = form.get("input")
    if upload is None or isinstance(upload, str):
        return Response(b"[BAD_INPUT_DATA] no input file", status_code=400, media_type="text/plain")
    sha = hashlib.sha256(await upload.read()).hexdigest()
    # Full text has its own fault schedule, so asking for it leaves the headers' faults as they were.
    key = f"fulltext:{sha}" if fulltext else sha
    tei = replay.world.teis.get(sha) if replay.world else None
    if tei is None:
        return await replay.respond("grobid", key, 500, b"[BAD_INPUT_DATA] PDF to XML conversion failed", "text/plain")
    if fulltext:
        graph = replay.world.graph if replay.world else None
        arxiv_id = replay.world.arxiv_of_sha.get(sha) if replay.world else None
        refs = graph.references(arxiv_id) if graph and arxiv_id else []
        tei = with_references(tei, refs) if refs else with_empty_references(tei)
    return await replay.respond("grobid", key, 200, tei, "application/xml; charset=UTF-8")


async def header(request: Request) -> Response:
    """``POST /grobid/api/processHeaderDocument``."""
    return await _answer(request, fulltext=False)


async def fulltext(request: Request) -> Response:
    """``POST /grobid/api/processFulltextDocument``."""
    return await _answer(request, fulltext=True)


router = Router([Route("/grobid/api/isalive", alive, methods=["GET"]), Route("/grobid/api/version", version, methods=["GET"]),
                 Route("/grobid/api/processHeaderDocument", header, methods=["POST"]),
                 Route("/grobid/api/processFulltextDocument", fulltext, methods=["POST"])])
"""``GET /grobid/api/isalive``, ``GET /grobid/api/version``, ``POST /grobid/api/processHeaderDocument``
and ``POST /grobid/api/processFulltextDocument``."""


def with_empty_references(tei: bytes) -> bytes:
    """The header TEI as ``processFulltextDocument`` answers it for a paper that cites nothing: the
    world has no citation graph yet, so its reference list is empty."""
    # Every world's TEI comes from revbench.synth.render.tei_header, whose <text/> is empty.
    return tei.replace(b"<text/>", b'<text><back><div type="references"><listBibl/></div></back></text>', 1)


def _bibl(n: int, ref: dict[str, Any]) -> str:
    """One ``<biblStruct>`` as GROBID writes it, with the gaps the graph drew for it: a DOI typed
    ``DOI`` or left out, an arXiv id in an untyped ``<idno>`` or only in a note, no title, no date."""
    seen = ref["grobid"]
    authors = "".join(f'<author><persName><forename type="first">{escape(first)}</forename>'
                      f"<surname>{escape(last)}</surname></persName></author>"
                      for first, _, last in (a.partition(" ") for a in ref["authors"]))
    title = f'<title level="a" type="main">{escape(ref["title"])}</title>' if seen["title"] and ref["title"] else ""
    idnos = f'<idno type="DOI">{escape(ref["doi"])}</idno>' if seen["typed_doi"] and ref["doi"] else ""
    notes = ""
    if seen["arxiv_in"] == "idno":
        idnos += f"<idno>arXiv:{escape(ref['arxiv'])}</idno>"
    elif seen["arxiv_in"] == "note":
        notes = f'<note type="report_type">arXiv preprint arXiv:{escape(ref["arxiv"])}</note>'
    date = f'<date type="published" when="{ref["year"]}" />' if seen["date"] and ref["year"] else ""
    return (f'<biblStruct xml:id="b{n}"><analytic>{title}{authors}{idnos}</analytic>'
            f"<monogr><title/><imprint>{date}</imprint></monogr>{notes}</biblStruct>")


def with_references(tei: bytes, refs: list[dict[str, Any]]) -> bytes:
    """The header TEI as ``processFulltextDocument`` answers it: a body citing each reference as
    often as the graph says it is cited, and the reference list in the graph's order."""
    body = "".join(f'<p>SYNTHETIC sentence citing <ref type="bibr" target="#b{n}">[{n + 1}]</ref>.</p>'
                   for n, ref in enumerate(refs) for _ in range(ref["n_contexts"]))
    bibl = "".join(_bibl(n, r) for n, r in enumerate(refs))
    text = f'<text><body><div>{body}</div></body><back><div type="references"><listBibl>{bibl}</listBibl></div></back></text>'
    return tei.replace(b"<text/>", text.encode("utf-8"), 1)
