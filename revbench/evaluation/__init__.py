"""Evaluation of paper-reviewer similarity: benchmarks, scorers, metrics."""
