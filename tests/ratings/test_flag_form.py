"""The curator's flag form at scale: 64 flags on 16 respondents, grouped with their evidence,
nothing preset, and the bulk choices (all, by rule, by respondent, one flag) resolved with the
narrowest winning. The release form publishes nothing unless switched on."""

from __future__ import annotations

import json

import polars as pl

from revbench.settings import Settings
from revbench.tasks import curator_forms as forms
from revbench.tasks.ratings import FLAG_SCHEMA

RULES = {"near_zero_variance": {"n": 8, "variance": 0.0}, "straight_lining": {"n": 3, "value": 4},
         "content_insensitive": {"n": 9, "rho": -0.41, "similarity_spread": 0.5, "all_extreme": False},
         "burst": {"papers": 5, "span_seconds": 4.0, "seconds_per_paper": 1.0, "max_in_window": 5}}


def _world() -> tuple[pl.DataFrame, pl.DataFrame]:
    """64 flags (16 respondents x 4 rules) and the respondents' ratings of the flagged papers."""
    flags, ratings = [], []
    for i in range(16):
        who = f"r{i:02d}"
        papers = [f"p{i:02d}{k}" for k in range(3)]
        ratings += [{"reviewer_id": who, "paper_id": p, "rating": 1 + (i + k) % 5} for k, p in enumerate(papers)]
        for rule, evidence in RULES.items():
            flags.append({"flag_id": f"{rule}:{who}", "rule": rule, "subject": "annotator", "reviewer_id": who,
                          "invitation_id": None, "paper_ids": papers, "evidence": json.dumps(evidence),
                          "evidence_hash": "h"})
    return pl.DataFrame(flags, schema=FLAG_SCHEMA).sample(fraction=1.0, shuffle=True, seed=1), pl.DataFrame(ratings)


def test_64_flags_are_grouped_by_respondent_with_rule_answers_and_statistic() -> None:
    flags, ratings = _world()
    groups = forms.flag_groups(flags, ratings)
    assert [g["respondent"] for g in groups] == [f"r{i:02d}" for i in range(16)]
    assert all(len(g["flags"]) == 4 for g in groups) and sum(len(g["flags"]) for g in groups) == 64
    first = {f["rule"]: f for f in groups[0]["flags"]}
    assert first["straight_lining"]["answers"] == "p000=1 p001=2 p002=3"
    assert first["content_insensitive"]["statistic"] == "all_extreme=False, n=9, rho=-0.41, similarity_spread=0.5"
    cfg = Settings().ratings
    md = forms.flag_form_markdown(flags, ratings, cfg)
    # One line per flag, one heading per respondent, each rule with its threshold from the settings.
    assert md.count("\n- `") == 64 and md.count("(4 flags)") == 16
    assert f"variance <= {cfg.variance_max} over >= {cfg.variance_min_ratings} ratings" in md
    assert "- `burst:r15` burst: max_in_window=5, papers=5, seconds_per_paper=1.0, span_seconds=4.0\n" in md
    assert "    - [p150](https://arxiv.org/abs/p150) = 1" in md  # no title known: the linked id and the rating
    assert "Nothing is preset" in md


def test_flagged_papers_are_named_by_title_with_a_link_in_the_form_and_its_entries() -> None:
    flags, ratings = _world()
    long = "A Study of Reviewer Expertise Across Many Venues, Years and Fields of Science"
    titles = {"p000": "Graph Neural Networks for Citation Recall", "p001": long}
    md = forms.flag_form_markdown(flags, ratings, Settings().ratings, titles)
    assert "    - [p000](https://arxiv.org/abs/p000) “Graph Neural Networks for Citation Recall” = 1" in md
    assert f"“{long}” = 2" in md  # whole in the description
    (r00, *_) = forms.respondent_entries(flags, ratings, titles)
    short = forms.short_title(long)
    assert len(short) <= forms.SHORT_TITLE and short.endswith("…") and long.startswith(short[:-1])
    assert r00["evidence"].endswith(f"| answers p000 “Graph Neural Networks for Citation Recall” = 1; p001 “{short}” = 2; "
                                    "p002 = 3")


