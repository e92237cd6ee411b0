"""The full text's reference list: what each ``<biblStruct>`` of ``<listBibl>`` gives, and what
only looks like an identifier."""

from __future__ import annotations

import json

import pytest

from revbench.clients.tei import TeiError, arxiv_in_idno, arxiv_in_text, normalize_doi, parse_tei_references


def _tei(*bibls: str, body: str = "") -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?><TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader/>'
            f'<text><body>{body}</body><back><div type="references"><listBibl>{"".join(bibls)}</listBibl></div></back>'
            "</text></TEI>")


def _bibl(inner: str, ident: str = "b0") -> str:
    return f'<biblStruct xml:id="{ident}">{inner}</biblStruct>'


def test_a_full_reference_gives_every_field() -> None:
    bibl = _bibl(
        '<analytic><title level="a" type="main">Attention Is All You Need</title>'
        '<author><persName><forename type="first">Ashish</forename><surname>Vaswani</surname></persName></author>'
        '<author><persName><forename type="first">Noam</forename><forename type="middle">M</forename>'
        '<surname>Shazeer</surname></persName></author>'
        '<idno type="doi">https://doi.org/10.5555/3295222.3295349</idno></analytic>'
        '<monogr><title level="m">NeurIPS</title><imprint><date type="published" when="2017-12-04"/></imprint></monogr>'
        '<note>arXiv preprint arXiv:1706.03762v5</note>'
        '<note type="raw_reference">A. Vaswani et al. 2017. Attention is all you need. In NeurIPS.</note>')
    body = '<p><ref type="bibr" target="#b0">[1]</ref> and again <ref type="bibr" target="#b0">[1]</ref></p>'
    [ref] = parse_tei_references(_tei(bibl, body=body))
    assert (ref.ordinal, ref.title, ref.year) == (0, "Attention Is All You Need", 2017)
    assert (ref.doi, ref.arxiv, ref.contexts) == ("10.5555/3295222.3295349", "1706.03762", 2)
    row = ref.as_citation("2101.00001")
    assert (row["citing_arxiv_id"], row["source"], row["cited_doi"], row["cited_arxiv"]) == (
        "2101.00001", "grobid", "10.5555/3295222.3295349", "1706.03762")
    extra = json.loads(row["external_ids"])
    assert extra["authors"] == ["Ashish Vaswani", "Noam M Shazeer"]
    assert extra["raw_reference"].startswith("A. Vaswani et al. 2017.")
    assert extra["idno"] == {"doi": "https://doi.org/10.5555/3295222.3295349"} and extra["grobid_id"] == "b0"


def test_entries_without_title_author_or_date_are_kept_in_order() -> None:
    refs = parse_tei_references(_tei(
        _bibl('<monogr><title/><imprint/></monogr>', "b0"),
        _bibl('<monogr><title level="m" type="main">Only a book</title><imprint><date>in press</date></imprint></monogr>', "b1"),
        _bibl('<monogr><title level="j">Nature</title><imprint><date>March 1999</date></imprint></monogr>', "b2")))
    assert [(r.ordinal, r.title, r.year, r.authors) for r in refs] == [
        (0, None, None, []), (1, "Only a book", None, []), (2, "Nature", 1999, [])]
    assert json.loads(refs[0].as_citation("x")["external_ids"]) == {"grobid_id": "b0"}


def test_a_header_only_tei_has_no_references() -> None:
    assert parse_tei_references('<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader/><text/></TEI>') == []


@pytest.mark.parametrize("value", ["12. 046029", "978-3-16-148410-0", "1234.5678", "2345.6789", "pp. 1706-1712",
                                   "0704.123456", "1501.1234", "NICHE PARTITIONING 7477"])
def test_an_untyped_idno_that_is_not_an_arxiv_id_is_not_taken_as_one(value: str) -> None:
    assert arxiv_in_idno(value) is None
    [ref] = parse_tei_references(_tei(_bibl(f"<analytic><idno>{value}</idno></analytic>")))
    assert ref.arxiv is None and ref.doi is None


@pytest.mark.parametrize(("value", "want"), [
    ("abs/1711.04168v3", "1711.04168"), ("arXiv:2101.00001", "2101.00001"), ("0704.0001", "0704.0001"),
    ("hep-th/9901001v2", "hep-th/9901001"), ("https://arxiv.org/abs/1906.08237", "1906.08237")])
def test_an_untyped_idno_that_is_an_arxiv_id(value: str, want: str) -> None:
    [ref] = parse_tei_references(_tei(_bibl(f"<analytic><idno>{value}</idno></analytic>")))
    assert ref.arxiv == want


@pytest.mark.parametrize(("raw", "want"), [
    ("https://doi.org/10.1145/3292500.3330701", "10.1145/3292500.3330701"),
    ("http://dx.doi.org/10.1002%2Fmus.1137.", "10.1002/mus.1137"),
    ("https://www.tandfonline.com/doi/abs/10.1080/0020739X.2019.1", "10.1080/0020739x.2019.1"),
    ("DOI: 10.1212/ WNL.45.10.1848", "10.1212/wnl.45.10.1848"),
    ("12.2316/WNL.32.7.122", None), ("", None)])
def test_a_doi_inside_a_url_or_label_is_stripped_to_the_doi(raw: str, want: str | None) -> None:
    assert normalize_doi(raw) == want


def test_dois_typed_either_case_and_untyped_only_when_labelled() -> None:
    refs = parse_tei_references(_tei(
        _bibl('<analytic><idno type="DOI">https://doi.org/10.1000/ABC</idno><idno>doi: 10.9/other</idno></analytic>', "b0"),
        _bibl('<analytic><idno type="doi">10.1000/xyz</idno></analytic>', "b1"),
        _bibl('<analytic><idno>doi: 10.1002/ mus.1137</idno></analytic>', "b2"),
        _bibl('<analytic><idno>10.1000/unlabelled</idno></analytic>', "b3"),
        _bibl('<analytic><idno type="DOI">10.48550/arXiv.2301.00234</idno></analytic>', "b4")))
    assert [r.doi for r in refs] == ["10.1000/abc", "10.1000/xyz", "10.1002/mus.1137", None, "10.48550/arxiv.2301.00234"]
    assert refs[4].arxiv == "2301.00234"  # DataCite's arXiv DOI names the id


@pytest.mark.parametrize(("note", "want"), [
    ("arXiv preprint arXiv:1706.03762", "1706.03762"), ("ArXiv, abs/1412.6980.", "1412.6980"),
    ("Preprint hep-th/9901001", "hep-th/9901001"), ("arXiv preprint math.AG/0601001v2", "math/0601001"),
    ("pages 1706.03762", None), ("arXiv:1713.00001", None), ("J Neurol Sci", None), ("foo-bar/9901001", None)])
def test_arxiv_ids_in_notes(note: str, want: str | None) -> None:
    assert arxiv_in_text(note) == want
    [ref] = parse_tei_references(_tei(_bibl(f"<monogr><title>T</title></monogr><note>{note}</note>")))
    assert ref.arxiv == want


def test_malformed_tei_is_one_line_naming_the_file() -> None:
    with pytest.raises(TeiError) as err:
        parse_tei_references(b'<TEI xmlns="http://www.tei-c.org/ns/1.0"><text><listBibl>\n<biblStruct>\n</TEI>',
                             "2101.00001v1.pdf")
    message = str(err.value)
    assert message.startswith("2101.00001v1.pdf: malformed TEI:") and "\n" not in message
    with pytest.raises(TeiError, match=r"^paper\.pdf: not a TEI document$"):
        parse_tei_references(b"<html><body>busy</body></html>", "paper.pdf")
