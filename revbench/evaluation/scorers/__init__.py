"""Registered scorers (importing this package registers them all)."""

from revbench.evaluation.scorers import embedding, lexical, llm, rate, tpms, trivial  # noqa: F401
from revbench.evaluation.scorers.base import REGISTRY, Context, Scorer, make_scorer, parse_spec

__all__ = ["REGISTRY", "Context", "Scorer", "make_scorer", "parse_spec"]
