"""Identity keys, minted in one place: the block key of a name, the canonical email, the exact-match
key of an affiliation, the key of an institution and of a graph person, and how a graph person is
tied to the warehouse's author ids. Warehouses store every one of them (``author_links.block_key``,
``institutions.institution_key``, ``author_affiliations.person_key``, ...), so a rule changed here
splits stored data from new mentions: ``tests/ingest/test_keys_pinned.py`` pins their values.

This module sits at the bottom of the import graph: it imports the standard library and polars,
nothing of revbench, so the clients (``revbench.clients.openalex_graph``), the tasks
(``tasks.disambiguate``, ``tasks.coi``, ``tasks.pools``) and the warehouse (``warehouse.ratings``)
all mint the same keys without importing one another. ``tests/test_structure_keys.py`` keeps the
key functions defined here alone.

Rules (each has a test in ``tests/ingest/test_normalize.py``):

- **Names**: Unicode folded (NFKD, accents dropped, ``ß`` -> ``ss``, ``ø`` -> ``o``), lower-cased,
  punctuation and hyphens become spaces, ``"Family, Given"`` is turned around. The block key is
  ``family|initial``: the last token and the first letter of the first token, so ``J. Smith``,
  ``John Smith`` and ``Smith, John`` share a block.
- **Emails**: trimmed and lower-cased; ``+tag`` dropped from the local part (plus-addressing);
  for gmail alone (where it is certain) dots are dropped and ``googlemail.com`` is
  ``gmail.com``. Other aliases of a domain (``cs.x.edu`` vs ``x.edu``) are left apart: they are
  not certain.
- **Affiliations**: the institution part is preferred to the department (GROBID's
  ``orgName[@type=institution]``; in a free string, the segment that names a university,
  institute, school or company rather than a department); folded like names; common
  abbreviations expanded (``univ`` -> ``university``, ``inst`` -> ``institute``, ``tech`` ->
  ``technology``); ``the`` dropped, and ``&`` too, as all punctuation. The alias table of known variants
  (``tasks.normalize.canonical_institution``) is for the fallback decider only, never for a key.
- **Institutions**: ``ror:<bare ROR id>`` when the ROR id is known, else ``name:<affiliation key>``.
- **Graph people**: ``openalex:<author id>``, ``s2:<author id>`` or ``orcid:<iD>``.
"""

from __future__ import annotations

import re
import unicodedata

import polars as pl

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
# Letters NFKD does not decompose into a base letter plus accent.
_SPECIAL = str.maketrans({"ß": "ss", "ø": "o", "Ø": "o", "æ": "ae", "Æ": "ae", "œ": "oe", "ł": "l", "Ł": "l", "đ": "d"})

_ABBREV = {"univ": "university", "uni": "university", "inst": "institute", "tech": "technology", "natl": "national",
           "intl": "international", "dept": "department", "lab": "laboratory", "labs": "laboratories", "sci": "science"}
_DEPARTMENT = re.compile(r"\b(department|dept|school of|faculty|division|group|laboratory for|chair)\b", re.IGNORECASE)
_INSTITUTION = re.compile(r"\b(universit|institut|college|school|polytechn|academy|research|labs?\b|inc\b|corp|ltd)",
                          re.IGNORECASE)


