"""The field's encoders by their recipes: the names resolve to the published input, token limit
and pooling (checked against a plain transformers computation on tiny stand-ins), a missing
model fails in one line, and ``A+B`` is OpenReview's ensemble to the last rounded digit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from revbench.errors import UsageError
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.scorers.base import model_text
from revbench.ml.embeddings import EmbeddingCache, settings_cache
from revbench.ml.models import load_model, resolve_model, vector_key
from revbench.ml.recipes import MODELS_SUBDIR, RECIPES, texts
from revbench.settings import Settings
from tests.support.common import run_cli, settings_env
from revbench.evaluation.model import PAPERS_SCHEMA, PROFILE_SCHEMA, RATINGS_SCHEMA, Benchmark, Split, frame
from tests.support.evaluation import bench
from tests.support.models import in_hf_cache, tiny_bert


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The Hugging Face cache this machine may have is not the test's: each test gets an empty one."""
    from huggingface_hub import constants

    cache = tmp_path / "hf"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    EmbeddingCache._shared.clear()
    return cache


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The tiny models these tests plant where the recipes look are declared stand-ins."""
    return settings.with_overrides(embed={"stand_ins": True})


def models_dir(s: Settings) -> Path:
    return s.cache_dir / MODELS_SUBDIR


def _cls_by_hand(folder: Path, batch: list[str]) -> np.ndarray:
    """The published recipe written out with transformers alone: the tokenizer at 512 tokens, the
    first token's last hidden state, L2-normalised."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    hf = AutoModel.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        x = tok(batch, padding=True, truncation=True, max_length=512, return_tensors="pt", return_token_type_ids=False)
        cls = hf(**x).last_hidden_state[:, 0, :]
    return torch.nn.functional.normalize(cls, dim=1).numpy()


def test_each_recipe_states_its_line() -> None:
    assert set(RECIPES) == {"specter", "specter2", "scincl", "minilm"}
    for r in RECIPES.values():
        assert r.repo and r.source and r.max_tokens in (256, 512) and r.pooling in ("cls", "mean")
    assert RECIPES["specter2"].adapter == "allenai/specter2" and RECIPES["specter2"].adapter_name == "proximity"
    assert RECIPES["specter2"].repo == "allenai/specter2_base"
    assert texts("specter", ["T", None], ["A", "B"]) == ["T[SEP]A", "[SEP]B"]
    assert texts("minilm", ["T", None], ["A", "B"]) == ["T A", "B"]
    assert vector_key("minilm") == vector_key("all-MiniLM-L6-v2")  # the packaged model by its recipe name


@pytest.mark.parametrize("name", ["specter", "scincl"])
def test_a_recipe_is_its_published_input_token_and_pooling(settings: Settings, name: str) -> None:
    folder = tiny_bert(models_dir(settings) / RECIPES[name].folder_name, seed=1)
    long_abstract = " ".join(["retrieval"] * 900)  # past 512 word pieces: the recipe cuts where the tokenizer does
    batch = texts(name, ["Dense retrieval", "Graph networks", "Cut"], ["Dual encoders.", None, long_abstract])
    model = load_model(name, models_dir=models_dir(settings), stand_ins=True)
    got = model.encode(batch, normalize_embeddings=True)
    assert np.allclose(got, _cls_by_hand(folder, batch), atol=1e-6)
    spec = resolve_model(name, models_dir=models_dir(settings))
    assert spec.recipe is RECIPES[name] and spec.base_model == str(folder)
    assert vector_key(name).endswith("-512")


def test_a_recipe_is_found_in_the_hugging_face_cache(settings: Settings, empty_hf_cache: Path) -> None:
    snapshot = in_hf_cache(empty_hf_cache, "malteos/scincl", seed=2)
    assert resolve_model("scincl").base_model == str(snapshot)
    got = load_model("scincl", stand_ins=True).encode(texts("scincl", ["A"], ["B"]), normalize_embeddings=True)
    assert np.allclose(got, _cls_by_hand(snapshot, ["A[SEP]B"]), atol=1e-6)


def test_without_weights_a_recipe_fails_in_one_line(settings: Settings) -> None:
    with pytest.raises(UsageError) as err:
        load_model("specter", models_dir=models_dir(settings))
    line = str(err.value)
    assert "\n" not in line and "specter" in line and "allenai/specter" in line
    assert str(models_dir(settings) / "allenai__specter") in line and "models--allenai--specter" in line
    assert "HF_HOME" in line
    # specter2 names its base and its adapter; with the base here, only the adapter.
    tiny_bert(models_dir(settings) / "allenai__specter2_base")
    with pytest.raises(UsageError) as err:
        load_model("specter2", models_dir=models_dir(settings))
    assert "allenai/specter2 (the adapter files" in str(err.value) and "specter2_base (" not in str(err.value)


