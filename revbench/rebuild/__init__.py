"""The rebuild of a published benchmark, below the application: what its run fixes and runs
(``run``), its pools against the original's rated pairs (``pools``), the comparison with the
original (``compare``) and the report it writes (``report``).

``revbench.app.rebuild`` drives the run (``revbench demo --world KIND=PATH``: the imported world
behind the replay server, every stage, the progress and the printed results) and hands each step
here. Nothing in this package prints; it stands above the flows it runs and reads (see the floor
plan, ``tests/support/floorplan.py``), so no flow can import it.
"""
