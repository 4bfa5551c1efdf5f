"""ranktest — the Mann-Whitney U test (Wilcoxon rank-sum), standard library only.

Why a rank test: timings on a shared machine are not normal (long right tails, bimodal when a
neighbour wakes up), and a rank test asks only whether one set of samples tends to lie below
the other. It is exact for small samples without ties (the null distribution of U counted by
recurrence); with ties, exact over every split of the pooled midranks while there are few
(rounds: 252 splits for 5 vs 5), and the normal approximation with tie and continuity
corrections beyond that.
Two-sided, or one-sided ("less": x tends to lie below y; "greater": above).
"""
import math
from functools import lru_cache

EXACT_MAX = 25  # exact null distribution up to this many samples per side
ENUM_MAX = 20000  # with ties, the exact permutation distribution while there are this few splits


def _ranks(values):
    """Midranks (1-based) of values; ties share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


@lru_cache(maxsize=None)
def _u_counts(n, m):
    """counts[u] = number of orderings of n x's and m y's with U = u (x before y pairs)."""
    # f(n, m) = f(n-1, m) shifted by m (the largest value is an x: it beats all m y's)
    #         + f(n, m-1)              (the largest value is a y)
    if n == 0 or m == 0:
        return (1,)
    a = _u_counts(n - 1, m)
    b = _u_counts(n, m - 1)
    out = [0] * (n * m + 1)
    for u, c in enumerate(a):
        out[u + m] += c
    for u, c in enumerate(b):
        out[u] += c
    return tuple(out)


def min_p(n, m, alternative="two-sided"):
    """The smallest p-value any n vs m samples can give (complete separation)."""
    if n == 0 or m == 0:
        return 1.0
    return min(1.0, (2.0 if alternative == "two-sided" else 1.0) / math.comb(n + m, n))


def mann_whitney(x, y, alternative="two-sided"):
    """p-value that x and y come from the same distribution against the alternative
    ("two-sided", "less": x lies below y, "greater": above), and U of x.

    U counts the pairs (xi, yj) with xi > yj (ties count one half); U near n*m/2 is no shift,
    small U says x lies below y.
    """
    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(f"alternative: {alternative!r}")
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        return 1.0, float("nan")
    ranks = _ranks(list(x) + list(y))
    u = sum(ranks[:n]) - n * (n + 1) / 2
    ties = len(set(x) | set(y)) < n + m
    if not ties and n <= EXACT_MAX and m <= EXACT_MAX:
        counts = _u_counts(n, m)
        total = math.comb(n + m, n)
        # the distribution is symmetric about n*m/2: P(U >= u) = P(U <= n*m - u)
        lo = {"two-sided": min(u, n * m - u), "less": u, "greater": n * m - u}[alternative]
        tail = sum(counts[: int(lo) + 1]) / total
        return min(1.0, (2 if alternative == "two-sided" else 1) * tail), u
    if ties and math.comb(n + m, n) <= ENUM_MAX:
        # every way of drawing x's n midranks from the pooled ones is equally likely under the
        # null: count those whose U is as extreme as the one observed (a tolerance for sums of
        # halves)
        from itertools import combinations
        total_rank = n * (n + 1) / 2
        us = [sum(c) - total_rank for c in combinations(ranks, n)]
        eps = 1e-9
        mu = n * m / 2
        if alternative == "less":
            hits = sum(1 for v in us if v <= u + eps)
        elif alternative == "greater":
            hits = sum(1 for v in us if v >= u - eps)
        else:
            hits = sum(1 for v in us if abs(v - mu) >= abs(u - mu) - eps)
        return min(1.0, hits / len(us)), u
    # normal approximation with the tie correction of the variance
    mu = n * m / 2
    groups = {}
    for v in list(x) + list(y):
        groups[v] = groups.get(v, 0) + 1
    t = sum(c ** 3 - c for c in groups.values())
    N = n + m
    var = n * m / 12 * ((N + 1) - t / (N * (N - 1)))
    if var <= 0:
        return 1.0, u  # every sample equal: no evidence of a shift
    if alternative == "two-sided":
        z = (abs(u - mu) - 0.5) / math.sqrt(var)
        return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))), u
    d = mu - u if alternative == "less" else u - mu
    z = (d - 0.5) / math.sqrt(var)
    return min(1.0, 0.5 * math.erfc(z / math.sqrt(2))), u
