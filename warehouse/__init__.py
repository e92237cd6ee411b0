"""The warehouse owns every DuckDB connection and every line of SQL."""

from revbench.warehouse.db import Warehouse, utcnow

__all__ = ["Warehouse", "utcnow"]
