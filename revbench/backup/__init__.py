"""Backups of the warehouse and the survey store, written so that they restore, and their restore.

``take`` writes a snapshot (``revbench backup``, the scheduled backup), ``restore`` puts one back
losing no answer a person gave (``revbench restore``), and ``manifest`` is what both agree a
snapshot is: its name, its files with their sha256, and its manifest authenticated with
REVBENCH_BACKUP__KEY. The flow that takes a backup is :mod:`revbench.flows.backup`; the commands
are in :mod:`revbench.app.commands.backup`.

The parts that open a database stay beside the rest of its SQL, as every query does
(``tests/test_structure.py``): :mod:`revbench.warehouse.backup` holds the DuckDB file while it is
copied or replaced, reads what it holds and carries rows into a restored copy, and
:mod:`revbench.warehouse.store.backup` copies, reads and merges the survey store's SQLite file.
This package holds what is neither: files, names, keys, locks, and the order of the steps.
"""
