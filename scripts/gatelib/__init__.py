"""gatelib — the regression gate behind scripts/compare: loading runs of several rounds, the
rank test, and the per-row decision (normalised ratio first, absolute figures on the same
machine only). Also what every script in scripts/ shares for its inputs: cli.py (option checks,
one line and exit 2 or 3, never a traceback) and files.py (reading and writing a results
directory's files safely)."""
