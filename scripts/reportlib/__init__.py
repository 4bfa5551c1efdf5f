"""reportlib — the HTML report of scripts/report: plots (matplotlib) and tables of a run's rows."""
