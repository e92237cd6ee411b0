"""The survey: signed rating links, the survey web server, and the simulated panel's counterpart."""

SIMULATED_TIME_HEADER = "X-Revbench-Simulated-Time"
"""The header in which a SYNTHETIC panel says when, on its simulated clock, it answered (ISO 8601
with a time zone); the survey server records that time only with
REVBENCH_SURVEY__SIMULATED_ANSWER_TIMES=true, and its own clock's otherwise."""