def test_the_form_has_a_choice_per_rule_and_respondent_with_its_evidence_and_presets_nothing() -> None:
    from revbench.flows.ratings_input import choices, flag_form

    flags, ratings = _world()
    cfg = Settings().ratings
    rules, respondents = forms.rule_entries(flags, cfg), forms.respondent_entries(flags, ratings)
    form = flag_form(rules, respondents)
    props = form.model_json_schema()["properties"]
    assert sorted(k for k in props if k.startswith("rule_")) == [f"rule_{i}" for i in range(4)]
    assert len([k for k in props if k.startswith("respondent_")]) == 16
    assert props["rule_0"]["title"] == "All burst flags" and "(16 flags)" in props["rule_0"]["description"]
    r00 = props["respondent_0"]
    assert r00["title"] == "Respondent r00" and r00["description"] == (
        "burst (max_in_window=5, papers=5, seconds_per_paper=1.0, span_seconds=4.0); content_insensitive (all_extreme=False, "
        "n=9, rho=-0.41, similarity_spread=0.5); near_zero_variance (n=8, variance=0.0); straight_lining (n=3, value=4) | "
        "answers p000 = 1; p001 = 2; p002 = 3")
    # Nothing preset: every choice starts undecided, and the untouched form decides nothing.
    defaults = {k: v.get("default") for k, v in props.items()}
    assert all(defaults[k] == "undecided" for k in defaults if k.startswith(("rule_", "respondent_", "all_flags")))
    assert defaults["decisions"] in (None, [])
    untouched = form()
    by_rule, by_respondent = choices(untouched, rules, respondents)
    assert forms.resolve_flag_decisions(flags, untouched.all_flags, by_rule, by_respondent, {}) == {}
    assert forms.resolve_flag_decisions(flags, None, {}, {}, {"burst:r01": ("undecided", "")}) == {}
    # An answer read back through the form's fields.
    answer = form(respondent_3="drop", rule_0="keep")
    by_rule, by_respondent = choices(answer, rules, respondents)
    assert by_rule["burst"] == "keep" and by_respondent["r03"] == "drop" and by_respondent["r04"] == "undecided"


def test_bulk_choices_resolve_with_the_narrowest_winning() -> None:
    flags, _ = _world()
    every = set(flags["flag_id"])
    keep_all = forms.resolve_flag_decisions(flags, "keep all", {}, {}, {}, reason="looked fine")
    assert set(keep_all) == every and set(keep_all.values()) == {("keep", "looked fine")}
    assert {d for d, _ in forms.resolve_flag_decisions(flags, "drop all", {}, {}, {}).values()} == {"drop"}
    by_rule = forms.resolve_flag_decisions(flags, None, {"burst": "drop", "straight_lining": None}, {}, {})
    assert set(by_rule) == {f for f in every if f.startswith("burst:")} and len(by_rule) == 16
    mixed = forms.resolve_flag_decisions(flags, "keep all", {"burst": "drop"}, {"r03": "drop", "r04": "undecided"},
                                         {"burst:r05": ("keep", "slow reader really"), "straight_lining:r06": (None, "")})
    assert len(mixed) == 64
    assert mixed["burst:r05"] == ("keep", "slow reader really")  # the flag's own choice beats its rule
    assert mixed["straight_lining:r03"][0] == "drop"  # the respondent's beats all
    assert mixed["burst:r04"][0] == "drop" and mixed["straight_lining:r06"][0] == "keep"  # empty choices fall through
    assert sum(d == "drop" for d, _ in mixed.values()) == 16 - 1 + 3  # every burst but r05's, and r03's other three
    assert forms.unknown_ids(["burst:r01", "nope"], every) == ["nope"]


def test_the_release_form_publishes_nothing_unless_switched_on_and_shows_audit_and_changes() -> None:
    from revbench.flows.release_input import ReleaseApproval

    assert ReleaseApproval().publish is False
    changes = "# Changes in v2\n\nAgainst v1.\n\n| table | added | removed |\n|---|---|---|\n" + "\n".join(
        f"| t{i} | {i} | 0 |" for i in range(60))
    md = forms.release_form_markdown("v2", "v1", "Privacy audit passed: 120 strings scanned, no identifiers.", changes)
    assert "Publishing is off" in md and "Privacy audit passed: 120 strings" in md and "Changes against v1" in md
    assert "| t0 | 0 | 0 |" in md and "| t59 |" not in md and "more lines in `CHANGES.md`" in md
    assert "# Changes in v2" not in md
