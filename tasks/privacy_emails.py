"""E-mail addresses and ORCID iDs in folded text, as the privacy audit finds them: addresses plain
or obfuscated (the forms are listed in :mod:`revbench.tasks.privacy`), known ones named by person
even with only the user part and the domain left, and ORCID iDs whose check digit holds.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from revbench.tasks.privacy_fold import TOKEN, word_set

ORCID = re.compile(r"(?<![\d-])(\d{4})-(\d{4})-(\d{4})-(\d{3}[\dX])(?![\d-])")

_BRACKET_AT = re.compile(r"\s*(?:[\[({<]\s*(?:at|@)\s*[\])}>]|\b_at_\b|-at-)\s*")
_BRACKET_DOT = re.compile(r"\s*(?:[\[({<]\s*(?:dot|\.)\s*[\])}>]|\b_dot_\b|-dot-)\s*")
_STRONG_AT, _STRONG_DOT = "\x02", "\x01"
_LOCAL, _LABEL = r"[a-z0-9_%+\-]+", r"[a-z0-9\-]+"
_DOT = rf"(?:\.|\s*{_STRONG_DOT}\s*|\s+dot\s+)"
_DOMAIN_DOT = rf"(?:\s?\.\s?|\s*{_STRONG_DOT}\s*|\s+dot\s+)"  # "mit . edu"; the user part keeps tight dots
# A user part starts at no word that a dot (".", "dot", "[dot]") joins to the one before: one
# attempt per chain, not one per word of it ("a dot b dot c ..." would be quadratic).
EMAIL = re.compile(rf"(?<![a-z0-9_%+.\-])(?<!dot )(?<!{_STRONG_DOT})(?<!{_STRONG_DOT} )({_LOCAL}(?:{_DOT}{_LOCAL})*)"
                   rf"(\s*@\s*|\s*{_STRONG_AT}\s*|\s+at\s+)({_LABEL}(?:{_DOMAIN_DOT}{_LABEL})+)")
GROUPED = re.compile(rf"\{{\s*({_LOCAL}(?:\.{_LOCAL})*(?:\s*[,;|]\s*{_LOCAL}(?:\.{_LOCAL})*)+)\s*\}}\s*@\s*({_LABEL}(?:\.{_LABEL})+)")
"""Several addresses of one domain written as one: ``{jdoe, asmith}@cs.cmu.edu``."""
_AT_HINT = re.compile(r"@|\bat\b|_at_|-at-")
_WORD_DOT = re.compile(rf"\s*{_STRONG_DOT}\s*|\s+dot\s+")
_SPACED_DOT = re.compile(r"\s?\.\s?")
TLDS = word_set("""com net org edu gov mil int info biz name pro io ai co me app dev xyz tech online site ac
    uk de fr cn jp kr ca au ch nl it es se no fi dk be at il in sg hk tw br ru pl cz us eu ie pt gr at nz za mx ar
    tr ir sa ae eg id my th vn ph pk""")
"""Domains an obfuscated address must end in: words do not ("look at the dot product")."""
_GENERIC = frozenset({"com", "net", "org", "edu", "gov", "mil", "int", "info", "biz"})
_WORDISH = frozenset({"in", "it", "is", "at", "no", "me", "us", "be", "id", "my", "so", "to", "do", "go", "am", "as", "by"})


_PROSE_VERBS = frozenset({
    "available", "accessible", "found", "hosted", "released", "online", "located", "published", "provided",
    "obtained", "downloaded", "accessed", "retrieved", "deployed", "maintained"})
"""Words that stand before "at <host>" in prose about code and data ("the code is available at
github.com"), never as the local part of an address written with a spelled-out "at"."""
_PROSE_NOUNS = frozenset({"code", "data", "dataset", "demo", "page", "website", "repository", "project", "here"})
"""Words that do so too ("code at github.com") but can also be a person's local part ("page at
cs.stanford.edu"): prose only before a code or data host, or a web path."""
_CODE_HOSTS = ("github.com", "github.io", "gitlab.com", "bitbucket.org", "huggingface.co", "zenodo.org", "figshare.com",
               "osf.io", "kaggle.com", "google.com", "arxiv.org", "openreview.net")


def _prose_at(local: str, host: str, path_follows: bool) -> bool:
    """Whether "<local> at <host>" is prose about where code or data is, not an address."""
    if local in _PROSE_VERBS:
        return True
    hosting = any(host == h or host.endswith("." + h) for h in _CODE_HOSTS)
    return (local in _PROSE_NOUNS or local in _WORDISH) and (hosting or path_follows)


def find_emails(folded: str, known: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """(address, form, person) for each address in ``folded`` text: ``form`` is ``plain`` or
    ``obfuscated``; ``person`` names whose known address it is ("" for an unknown one)."""
    low = folded.casefold()
    if not _AT_HINT.search(low):
        return
    low = _BRACKET_DOT.sub(_STRONG_DOT, _BRACKET_AT.sub(_STRONG_AT, low))
    for g in GROUPED.finditer(low):  # "{jdoe, asmith}@cs.cmu.edu": one address per name
        domain = g.group(2)
        if _unknown_address_ok(domain, "plain") or any(f"{x.strip()}@{domain}" in known for x in re.split(r"[,;|]", g.group(1))):
            for x in re.split(r"[,;|]", g.group(1)):
                if x.strip():
                    yield f"{x.strip()}@{domain}", "plain", known.get(f"{x.strip()}@{domain}", "")
    for m in EMAIL.finditer(low):
        local, at, domain = m.group(1), m.group(2), m.group(3)
        address = f"{_WORD_DOT.sub('.', local)}@{_SPACED_DOT.sub('.', _WORD_DOT.sub('.', domain))}"
        person = known.get(address, "")
        plain = at == "@" and not any(c in m.group(0) for c in (" ", _STRONG_DOT))
        how = "plain" if plain else "word" if at.strip() == "at" and not _WORD_DOT.search(domain) else "marked"
        if how == "word" and not person and _prose_at(local, address.split("@", 1)[1], low[m.end():m.end() + 1] == "/"):
            continue  # "code is available at github.com/x": a web address in real abstracts, not a person's
        if person or _unknown_address_ok(address.split("@", 1)[1], how):
            yield address, "plain" if plain else "obfuscated", person


def unknown_address_ok(domain: str, how: str) -> bool:
    """Whether ``domain`` makes an address nobody in the warehouse owns one (see below); the
    release's redaction asks the audit's question, so the two never disagree."""
    return _unknown_address_ok(domain, how)


def _unknown_address_ok(domain: str, how: str) -> bool:
    """Whether an address nobody in the warehouse owns is one. Written plainly ("x@y.org"), the
    last label is letters and some other label has a letter unless it is a generic domain
    ("x@163.com"; not "Hits@10.In" or "mAP@0.5"). Written with spaces, brackets or words ("x [at]
    y [dot] z"), it must also end in a known top-level domain (not "the") that is no English word
    unless three labels make it plain ("look at the dot product", "recall@k. In this"); with "at"
    as a word and tight dots, only a generic domain or three labels will do ("x at mit.edu";
    "done at home.It" is a sentence)."""
    labels = domain.split(".")
    tld = labels[-1]
    if len(labels) < 2 or not tld.isalpha() or len(tld) < 2 or not all(labels):
        return False
    if not (any(c.isalpha() for lab in labels[:-1] for c in lab) or tld in _GENERIC):
        return False
    if how == "plain":
        return True
    if tld not in TLDS or (tld in _WORDISH and len(labels) < 3):
        return False
    return how == "marked" or tld in _GENERIC or len(labels) >= 3


def orcid_checksum_ok(digits: str) -> bool:
    """Whether 16 characters (15 digits and a check digit or X) pass ORCID's ISO 7064 11,2 check:
    sixteen digits that fail it are a phone or a serial number, not an iD."""
    total = 0
    for d in digits[:-1]:
        total = (total + int(d)) * 2
    check = (12 - total % 11) % 11
    return digits[-1] == ("X" if check == 10 else str(check))


def find_orcids(folded: str, known: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(iD, person) for each ORCID iD in ``folded`` text whose check digit holds (a release carries
    none); ``person`` names whose it is when the warehouse knows it."""
    for m in ORCID.finditer(folded):
        orcid = m.group(0)
        if orcid_checksum_ok("".join(m.groups())):
            yield orcid, known.get(orcid, "")


class KnownAddresses:
    """The user part of each known address followed by its domain, however the punctuation
    between them was written ("jane doe at mit", "jane_doe (at) mit dot edu")."""

    def __init__(self, emails: dict[str, str]):
        self.by_key: dict[str, list[tuple[tuple[str, ...], frozenset[str], str]]] = defaultdict(list)
        for address, person in sorted(emails.items()):
            local, _, domain = address.partition("@")
            parts = tuple(TOKEN.findall(local))
            labels = frozenset(TOKEN.findall(domain.rsplit(".", 1)[0])) if "." in domain else frozenset()
            if len("".join(parts)) < 3 or not labels:
                continue
            self.by_key[parts[0]].append((parts, labels, person))
            if len(parts) > 1:
                self.by_key["".join(parts)].append((("".join(parts),), labels, person))
        self.keys = frozenset(self.by_key)

    def find(self, words: list[str]) -> Iterator[tuple[str, str]]:
        """(text, person) for each known address in ``words`` (case-folded tokens)."""
        for i, w in enumerate(words):
            for parts, labels, person in self.by_key.get(w, ()):
                end = i + len(parts)
                if tuple(words[i:end]) != parts:
                    continue
                j = end + (end < len(words) and words[end] == "at")
                if j < len(words) and words[j] in labels:
                    yield " ".join(words[i:j + 1]), person
