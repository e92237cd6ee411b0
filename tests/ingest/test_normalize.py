from __future__ import annotations

import pytest

from revbench.keys import (
    block_key,
    fold,
    given_name,
    institution_part,
    name_tokens,
    normalize_affiliation,
    normalize_email,
)
from revbench.tasks.normalize import canonical_institution


@pytest.mark.parametrize(("a", "b"), [
    ("J. Smith", "John Smith"), ("Smith, John", "John Smith"), ("Zoë Müller", "Zoe Muller"),
    ("Søren Ørsted", "Soren Orsted"), ("Jean-Luc Picard", "Jean Luc Picard"), ("JOHN SMITH", "john smith"),
])
def test_names_share_a_block(a: str, b: str) -> None:
    assert block_key(a) == block_key(b)


def test_name_details() -> None:
    assert name_tokens("Smith, John A.") == ["john", "a", "smith"]
    assert fold("Jürgen Groß") == "jurgen gross"
    assert given_name("J. Smith") == "" and given_name("John Smith") == "john"
    assert block_key("Madonna") == "madonna|"
    assert block_key("Wei Wang") != block_key("Wen Wang") or block_key("Wei Wang") == "wang|w"


def test_emails() -> None:
    assert normalize_email(" Jo.Doe@Example.ORG ") == "jo.doe@example.org"
    assert normalize_email("jo+arxiv@uni.example") == "jo@uni.example"
    assert normalize_email("j.o.doe@googlemail.com") == normalize_email("jodoe@gmail.com") == "jodoe@gmail.com"
    # Dots matter outside gmail, and sub-domains are not assumed to be aliases.
    assert normalize_email("jo.doe@uni.example") != normalize_email("jodoe@uni.example")
    assert normalize_email("jo@cs.uni.example") != normalize_email("jo@uni.example")
    assert normalize_email("not an email") is None and normalize_email(None) is None


def test_affiliations() -> None:
    assert normalize_affiliation("Univ. of Oxford") == normalize_affiliation("University of Oxford") == "university of oxford"
    assert normalize_affiliation(None, "Department of Computer Science, Stanford University, CA 94305") == "stanford university"
    assert normalize_affiliation("The University of Tokyo") == "university of tokyo"
    assert normalize_affiliation("Texas A&M") == "texas a m"
    assert normalize_affiliation(None, None) is None and normalize_affiliation("  ") is None
    assert institution_part("School of Informatics, University of Edinburgh") == "University of Edinburgh"


def test_alias_table_is_for_the_fallback_only() -> None:
    mit = normalize_affiliation("MIT CSAIL")
    assert mit != normalize_affiliation("Massachusetts Institute of Technology")
    assert canonical_institution(mit) == canonical_institution(normalize_affiliation("Massachusetts Institute of Technology"))
    assert canonical_institution(normalize_affiliation("ETH Zürich")) == canonical_institution(normalize_affiliation("ETHZ"))
    assert canonical_institution(normalize_affiliation("Nowhere College")) is None
