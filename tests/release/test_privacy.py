"""The privacy audit read as a re-identifier would: re-spelled names and obfuscated addresses of
the warehouse's people are found (the four that reached a release in issue 20 and many more),
ordinary sentences full of words that are also surnames are not, every nested string is read,
and the release flow refuses a release whose abstract carries a respondent's re-spelled name."""

from __future__ import annotations

import os

import polars as pl
import pytest

from revbench.flows.ratings import ratings_flow
from revbench.flows.release import PrivacyAuditFailed, release_flow
from revbench.settings import Settings
from revbench.tasks.privacy import Auditor, privacy_audit
from revbench.tasks.privacy_fold import fold, normalise
from revbench.tasks.privacy_names import NameIndex, name_forms, tokens
from revbench.warehouse import Warehouse
from tests.support.common import run_cli, settings_env
from tests.support.privacy_corpus import clean_sentences, email_respellings, name_respellings, people


@pytest.fixture(scope="module")
def auditor() -> Auditor:
    return Auditor(people(), ["Seoul National University", "Massachusetts Institute of Technology"])


def found(auditor: Auditor, text: str, kind: str) -> list[tuple[str, str, str, str]]:
    return [h for h in auditor.scan(text) if h[0] == kind]


# The four spellings that reached a release (issue 20), then more, each with whose it is.
RESPELLED = [
    ("Murphy, Seo-yeon", "person_name", "author_p01"),
    ("S. Murphy", "person_name", "author_p01"),
    ("jane.doe [at] mit [dot] edu", "email", "author_p02"),
    ("jane.doe\uff20mit.edu", "email", "author_p02"),
    ("Seoyeon Murphy", "person_name", "author_p01"),
    ("Seo yeon Murphy", "person_name", "author_p01"),
    ("Murphy S.-Y.", "person_name", "author_p01"),
    ("MURPHY, SEO-YEON", "person_name", "author_p01"),
    ("Murphy SY, Doe J", "person_name", "author_p01"),
    ("Mur\u0440hy, Seo-yeon", "person_name", "author_p01"),  # Cyrillic er
    ("Mu\u200brphy, Seo-yeon", "person_name", "author_p01"),  # zero-width space
    ("\uff2d\uff55\uff52\uff50\uff48\uff59, S.", "person_name", "author_p01"),  # full-width letters
    ("Doe, Jane", "person_name", "author_p02"),
    ("Jane Q. Doe", "person_name", "author_p02"),
    ("jane doe", "person_name", "author_p02"),
    ("J. Doe", "person_name", "author_p02"),
    ("Doe J.", "person_name", "author_p02"),
    ("Jose Garcia-Lopez", "person_name", "author_p17"),
    ("García López, J.", "person_name", "author_p17"),
    ("J. van der Berg", "person_name", "author_p19"),
    ("Berg, Jan", "person_name", "author_p19"),
    ("Lukasz Kowalski", "person_name", "author_p20"),
    ("Soren Ostergaard", "person_name", "author_p21"),
    ("S. O'Brien", "person_name", "author_p18"),
    ("Fernández Gómez, Ana María", "person_name", "author_p31"),
    ("Robert Miller", "person_name", "author_p27"),
    ("A. Field", "person_name", "author_p06"),
    ("Will Price wrote the first draft", "person_name", "author_p13"),
    ("Chen Xiaoming", "person_name", "author_p32"),
    ("jane.doe (at) mit (dot) edu", "email", "author_p02"),
    ("jane.doe at mit dot edu", "email", "author_p02"),
    ("jane.doe AT mit DOT edu", "email", "author_p02"),
    ("jane.doe @ mit.edu", "email", "author_p02"),
    ("jane dot doe at mit dot edu", "email", "author_p02"),
    ("j\u0430ne.doe@mit.edu", "email", "author_p02"),  # Cyrillic a
    ("jane_doe is reachable as jane.doe at mit", "email", "author_p02"),
    ("seoyeon.murphy{at}snu.ac.kr", "email", "author_p01"),
    ("H.-W. Park", "person_name", "author_p24"),
    ("Park Hyun-woo", "person_name", "author_p24"),
    ("Young-jin Kim", "person_name", "author_p25"),
]


@pytest.mark.parametrize(("text", "kind", "person"), RESPELLED, ids=[r[0] for r in RESPELLED])
def test_a_respelled_name_or_address_is_found_with_its_person(auditor: Auditor, text: str, kind: str, person: str) -> None:
    hits = found(auditor, f"Thanks to {text} for the data.", kind)
    assert any(person in h[3].split(",") for h in hits), auditor.scan(text)


