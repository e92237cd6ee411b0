"""Registered scorers: ``make_scorer("tpms:regime=title")`` imports and builds one by its spec."""

from revbench.evaluation.scorers.base import REGISTRY, SCORER_MODULES, Context, Scorer, make_scorer, parse_spec

__all__ = ["REGISTRY", "SCORER_MODULES", "Context", "Scorer", "make_scorer", "parse_spec"]