def fold(text: str) -> str:
    """Lower-case, accents and special letters folded, everything but letters and digits
    collapsed to single spaces."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_SPECIAL).casefold())
    ascii_only = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _NON_ALNUM.sub(" ", ascii_only).strip()


def name_tokens(name: str) -> list[str]:
    """Given names first, family name last."""
    if "," in name:
        family, _, given = name.partition(",")
        name = f"{given} {family}"
    return fold(name).split()


def block_key(name: str) -> str:
    """``family|initial``; mentions of one person almost always share it."""
    toks = name_tokens(name)
    if not toks:
        return "|"
    return f"{toks[-1]}|{toks[0][0] if len(toks) > 1 else ''}"


def given_name(name: str) -> str:
    """The first given-name token (``""`` for an initial or a one-word name)."""
    toks = name_tokens(name)
    return toks[0] if len(toks) > 1 and len(toks[0]) > 1 else ""


def normalize_email(email: str | None) -> str | None:
    """A canonical address, or None when there is no usable one."""
    if not email or "@" not in email:
        return None
    local, _, domain = email.strip().lower().rpartition("@")
    local = local.split("+", 1)[0]
    if domain in ("gmail.com", "googlemail.com"):
        domain = "gmail.com"
        local = local.replace(".", "")
    return f"{local}@{domain}" if local and domain else None


def institution_part(affiliation: str) -> str:
    """The part of a free affiliation string that names the institution, not the department."""
    parts = [p.strip() for p in re.split(r"[,;]", affiliation) if p.strip()]
    if len(parts) <= 1:
        return affiliation
    named = [p for p in parts if _INSTITUTION.search(p) and not _DEPARTMENT.search(p)]
    if named:
        return named[0]
    undepartmental = [p for p in parts if not _DEPARTMENT.search(p)]
    return undepartmental[0] if undepartmental else parts[-1]


def normalize_affiliation(institution: str | None, affiliation: str | None = None) -> str | None:
    """The exact-match key of an affiliation (None when empty)."""
    raw = institution or (institution_part(affiliation) if affiliation else None)
    if not raw:
        return None
    toks = [_ABBREV.get(t, t) for t in fold(raw).split() if t != "the"]
    return " ".join(toks) or None


def institution_key(ror: str | None, name: str | None, affiliation: str | None = None) -> str | None:
    """``ror:<id>`` when the ROR id is known, else ``name:<normalised name>`` (the name, or the
    institution part of a free ``affiliation`` string when there is no name: the same key the
    disambiguation's exact affiliation rule uses); None with neither."""
    if ror:
        return f"ror:{ror}"
    normalised = normalize_affiliation(name, affiliation)
    return f"name:{normalised}" if normalised else None


def openalex_person_key(author_id: str | None) -> str | None:
    """``openalex:<id>`` of a bare OpenAlex author id (``A5023888391``); None without one."""
    return f"openalex:{author_id}" if author_id else None


HOW: tuple[str, ...] = ("orcid", "s2", "paper_position")
"""How a graph person is tied to a warehouse author, in order of trust."""
LINK_SCHEMA = {"person_key": pl.Utf8, "author_id": pl.Utf8, "how": pl.Utf8}


def person_links(mentions: pl.DataFrame, affiliations: pl.DataFrame) -> pl.DataFrame:
    """``person_key, author_id, how``: each graph person tied to the warehouse authors they are.
    One rule for the pools' institution COI (``tasks.coi``) and the benchmark graph the evaluation
    reads (``warehouse.ratings``).

    ``mentions`` holds ``author_id, arxiv_id, position, orcid, s2_author_id`` (the author links
    with their mentions); ``affiliations`` the graph's ``person_key, orcid, arxiv_id, position``.
    A person is an author when they share an ORCID (the row's, or an ``orcid:`` key), when an
    ``s2:`` key is the mention's S2 author id, or when the row's paper and place in its author
    list are the mention's. A person tied to several author ids keeps them all: disambiguation
    keeps people apart when unsure, and a conflict must reach every id of the person."""
    orcid = (pl.when(pl.col("person_key").str.starts_with("orcid:"))
             .then(pl.col("person_key").str.strip_prefix("orcid:")).otherwise(pl.col("orcid")))
    position = pl.col("position") if "position" in affiliations.columns else pl.lit(None, pl.Int64)
    people = affiliations.select("person_key", orcid.alias("_orcid"), "arxiv_id", position.alias("position")).unique()
    m = mentions.select("author_id", "arxiv_id", "position", "orcid", "s2_author_id")
    by_orcid = (people.drop_nulls("_orcid").join(m.drop_nulls("orcid"), left_on="_orcid", right_on="orcid")
                .select("person_key", "author_id", pl.lit("orcid").alias("how")))
    by_s2 = (people.filter(pl.col("person_key").str.starts_with("s2:"))
             .with_columns(pl.col("person_key").str.strip_prefix("s2:").alias("_s2"))
             .join(m.drop_nulls("s2_author_id"), left_on="_s2", right_on="s2_author_id")
             .select("person_key", "author_id", pl.lit("s2").alias("how")))
    by_paper = (people.drop_nulls(["arxiv_id", "position"]).join(m, on=["arxiv_id", "position"])
                .select("person_key", "author_id", pl.lit("paper_position").alias("how")))
    order = {h: i for i, h in enumerate(HOW)}
    links = pl.concat([by_orcid, by_s2, by_paper]).cast(LINK_SCHEMA)  # type: ignore[arg-type]
    return (links.with_columns(pl.col("how").replace_strict(order, return_dtype=pl.Int64).alias("_o"))
            .sort("person_key", "author_id", "_o").unique(["person_key", "author_id"], keep="first")
            .drop("_o").sort("person_key", "author_id"))