def test_every_generated_respelling_is_found_but_lowercase_ordinary_words(auditor: Auditor) -> None:
    """Every form of every person's name and address is found, except two forms by design: a
    name made of ordinary words written all in lower case ("will price") and a lower-case initial
    before a surname that is an ordinary word ("a. field"), which ordinary text is full of."""
    common = {"author_p03", "author_p04", "author_p05", "author_p06", "author_p07", "author_p08", "author_p09",
              "author_p10", "author_p11", "author_p12", "author_p13", "author_p14", "author_p15", "author_p16",
              "author_p22", "author_p23", "author_p24", "author_p35", "author_p36", "author_p37", "author_p38",
              "author_p39", "author_p40", "author_p41", "author_p42", "author_p44", "author_p45", "author_p46",
              "author_p47"}
    missed = [(pid, form, text) for pid, form, text in name_respellings()
              if not any(pid in h[3].split(",") for h in found(auditor, text, "person_name"))]
    assert all(form in ("lower_first_last", "lower_initial_last") and pid in common for pid, form, _ in missed), missed
    for pid, form, text in email_respellings():
        hits = found(auditor, text, "email")
        assert hits and (not pid or any(pid in h[3].split(",") for h in hits)), (form, text, hits)


def test_clean_text_holding_surnames_as_words_is_not_flagged(auditor: Auditor) -> None:
    corpus = clean_sentences()
    assert len(corpus) > 700
    flagged = [(s, auditor.scan(s)) for s in corpus if auditor.scan(s)]
    assert flagged == []


@pytest.mark.parametrize("text", [
    "Murphy's law", "MURPHY'S LAW", "Murphy wrote nothing here", "the Brown corpus", "a young field", "Hall, Bell, Wood",
    "Recall@10 and nDCG@10", "hits@1.In contrast", "mAP@0.5:0.95", "P@5.The", "we look at the dot product",
    "done at home.It was", "Type A. Long sequences", "Figure A. Field data", "A Green AI Agenda", "Will Price Caps Work?",
    "email us at the address on the website", "S. cerevisiae", "E. coli K-12",
])
def test_a_surname_alone_metrics_and_prose_are_not_hits(auditor: Auditor, text: str) -> None:
    assert auditor.scan(text) == []


def test_an_initial_is_never_read_as_a_family_name() -> None:
    # "E. Ivanov" once also read as family name "E", given name "Ivanov": "i.e." was a hit.
    index = NameIndex([("a1", "E. Ivanov")])
    assert index.find(tokens("a method (i.e. the one) for graphs")) == []
    assert [form for _start, _end, form, _who in index.find(tokens("with E. Ivanov and"))] == ["initial_last"]


def test_a_namesake_inside_a_compound_or_an_abbreviation_is_not_a_hit() -> None:
    """Found on text nobody wrote for the test (the standard library's docstrings) and on a
    roster of ordinary-word surnames: "T. Berners-Lee, R. Fielding" holds no "Lee, R.", and
    "the U.S. Field Manual" no "S. Field"; the real forms of those people still are hits."""
    roster = pl.DataFrame({"person_id": ["lee", "field", "scholes"], "name": ["Rafael Lee", "Sofia Field", "Myron Scholes"],
                           "email": [None, None, None]})
    a = Auditor(roster, [])
    for text in ["by T. Berners-Lee, R. Fielding and L. Masinter", "The U.S. Field Manual", "the Black-Scholes formula"]:
        assert a.scan(text) == [], text
    for text, who in [("by Lee, R. and others", "lee"), ("as S. Field showed", "field"), ("M. Scholes", "scholes")]:
        assert [h[3] for h in a.scan(text)] == [who], text


def test_any_address_is_flagged_even_of_nobody_known(auditor: Auditor) -> None:
    for text in ["write to x.y@uni.example", "contact: someone (at) lab (dot) org", "abc AT foo DOT de", "q@163.com"]:
        hits = found(auditor, text, "email")
        assert hits and hits[0][3] == "", text


def test_folding_and_name_forms() -> None:
    assert fold("Ｍurрhy\u200b＠ｍｉｔ．ｅｄｕ") == "Murphy@mit.edu"
    assert normalise("  Mürphy,\tSeo-Yeon  ") == "murphy seo yeon"
    assert normalise("Łukasz Østergaard-Ïbañez") == "lukasz ostergaard ibanez"
    assert fold("\u0397\u0399") == "HI"  # Greek capital eta and iota read as the Latin capitals
    forms = {(f.given, f.middle, f.surname) for f in name_forms("p", "Jan van der Berg")}
    assert (("jan",), (), ("van", "der", "berg")) in forms and (("jan",), (), ("berg",)) in forms
    assert name_forms("p", "Madonna") == []


