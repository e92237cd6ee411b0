"""The institution alias table of the disambiguation's fallback decider and the pools' COI.

The keys themselves (block keys, canonical emails, affiliation keys, institution keys) are minted
in ``revbench.keys``. The alias table (``tasks/reference/institution_aliases.csv``) maps known
variants of an affiliation key to one canonical name for the fallback decider only, never for
the exact rule nor for a stored key.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

from revbench.keys import normalize_affiliation


@lru_cache(maxsize=1)
def alias_table() -> dict[str, str]:
    """Normalised alias -> canonical institution, from the shipped reference table."""
    path = Path(__file__).resolve().parent / "reference" / "institution_aliases.csv"
    table: dict[str, str] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            canonical = normalize_affiliation(row["canonical"]) or ""
            table[canonical] = canonical
            for alias in row["aliases"].split("|"):
                key = normalize_affiliation(alias)
                if key:
                    table[key] = canonical
    return table


def canonical_institution(key: str | None) -> str | None:
    """The canonical institution an affiliation key is a known variant of, if any."""
    if not key:
        return None
    return alias_table().get(key)
