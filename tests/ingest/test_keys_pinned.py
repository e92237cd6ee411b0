"""Identity keys pinned to the values warehouses already hold: a block key, an affiliation key, an
institution key or a person link that changes splits stored authors and institutions from their
new mentions. A change here is a migration of stored data, never a refactoring."""

from __future__ import annotations

import polars as pl
import pytest

from revbench.clients.openalex_graph import authorship_rows, person_rows
from revbench.keys import (
    block_key,
    fold,
    given_name,
    institution_key,
    institution_part,
    name_tokens,
    normalize_affiliation,
    normalize_email,
    openalex_person_key,
    person_links,
)
from revbench.tasks.normalize import canonical_institution

NAMES = [
    # name, block_key, name_tokens, given_name, fold
    ("Smith, John A.", "smith|j", ["john", "a", "smith"], "john", "smith john a"),
    ("Zoë Müller-Lüdenscheidt", "ludenscheidt|z", ["zoe", "muller", "ludenscheidt"], "zoe", "zoe muller ludenscheidt"),
    ("Jürgen Groß", "gross|j", ["jurgen", "gross"], "jurgen", "jurgen gross"),
    ("Madonna", "madonna|", ["madonna"], "", "madonna"),
    ("", "|", [], "", ""),
    ("Ø. Ærø", "aero|o", ["o", "aero"], "", "o aero"),
    ("Łukasz Kaiser", "kaiser|l", ["lukasz", "kaiser"], "lukasz", "lukasz kaiser"),
    ("van der Berg, Anna-Maria", "berg|a", ["anna", "maria", "van", "der", "berg"], "anna", "van der berg anna maria"),
    ("José María Sánchez-Ortega", "ortega|j", ["jose", "maria", "sanchez", "ortega"], "jose", "jose maria sanchez ortega"),
    ("李 伟", "|", [], "", ""),
    ("J.-P. O'Neil", "neil|j", ["j", "p", "o", "neil"], "", "j p o neil"),
]


@pytest.mark.parametrize(("name", "key", "tokens", "given", "folded"), NAMES)
def test_name_keys_are_pinned(name: str, key: str, tokens: list[str], given: str, folded: str) -> None:
    assert (block_key(name), name_tokens(name), given_name(name), fold(name)) == (key, tokens, given, folded)


@pytest.mark.parametrize(("email", "key"), [
    ("John.Doe+tag@GoogleMail.com", "johndoe@gmail.com"), (" A.B+x@cs.MIT.edu ", "a.b@cs.mit.edu"),
    ("nope", None), (None, None), ("+x@y.org", None), ("@x", None),
])
def test_email_keys_are_pinned(email: str | None, key: str | None) -> None:
    assert normalize_email(email) == key


@pytest.mark.parametrize(("institution", "affiliation", "key"), [
    ("Univ. of Tech., Munich", None, "university of technology munich"),
    (None, "Dept. of Computer Science, Stanford Univ., CA, USA", "stanford university"),
    (None, "School of Informatics; The University of Edinburgh", "university of edinburgh"),
    ("The Natl Inst. of Sci. & Tech.", None, "national institute of science technology"),
    (None, None, None), ("", "", None),
    (None, "Department of Physics, Group X", "group x"),
    ("École Polytechnique Fédérale de Lausanne", None, "ecole polytechnique federale de lausanne"),
])
def test_affiliation_keys_are_pinned(institution: str | None, affiliation: str | None, key: str | None) -> None:
    assert normalize_affiliation(institution, affiliation) == key


def test_institution_keys_are_pinned() -> None:
    assert institution_part("Dept. of Computer Science, Stanford Univ., CA, USA") == "Stanford Univ."
    assert institution_key("05ppvf150", "Ignored") == "ror:05ppvf150"
    assert institution_key(None, "Univ. of Oxford") == "name:university of oxford"
    assert institution_key("", "ETH Zürich") == "name:eth zurich"
    assert institution_key(None, None) is None and institution_key(None, "the") is None
    assert institution_key(None, None, "Dept. of CS, Univ. of Nowhere") == "name:university of nowhere"
    assert institution_key("05ppvf150", None, "Dept. of CS, Univ. of Nowhere") == "ror:05ppvf150"
    assert openalex_person_key("A123") == "openalex:A123" and openalex_person_key(None) is None
    assert canonical_institution(normalize_affiliation("MIT")) == "massachusetts institute of technology"
    assert canonical_institution(None) is None


def test_openalex_keys_are_pinned() -> None:
    """A matched institution by its ROR id, a raw string OpenAlex matched to none by its
    institution part, the person by their OpenAlex id."""
    work = {"publication_year": 2020, "authorships": [{
        "author": {"id": "https://openalex.org/A123", "orcid": "https://orcid.org/0000-0003-1613-5981"},
        "raw_author_name": "J. Doe",
        "institutions": [{"id": "https://openalex.org/I1", "ror": "https://ror.org/05ppvf150",
                          "display_name": "Utrecht University"}],
        "affiliations": [{"raw_affiliation_string": "Dept. of CS, Univ. of Nowhere", "institution_ids": [None]}]}]}
    institutions, affiliations = authorship_rows("2001.00001", work)
    assert [i["institution_key"] for i in institutions] == ["ror:05ppvf150", "name:university of nowhere"]
    assert [(a["person_key"], a["institution_key"]) for a in affiliations] == [
        ("openalex:A123", "ror:05ppvf150"), ("openalex:A123", "name:university of nowhere")]
    assert [(r["person_key"], r["orcid"]) for r in person_rows("2001.00001", work)] == [
        ("openalex:A123", "0000-0003-1613-5981")]


def test_person_links_are_pinned() -> None:
    mentions = pl.DataFrame({"author_id": ["a1", "a2", "a3"], "arxiv_id": ["p1", "p1", "p2"], "position": [0, 1, 0],
                             "orcid": ["0000-0001", None, None], "s2_author_id": [None, "77", None]})
    graph = pl.DataFrame({"person_key": ["orcid:0000-0001", "s2:77", "openalex:A9", "openalex:A9"],
                          "orcid": [None, None, None, None], "arxiv_id": ["px", "p9", "p2", "p1"], "position": [5, 0, 0, 0]},
                         schema_overrides={"orcid": pl.Utf8})
    assert person_links(mentions, graph).rows() == [
        ("openalex:A9", "a1", "paper_position"), ("openalex:A9", "a3", "paper_position"),
        ("orcid:0000-0001", "a1", "orcid"), ("s2:77", "a2", "s2")]
