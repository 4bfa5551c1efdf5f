"""pairslib — the pairwise sweep of scripts/pairs: its schedule, its flags and its tables."""
