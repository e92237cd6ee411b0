"""The privacy audit's test material, shared by ``tests/test_privacy.py`` and
``benchmarks/privacy_bench.py``: the people a warehouse knows (``fixtures/privacy/people.csv``),
re-spellings of their names and addresses generated from that list, and clean text: the
hand-written sentences of ``fixtures/privacy/clean_sentences.txt`` plus sentences generated
from templates and a word list. Everything is deterministic (no randomness, fixed order)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import polars as pl

PRIVACY_FIXTURES = Path(__file__).resolve().parents[1] / "release" / "fixtures" / "privacy"

# Cyrillic and Greek letters that look like Latin ones, as a re-identifier would slip them in.
HOMOGLYPHS = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441", "i": "\u0456", "y": "\u0443",
              "x": "\u0445", "A": "\u0391", "B": "\u0392", "E": "\u0395", "H": "\u0397", "K": "\u039a", "M": "\u039c",
              "O": "\u039f", "T": "\u03a4", "S": "\u0405", "J": "\u0408"}
SENTENCES = ["We thank {} for comments on an early draft.", "Joint work with {} during a visit in 2024.",
             "The annotations were checked by {} and two students.", "{} collected the data.",
             "Correspondence: {}", "Code by {}; data by the second lab."]


def people() -> pl.DataFrame:
    """``person_id, name, email`` of fifty people; many surnames are ordinary English words."""
    return pl.read_csv(PRIVACY_FIXTURES / "people.csv")


def _strip(s: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))


def _glyphs(s: str) -> str:
    return "".join(HOMOGLYPHS.get(c, c) for c in s)


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


def _split(name: str) -> tuple[str, str]:
    """(given, surname) as the fixture writes them: the last word is the surname, except for the
    two double surnames and the particle name, which the fixture spells out here."""
    special = {"Jan van der Berg": ("Jan", "van der Berg"), "Ana María Fernández Gómez": ("Ana María", "Fernández Gómez"),
               "J. Robert Miller": ("Robert", "Miller"), "Mary Ann Smith": ("Mary", "Smith")}
    if name in special:
        return special[name]
    given, _, surname = name.rpartition(" ")
    return given, surname


def name_respellings() -> list[tuple[str, str, str]]:
    """(person_id, form, text): each person's name in every common form, each inside a sentence."""
    out = []
    for k, (pid, name, _email) in enumerate(people().iter_rows()):
        given, surname = _split(name)
        first = given.split()[0]
        initial = first[0] + "."
        if "-" in first:  # "Seo-yeon" -> "S.-Y."
            initial = "-".join(p[0].upper() + "." for p in first.split("-"))
        forms = {
            "first_last": f"{given} {surname}",
            "last_comma_first": f"{surname}, {given}",
            "last_first": f"{surname} {given}",
            "initial_last": f"{initial} {surname}",
            "last_initial": f"{surname} {initial}",
            "last_comma_initial": f"{surname}, {initial}",
            "first_middle_last": f"{first} Q. {surname}",
            "upper_last_comma_first": f"{surname.upper()}, {given}",
            "lower_first_last": f"{given.lower()} {surname.lower()}",
            "lower_initial_last": f"{initial.lower()} {surname.lower()}",
            "homoglyph": _glyphs(f"{surname}, {given}"),
            "zero_width": f"{given} {surname[:2]}\u200b{surname[2:]}",
            "fullwidth": _fullwidth(f"{given} {surname}"),
            "soft_hyphen": f"{given} {surname[:3]}\u00ad{surname[3:]}",
        }
        if _strip(name) != name:
            forms["no_diacritics"] = _strip(f"{surname}, {given}")
        if "-" in first:
            forms["given_joined"] = f"{first.replace('-', '')} {surname}"
            forms["given_spaced"] = f"{surname}, {first.replace('-', ' ')}"
        for j, (form, text) in enumerate(forms.items()):
            out.append((pid, form, SENTENCES[(k + j) % len(SENTENCES)].format(text)))
    return out


