"""Importers: public benchmark layouts and prediction files into the evaluation model.

Every file is checked against its declared format before anything is computed (``checks``):
JSON that parses, required keys present, ratings within the benchmark's scale, scores finite
numbers (never strings, booleans, NaN or infinity). An error is one ``InputError`` line naming
the file, the row or key, and what was expected.

One module per benchmark kind (``goldstandard``, ``lrbench``, ``openreview``, ``warehouse``,
``release``) registers its loader in ``registry``; ``load_benchmark(kind, path)`` imports the one
asked for. Predictions files are read by ``predictions``.
"""

from revbench.evaluation.importers.checks import finite_number, parse_json, rating, read_json
from revbench.evaluation.importers.predictions import coverage, is_lr_flat, load_lr_flat, load_predictions
from revbench.evaluation.importers.registry import KIND_MODULES, LOADERS, benchmark_kind, load_benchmark

__all__ = ["KIND_MODULES", "LOADERS", "benchmark_kind", "coverage", "finite_number", "is_lr_flat",
           "load_benchmark", "load_lr_flat", "load_predictions", "parse_json", "rating", "read_json"]
