"""The application on top of the flows: the command line, the demo and what they print.

Nothing below this package imports it; it builds the settings once and passes them down.
"""