def email_respellings() -> list[tuple[str, str, str]]:
    """(person_id, form, text): each known address plain and obfuscated, each inside a sentence;
    person_id is "" for addresses nobody in the warehouse owns (they must be flagged too)."""
    out = []
    rows = [*people().select("person_id", "email").iter_rows(), ("", "someone.else@example.org"), ("", "x9@lab.example.co.uk")]
    for k, (pid, email) in enumerate(rows):
        local, domain = email.split("@")
        dots = domain.replace(".", " [dot] ")
        forms = {
            "plain": email,
            "brackets": f"{local} [at] {dots}",
            "parentheses": f"{local} (at) {domain.replace('.', ' (dot) ')}",
            "braces": f"{local}{{at}}{domain}",
            "words": f"{local} at {domain.replace('.', ' dot ')}",
            "upper_words": f"{local} AT {domain.replace('.', ' DOT ').upper()}",
            "fullwidth_at": local + "\uff20" + domain.replace(".", "\uff0e"),
            "spaces_around_at": f"{local} @ {domain}",
            "homoglyph": _glyphs(email),
            "zero_width": f"{local[:2]}\u200b{local[2:]}@{domain}",
            "mixed": f"{local.replace('.', ' dot ')} (at) {domain}",
        }
        for j, (form, text) in enumerate(forms.items()):
            out.append((pid, form, SENTENCES[(k + j) % len(SENTENCES)].format(text)))
    return out


# Words that are both ordinary English and surnames or given names in people.csv.
SURNAME_WORDS = ["brown", "young", "long", "field", "bell", "hall", "wood", "black", "green", "rice", "price", "best",
                 "king", "rich", "strong", "stone", "frost", "cross", "white", "sun", "wise", "fox", "hill", "moss", "park"]
GIVEN_WORDS = ["will", "mark", "rose", "grace", "art", "ivy", "jack", "hope"]
NOUNS = ["sequence", "model", "signal", "estimate", "feature", "score", "method", "curve", "map", "policy", "sample", "region"]
LABELS = ["Figure", "Table", "Type", "Class", "Section", "Group", "Step", "Model", "Variant", "Condition", "Case", "Setting"]
TEMPLATES = [
    "{W} {n} results are reported in Table {d}.",
    "We study the {w} {n} problem in {dom}.",
    "The {w} {n} of each {dom} system was measured twice.",
    "{L} {I}. {W} {n}s are shown in red.",
    "Results for {l} {I}. {W} {n} data are in the appendix.",
    "{W} {N} for {Dom}: A Case Study",
    "{G} {W} {N}s Help {Dom}?",
    "{g} the {w} {n} improve {dom} accuracy?",
    "A {W} {N} Approach to {Dom}",
    "We {g} {w} the {n} before training.",
    "Unlike a {w} {n}, a short one fits in memory.",
    "The {w}-{n} trade-off in {dom} is well known.",
    "{W} and {n} are two words that appear in this sentence.",
    "Is a {w} {n} better than a {g} {n}?",
    "Our {dom} dataset has {d} {w} {n}s and no names.",
]
DOMAINS = ["retrieval", "translation", "vision", "speech", "robotics", "recommendation", "summarisation", "parsing"]


def clean_sentences(generated: int = 600) -> list[str]:
    """The hand-written sentences, then ``generated`` sentences from ``TEMPLATES``: surname words
    and given-name words as ordinary words, capitalised at the start of sentences and titles, and
    after a label with a letter ("Figure A. Long ...") whose letter is the initial of a person
    with that surname (``INITIALS``)."""
    text = (PRIVACY_FIXTURES / "clean_sentences.txt").read_text().splitlines()
    hand = [s for s in text if s.strip() and not s.startswith("#")]
    initials = {}
    for _pid, name, _e in people().iter_rows():
        given, surname = _split(name)
        initials.setdefault(surname.lower(), given[0])
    out = []
    for i in range(generated):
        w = SURNAME_WORDS[i % len(SURNAME_WORDS)]
        g = GIVEN_WORDS[(i // len(SURNAME_WORDS)) % len(GIVEN_WORDS)]
        n, dom = NOUNS[(i * 7) % len(NOUNS)], DOMAINS[(i * 5) % len(DOMAINS)]
        label = LABELS[(i * 3) % len(LABELS)]
        out.append(TEMPLATES[i % len(TEMPLATES)].format(
            w=w, W=w.capitalize(), g=g, G=g.capitalize(), n=n, N=n.capitalize(), dom=dom, Dom=dom.capitalize(),
            L=label, l=label.lower(), I=initials.get(w, "A"), d=2 + i % 7))
    return hand + out
