"""revbench: build, refresh and evaluate benchmarks of reviewer expertise."""

__version__ = "0.1.0"
