"""gatelib — the regression gate behind scripts/compare: loading runs of several rounds, the
rank test, and the per-row decision (normalised ratio first, absolute figures on the same
machine only)."""
