"""The command line's commands, one module per stage, each beside what it prints; ``revbench.app.cli``
registers them on the application in the order ``--help`` shows them."""