def test_every_nested_string_is_read_and_each_hit_named() -> None:
    tables = {
        "papers": pl.DataFrame({"paper_id": ["p_1", "p_2"], "title": ["Fine", "Also fine"],
                                "abstract": ["Nothing here.", "As S. Murphy showed, it works."]}),
        "reviewers": pl.DataFrame({"reviewer_id": ["r_1"], "publications": [[
            {"title": "One", "abstract": "Plain.", "keywords": ["a", "b"]},
            {"title": "Two", "abstract": "Ask jane.doe [at] mit [dot] edu.", "keywords": ["c", "Doe, Jane"]}]]}),
    }
    hits, scanned = privacy_audit(tables, people(), [])
    assert scanned == 2 * 3 + 1 + 2 * 2 + 4
    where = {(h.table, h.row, h.field, h.kind, h.person) for h in hits}
    assert where == {("papers", 1, "abstract", "person_name", "author_p01"),
                     ("reviewers", 0, "publications[1].abstract", "email", "author_p02"),
                     ("reviewers", 0, "publications[1].keywords[1]", "person_name", "author_p02")}
    mail = next(h for h in hits if h.kind == "email")
    assert mail.found == "jane.doe@mit.edu" and mail.redacted() == "j***@mit.edu" and mail.form == "obfuscated"


# ---------------------------------------------------------------------------------------------
# Through the release flow

KEY = "release-test-key-" + "k" * 20


@pytest.fixture
def rated(answered) -> Settings:  # noqa: F811
    s, _info = answered
    s = s.with_overrides(release={"id_key": KEY})
    ratings_flow.fn(s, decide="drop", curator="ada")
    return s


def test_the_release_flow_refuses_a_respondents_respelled_name(rated: Settings) -> None:
    s = rated
    with Warehouse.open(s.warehouse_path) as wh:
        rater = wh.ratings.benchmark_frames(10)["ratings"]["reviewer_id"].sort()[0]
        papers = wh.ratings.benchmark_frames(10)["papers"]["paper_id"].to_list()
        # The respondent is Seo-yeon Murphy everywhere the warehouse names them.
        for table in ("authors", "invitations", "survey_invitations"):
            wh._exec(f"UPDATE {table} SET name = 'Seo-yeon Murphy' WHERE author_id = ?", [rater])
        wh._exec("UPDATE papers SET abstract = abstract || ' We thank Murphy, Seo-yeon for the data.' WHERE arxiv_id = ?",
                 [papers[0]])
        wh._exec("UPDATE papers SET abstract = abstract || ' Write to jane.doe \uff20 mit.edu.' WHERE arxiv_id = ?", [papers[1]])
    with pytest.raises(PrivacyAuditFailed) as err:
        release_flow.fn(s)
    names = [h for h in err.value.hits if h.kind == "person_name"]
    assert [(h.table, h.field, h.form, h.person, h.found) for h in names] == [
        ("papers", "abstract", "last_first", rater, "Murphy, Seo-yeon")]
    assert [(h.field, h.form, h.found) for h in err.value.hits if h.kind == "email"] == [
        ("abstract", "obfuscated", "jane.doe@mit.edu")]
    assert not (s.releases_dir / "v1").exists()
    saved = dict(os.environ)
    os.environ.update(settings_env(s))
    try:
        code, _out, msg = run_cli("release")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 6 and "person_name (last_first) 'Murphy, Seo-yeon'" in msg and f"of {rater}" in msg
    assert "j***@mit.edu" in msg and "jane.doe@" not in msg


def test_orcid_ids_are_found_when_their_check_digit_holds_and_named_when_known() -> None:
    known = pl.DataFrame({"person_id": ["P1"], "name": ["Ada Quill"], "email": [None], "orcid": ["0000-0002-1694-233X"]})
    auditor = Auditor(known, [])
    assert auditor.scan("profile 0000-0002-1694-233X here") == [("orcid", "", "0000-0002-1694-233X", "P1")]
    assert auditor.scan("see orcid.org/0000-0002-1825-0097.") == [("orcid", "", "0000-0002-1825-0097", "")]
    for text in ("card 0000-0002-1825-0098", "phone 1234-5678-9012-3456", "12-0000-0002-1825-0097", "0000-0002-1825-0097-1"):
        assert [h for h in auditor.scan(text) if h[0] == "orcid"] == [], text


def test_an_institution_is_a_note_never_a_reason_to_stop() -> None:
    tables = {"papers": pl.DataFrame({"abstract": ["Work done at Carnegie Mellon University with Ada Quill."]})}
    people_ = pl.DataFrame({"person_id": ["P1"], "name": ["Ada Quill"], "email": [None]})
    hits, strings = privacy_audit(tables, people_, ["Carnegie Mellon University"])
    assert strings == 1 and {(h.kind, h.blocks) for h in hits} == {("affiliation", False), ("person_name", True)}
