"""``python -m revbench``: the command line."""

from revbench.app.cli import main

main()
