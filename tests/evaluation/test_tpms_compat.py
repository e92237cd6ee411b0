"""TPMS's two tokenisations, its stop list as data, and tokenising each text once per call."""

from __future__ import annotations

import polars as pl
import pytest

from revbench.evaluation.model import PAPERS_SCHEMA, PROFILE_SCHEMA, RATINGS_SCHEMA, Benchmark, Split, frame
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.scorers import tpms as tpms_module
from revbench.evaluation.scorers.tpms import stop_words, tokens
from revbench.evaluation.stemming import stem
from revbench.settings import Settings

# The gold standard's additions to scikit-learn's English stop list (which it uses without "fifty").
GOLD_ADDITIONS = """accordingly aside away briefly came certain certainly computer does edit fify following gave gets
given giving gone got hardly having just kept kg knowledge largely like mainly make mg ml nearly necessarily
normally noted obtain obtained owing particularly past poorly possible possibly potentially predominantly present
previously primarily probably prompt promptly quickly quite readily really recently refs regarding regardless
relatively respectively resulted resulting results rst said second seen shall showed shown shows significantly
similar similarly slightly somewhat soon specifically state states strongly substantially successfully
sufficiently theirs unless use used usefully usefulness using usually various widely""".split()


def test_planted_ligature_splits_under_reference_and_folds_by_default() -> None:
    text = "Robust classi\ufb01cation of e\ufb00ects"  # ﬁ and ﬀ as PDFs extract them
    assert tokens(text) == [stem("robust"), stem("classification"), stem("effects")]
    # The gold-standard code cannot match real ligatures: the word breaks at each of them.
    assert tokens(text, "reference") == [stem("robust"), stem("classi"), stem("cation"), stem("ects")]


def test_reference_replaces_what_its_table_really_matches() -> None:
    # Its byte-string keys decode to three characters each; text holding exactly those
    # characters (UTF-8 read as Latin-1) is what it replaces.
    mojibake = "classi\xef\xac\x81cation"
    assert tokens(mojibake, "reference") == [stem("classification")]
    assert tokens("ærøskøbing ﬂow") == tokens("aeroskobing flow")


def test_stop_list_is_data_equal_to_its_derivation() -> None:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert stop_words() == (frozenset(ENGLISH_STOP_WORDS) - {"fifty"}) | frozenset(GOLD_ADDITIONS)
    assert len(stop_words()) == 411


def _ligature_bench() -> Benchmark:
    subs = frame([dict(paper_id="p1", title="Effective classiﬁcation of images", abstract="We classify images."),
                  dict(paper_id="p2", title="Graph learning", abstract="Message passing on graphs.")], PAPERS_SCHEMA)
    draws = [frame([dict(reviewer_id="r", paper_id=f"a{d}", title="Image classification", abstract="Classifiers for images."),
                    dict(reviewer_id="q", paper_id=f"b{d}", title="Graph neural networks", abstract="Learning on graphs.")],
                   PROFILE_SCHEMA) for d in range(3)]
    ratings = frame([dict(reviewer_id="r", paper_id="p1", rating=5.0), dict(reviewer_id="r", paper_id="p2", rating=1.0)],
                    RATINGS_SCHEMA)
    return Benchmark("lig", "1", subs, draws, [Split("goldstandard", ratings=ratings)])


def test_compat_changes_scores_and_is_recorded(tmp_path) -> None:
    ctx = Context(Settings(data_dir=tmp_path))
    default = make_scorer("tpms", ctx).score(_ligature_bench())
    reference = make_scorer("tpms:compat=reference", ctx).score(_ligature_bench())
    s_def = dict(((r, p), s) for r, p, s in default.draws[0].iter_rows())
    s_ref = dict(((r, p), s) for r, p, s in reference.draws[0].iter_rows())
    assert s_def[("r", "p1")] > s_ref[("r", "p1")]  # "classification" matches only when folded
    assert default.scorer == "tpms" and reference.scorer == "tpms:compat=reference"
    assert "compat=revbench" in default.spec and "compat=reference" in reference.spec


def test_each_distinct_text_is_tokenised_once_per_call(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = tpms_module.tokens

    def counting(text: str, compat: str = "revbench") -> list[str]:
        seen.append(text)
        return real(text, compat)

    monkeypatch.setattr(tpms_module, "tokens", counting)
    bench = _ligature_bench()
    make_scorer("tpms", Context(Settings(data_dir=tmp_path))).score(bench)
    texts = pl.concat([bench.submissions.select("title", "abstract"), *[d.select("title", "abstract") for d in bench.draws]])
    distinct = texts.unique().height
    assert len(seen) == distinct == 4  # three draws share their two profile papers' texts
