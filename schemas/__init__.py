"""Single source of truth for every table: DDL, validation and release schema derive from here."""

from revbench.schemas.model import Column, Table
from revbench.schemas.tables import ALL_TABLES, REJECT_REASONS, TABLES

__all__ = ["ALL_TABLES", "Column", "REJECT_REASONS", "TABLES", "Table"]
