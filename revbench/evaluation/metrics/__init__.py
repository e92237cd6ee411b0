"""One metric per module, each with its formula in the docstring."""