def test_an_empty_adapter_is_refused_in_one_line(settings: Settings) -> None:
    tiny_bert(models_dir(settings) / "allenai__specter2_base")
    adapter = models_dir(settings) / "allenai__specter2"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "pytorch_adapter.bin").write_bytes(b"")
    with pytest.raises(UsageError, match="a bottleneck adapter this loader does not compute") as err:
        load_model("specter2", models_dir=models_dir(settings), stand_ins=True)
    assert "\n" not in str(err.value) and "adapter_config.json" in str(err.value)


def test_evaluate_names_a_missing_recipe_in_one_line(settings: Settings, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.evaluation import write_openreview

    data = write_openreview(tmp_path / "or")
    for k, v in settings_env(settings).items():
        monkeypatch.setenv(k, v)
    code, _, err = run_cli("evaluate", "-b", f"openreview={data}", "-s", "bm25", "-s", "embedding:model=scincl",
                           "--bootstrap", "0")
    assert code == 2 and err.count("\n") == 1 and "malteos/scincl" in err, err
    assert not (settings.data_dir / "reports").exists()  # refused before bm25 (or anything) ran


def _openreview_merge(vectors: dict[str, dict[str, np.ndarray]], profile: pl.DataFrame, subs: list[str],
                      alpha: float) -> dict[tuple[str, str], float]:
    """openreview-expertise's ensemble as its code computes it (specter2_scincl, matrix merge),
    written out again here in torch: per model, unit vectors (norm + 1e-12), each submission
    against every archive paper, min-max over that whole matrix, the max over a reviewer's papers;
    then alpha * first + (1 - alpha) * second, clamped to [0, 1], rounded to 4 places."""
    import torch

    archive = profile["paper_id"].unique(maintain_order=True).to_list()
    per_model = []
    for model in vectors.values():
        train = torch.tensor(np.stack([model[p] for p in archive]))
        test = torch.tensor(np.stack([model[s] for s in subs]))
        train = train / (train.norm(dim=1, keepdim=True) + 1e-12)
        test = test / (test.norm(dim=1, keepdim=True) + 1e-12)
        p2p = torch.empty((len(subs), len(archive)))
        for i in range(len(subs)):
            p2p[i, :] = torch.sum(test[i, :].unsqueeze(0) * train, dim=1)
        lo, hi = p2p.min(), p2p.max()
        p2p = torch.clamp(p2p, 0.0, 1.0) if hi - lo == 0 else (p2p - lo) / (hi - lo)
        cols = {r: [archive.index(p) for p in g["paper_id"]] for (r,), g in profile.group_by("reviewer_id")}
        per_model.append({r: p2p[:, c].max(dim=1)[0] for r, c in cols.items()})
    out = {}
    for r in per_model[0]:
        merged = per_model[0][r] * alpha + per_model[1][r] * (1 - alpha)
        merged = (torch.clamp(merged, 0.0, 1.0) * 10000).round() / 10000
        out.update({(r, s): merged[j].item() for j, s in enumerate(subs)})
    return out


def _cached_vectors(settings: Settings, profile: pl.DataFrame, subs: pl.DataFrame) -> dict[str, dict[str, np.ndarray]]:
    """Each model's vectors of every profile paper and submission, as the scorer's cache holds them."""
    vectors = {}
    for m in ("specter", "scincl"):
        cache = settings_cache(settings, m)
        pv, sv = cache.embed(model_text(profile, m)), cache.embed(model_text(subs, m))
        vectors[m] = {**dict(zip(profile["paper_id"], pv, strict=True)), **dict(zip(subs["paper_id"], sv, strict=True))}
    return vectors


@pytest.mark.parametrize("alpha", [0.5, 0.3])
def test_the_ensemble_is_openreviews_merge_on_the_same_vectors(settings: Settings, alpha: float) -> None:
    tiny_bert(models_dir(settings) / "allenai__specter", seed=3)
    tiny_bert(models_dir(settings) / "malteos__scincl", seed=4)
    b = bench()
    spec = f"embedding:model=specter+scincl,merge_alpha={alpha}"
    scores = make_scorer(spec, Context(settings)).score(b).draws[0]
    profile, subs = b.draws[0], b.submissions.sort("paper_id")
    vectors = _cached_vectors(settings, profile, subs)
    want = _openreview_merge(vectors, profile, subs["paper_id"].to_list(), alpha)
    got = {(r, p): s for r, p, s in scores.iter_rows()}
    assert got.keys() == want.keys() and len(got) == 4
    assert got == want  # every pair, to the last of its 4 places
    assert all(0.0 <= s <= 1.0 for s in got.values()) and len(set(got.values())) > 1
    # Each model alone is a different scorer: the ensemble is not one of them renamed.
    alone = make_scorer("embedding:model=specter", Context(settings)).score(b).draws[0]
    assert dict(((r, p), s) for r, p, s in alone.iter_rows()) != got


def _word_bench(n_subs: int, n_reviewers: int, seed: int) -> Benchmark:
    """Submissions and profiles of random words, every reviewer rated on every submission."""
    rng = np.random.default_rng(seed)
    words = "retrieval graph protein language reviewer ranking molecule vision policy kernel tensor citation".split()

    def text(n: int) -> str:
        return " ".join(rng.choice(words, n))

    subs = frame([dict(paper_id=f"s{i}", title=text(4), abstract=text(30)) for i in range(n_subs)], PAPERS_SCHEMA)
    profile = frame([dict(reviewer_id=f"r{r}", paper_id=f"r{r}p{k}", title=text(4), abstract=text(30))
                     for r in range(n_reviewers) for k in range(int(rng.integers(1, 5)))], PROFILE_SCHEMA)
    ratings = frame([dict(reviewer_id=f"r{r}", paper_id=f"s{i}", rating=float(rng.integers(1, 6)))
                     for r in range(n_reviewers) for i in range(n_subs)], RATINGS_SCHEMA)
    return Benchmark("words", "1", subs, [profile], [Split("pointwise", ratings=ratings, candidate_lists=True)])


def test_the_ensemble_matches_openreview_on_a_larger_benchmark(settings: Settings) -> None:
    """Both sides sum single-precision products in their own order (a matrix product here, an
    elementwise sum there), so a score sitting on a rounding boundary may round the other way:
    never by more than one step of the fourth place."""
    tiny_bert(models_dir(settings) / "allenai__specter", seed=5)
    tiny_bert(models_dir(settings) / "malteos__scincl", seed=6)
    b = _word_bench(15, 10, seed=7)
    scores = make_scorer("embedding:model=specter+scincl", Context(settings)).score(b).draws[0]
    profile, subs = b.draws[0], b.submissions.sort("paper_id")
    vectors = _cached_vectors(settings, profile, subs)
    want = _openreview_merge(vectors, profile, subs["paper_id"].to_list(), 0.5)
    got = {(r, p): s for r, p, s in scores.iter_rows()}
    assert got.keys() == want.keys() and len(got) == 150
    diffs = np.array([abs(got[k] - want[k]) for k in got])
    assert diffs.max() <= 1e-4 + 1e-7 and (diffs == 0).mean() >= 0.98, diffs.max()


def test_an_ensemble_is_two_models_pooled_by_max(settings: Settings) -> None:
    for spec, needle in [("embedding:model=specter+scincl+minilm", "two models"),
                         ("embedding:model=specter+", "two models"),
                         ("embedding:model=specter+scincl,pooling=mean", "pools each model by max"),
                         ("embedding:model=specter+scincl,merge_alpha=1.5", "merge_alpha")]:
        with pytest.raises(ValueError, match=needle):
            make_scorer(spec, Context(settings))


def test_models_lists_the_recipes_and_what_is_here(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in settings_env(settings).items():
        monkeypatch.setenv(k, v)
    tiny_bert(models_dir(settings) / "allenai__specter")
    code, out, err = run_cli("models", "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in map(json.loads, out.strip().splitlines())}
    assert set(rows) == set(RECIPES)
    # a tiny BERT where SPECTER looks is other weights, not SPECTER: not "here", and says why
    assert rows["specter"]["here"] is False and "vocab_size" in rows["specter"]["mismatch"]
    assert rows["scincl"]["here"] is False and rows["minilm"]["here"] is True and len(rows["minilm"]["digest"]) == 12
    assert "malteos/scincl" in rows["scincl"]["missing"] and rows["specter2"]["adapter"] == "allenai/specter2"
    code, out, _ = run_cli("models")
    assert code == 0 and "specter2" in out and "title + [SEP] +" in out and "other weights" in out


def test_the_pools_and_the_embed_flow_read_a_recipes_text(settings: Settings, tmp_path: Path) -> None:
    from revbench.flows.embed import embed_flow
    from revbench.tasks.embed import benchmark_texts
    from revbench.tasks.pools import paper_texts
    from tests.support.evaluation import write_openreview

    papers = pl.DataFrame({"title": ["T", "U"], "abstract": ["A", None]})
    assert paper_texts(papers, "scincl") == ["T[SEP]A", "U[SEP]"]
    assert paper_texts(papers, "minilm") == paper_texts(papers) == ["T A", "U "]  # the cache's texts as before
    b = bench()
    kinds = benchmark_texts(settings, b, "specter").filter(pl.col("kind") != "keyword_profile")
    assert kinds.height > 0 and all("[SEP]" in t for t in kinds["text"])
    with pytest.raises(UsageError, match=r"embed each of its models \(-m specter -m scincl\)"):
        embed_flow.fn(settings, benchmarks=[f"openreview={write_openreview(tmp_path / 'or')}"], models=["specter+scincl"])
