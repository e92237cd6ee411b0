"""Real abstracts say where their code is ("available at github.com/..."): that prose is no
address, while an address written with a spelled-out or bracketed "at", or plainly, still is."""

from __future__ import annotations

import pytest

from revbench.tasks.privacy_emails import find_emails
from revbench.tasks.privacy_fold import fold


def _found(text: str, known: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    return list(find_emails(fold(text), known or {}))


@pytest.mark.parametrize("text", [
    "The code is available at github.com/lab/project.",  # the LR-bench abstract's form
    "Our code and data are available at github.com.",
    "The code is at github.com.",  # a short word before "at" is no local part (it was "is@github.com")
    "AVAILABLE AT GITHUB.COM/X",
    "Models are released at huggingface.co/datasets/x",
    "The dataset is hosted at zenodo.org",
    "The benchmark can be downloaded at example.org",
    "A demo is accessible at our.lab.org",
    "See the project page, found at example.org",
    "Code at github.com",
    "The toolkit can be accessed at neuspell.github.io.",  # the gold standard's abstract's form
    "Our code is at github.com/lab/x",  # any word, when the host is followed by a path
    "Our code is at https://github.com/lab/x",
])
def test_prose_about_code_and_data_is_no_address(text: str) -> None:
    assert _found(text) == []


@pytest.mark.parametrize(("text", "address", "form"), [
    ("bob at example.com", "bob@example.com", "obfuscated"),
    ("Write to bob at example.com.", "bob@example.com", "obfuscated"),
    ("bob [at] example [dot] com", "bob@example.com", "obfuscated"),
    ("bob (at) cs.mit.edu", "bob@cs.mit.edu", "obfuscated"),
    ("bob@example.com", "bob@example.com", "plain"),
    ("Contact: Bob.Smith@cs.mit.edu (code at github.com/x)", "bob.smith@cs.mit.edu", "plain"),
    ("available@github.com", "available@github.com", "plain"),  # written plainly, a prose word is an address
    # A prose word or a short word as a person's local part, off a code host: still an address.
    ("Correspondence: page at cs.stanford.edu", "page@cs.stanford.edu", "obfuscated"),
    ("Contact: as at cs.cmu.edu", "as@cs.cmu.edu", "obfuscated"),
    ("Email: here at example.org", "here@example.org", "obfuscated"),
    ("jdoe at cs.cmu.edu/~jdoe is the homepage", "jdoe@cs.cmu.edu", "obfuscated"),
])
def test_addresses_are_still_found(text: str, address: str, form: str) -> None:
    assert _found(text) == [(address, form, "")]


def test_a_known_persons_address_is_found_even_in_prose_form() -> None:
    assert _found("the code is available at github.com", {"available@github.com": "P1"}) == [
        ("available@github.com", "obfuscated", "P1")]


def test_grouped_addresses_are_each_found() -> None:
    assert _found("Contact {jdoe, a.smith}@cs.cmu.edu for data") == [
        ("jdoe@cs.cmu.edu", "plain", ""), ("a.smith@cs.cmu.edu", "plain", "")]
