"""schedule — every pair of N endpoints in rounds of disjoint pairs (a round-robin tournament,
the circle method): N - 1 rounds for even N, N for odd N (each round one endpoint sits out), so
that pairs of one round can run at the same time without sharing an endpoint."""


def rounds(endpoints):
    """A list of rounds, each a list of (a, b) pairs with a before b in `endpoints`' order; every
    pair of distinct endpoints appears exactly once."""
    pts = list(endpoints)
    if len(pts) < 2:
        return []
    order = {p: i for i, p in enumerate(pts)}
    if len(pts) % 2:
        pts.append(None)  # the bye: whoever meets it sits this round out
    n = len(pts)
    out = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = pts[i], pts[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b) if order[a] < order[b] else (b, a))
        out.append(pairs)
        pts = [pts[0], pts[-1]] + pts[1:-1]  # endpoint 0 stays, the others turn one place
    return out
