"""analysis — which pairs of a sweep are slow, and which host they have in common.

A pair is compared with the pairs of its own kind only: pairs between two hosts, or pairs inside
one host (two GPUs of a node, --gpus): a node's own links and its network differ by design, and
judged together the slower kind would look faulty. Within a kind, the rule depends on how many
pairs were measured:

- MEDIAN_MIN (10) or more: a pair is flagged when its point-to-point bandwidth or its all-reduce
  bus bandwidth (at the large size) lies more than K median absolute deviations (MAD) below the
  median of the kind. Its small-message times are judged the same way (more than K MAD above the
  median) but only noted, never flagged: unbound ranks on a shared node vary by factors there
  from scheduling alone, and a link that is really bad also loses bandwidth. The median and the
  MAD are taken of the logarithms: bandwidths and times spread by factors, not by amounts, so
  that a pair at half the median is as far from it as one at twice. Where the pairs agree so
  closely that the MAD is below MIN_MAD, MIN_MAD stands in for it: a pair within 10% of the
  median is never flagged, whatever the spread of the others.
- 2 to MEDIAN_MIN - 1: the median is no fair reference there. A slow host among N hosts is in
  N - 1 of the N(N-1)/2 pairs: 2 of 3 pairs with 3 hosts, 3 of 6 with 4, and then the median is
  itself slow (from 5 hosts, 10 pairs, its pairs are a minority). A pair is flagged instead when a
  bandwidth is below the fraction `below` (BELOW, scripts/pairs --flag-below) of the best pair's
  of its kind; a time above the best time over `below` is noted. The best pair is a fair
  reference where the median is not: noise only ever slows a transfer down, and with one slow
  host among 3 or 4 the best pair is one without it. The rule needs one healthy pair of the
  kind (where every pair is slow nothing is flagged) and its fraction is a judgement, not a
  statistic: pairs of like hardware agree far closer than a factor of 2, while a link trained
  down to a lower speed, a transport fallen back to TCP or a host with a failing card lose half
  or more.
- 1: nothing to compare it with; nothing is flagged (its row's of_expected still says how far it
  is from what the link should carry).

Pairs that timed out or failed have no measurement: they are reported as such and named by host,
never flagged by value."""
import math

K = 3.0
MIN_MAD = math.log(1.10) / K
MEDIAN_MIN = 10
BELOW = 0.5
# metric, unit, True where higher is better; the row's fields (scripts/pairs). Bandwidths flag a
# pair, times are noted (above).
METRICS = (("p2p_bw", "GB/s", True), ("p2p_lat", "s", False),
           ("allreduce_busbw", "GB/s", True), ("allreduce_small", "s", False))
FLAGS = ("p2p_bw", "allreduce_busbw")


def merge(pairs):
    """One entry per pair of endpoints from its attempts (a flagged pair is measured again,
    scripts/pairs --retries): the best of each figure over the attempts that ran (noise on a
    node only ever slows a transfer down, so the best is the pair's own speed), status ok if
    one ran, and 'attempts'. Order: each pair's first attempt."""
    out, where = [], {}
    for p in pairs:
        key = (p.get("endpoint_a") or p["host_a"], p.get("endpoint_b") or p["host_b"])
        if key not in where:
            where[key] = len(out)
            out.append(dict(p, attempts=1))
            continue
        m = out[where[key]]
        m["attempts"] += 1
        if p["status"] != "ok":
            continue
        if m["status"] != "ok":
            out[where[key]] = dict(p, attempts=m["attempts"])
            continue
        for name, _unit, higher in METRICS:
            a, b = m.get(name), p.get(name)
            if b is not None and (a is None or (b > a if higher else b < a)):
                m[name] = b
    return out


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def kind(p):
    return "inside a host" if p["host_a"] == p["host_b"] else "between hosts"


def judge(values, higher, below):
    """values: {pair index: value > 0} of one metric and kind. The rule for their number (above):
    {"n", "rule" ('median', 'best' or None), "median", "mad", "best", "limit", "flagged"}."""
    res = {"n": len(values), "rule": None, "median": None, "mad": None, "best": None, "limit": None,
           "flagged": []}
    if len(values) >= MEDIAN_MIN:
        logs = {i: math.log(v) for i, v in values.items()}
        m = median(logs.values())
        mad = median(abs(v - m) for v in logs.values())
        s = max(mad, MIN_MAD)
        lim = m - K * s if higher else m + K * s
        res.update(rule="median", median=math.exp(m), mad=mad, limit=math.exp(lim),
                   flagged=[i for i in values if (logs[i] < lim if higher else logs[i] > lim)])
    elif len(values) >= 2:
        best = max(values.values()) if higher else min(values.values())
        lim = best * below if higher else best / below
        res.update(rule="best", best=best, limit=lim,
                   flagged=[i for i, v in values.items() if (v < lim if higher else v > lim)])
    return res


def flags(pairs, below=BELOW):
    """pairs: dicts with 'host_a', 'host_b', 'status' and the METRICS' values (None where absent).
    Returns {metric: {"flagged": [index, ...], "groups": [judge()'s result with "kind"]}}, one
    group per kind of pair present, over the pairs whose status is ok and whose value is
    positive."""
    out = {}
    kinds = sorted({kind(p) for p in pairs})
    for name, _unit, higher in METRICS:
        groups = []
        for k in kinds:
            values = {i: p[name] for i, p in enumerate(pairs)
                      if kind(p) == k and p["status"] == "ok" and isinstance(p.get(name), (int, float))
                      and p[name] > 0}
            groups.append(dict(judge(values, higher, below), kind=k))
        out[name] = {"flagged": sorted(i for g in groups for i in g["flagged"]), "groups": groups}
    return out


def below_of(pairs):
    """The fraction the sweep was run with (its rows' params.flag_below), else BELOW."""
    return next((p["flag_below"] for p in pairs if p.get("flag_below")), BELOW)


def describe(below):
    """The rules in one sentence, for a caption."""
    return (f"more than {K:g} MAD of the logs below the median of its kind of pair "
            f"({MEDIAN_MIN} pairs or more), or below {below:g} x the best pair's (fewer)")


def most(pairs, picked):
    """The hosts in most of the pairs picked (indices), and that count; ([], 0) when none. A host
    counts once per pair (an intra-node pair of GPUs counts its host once)."""
    count = {}
    for i in picked:
        for h in {pairs[i]["host_a"], pairs[i]["host_b"]}:
            count[h] = count.get(h, 0) + 1
    if not count:
        return [], 0
    top = max(count.values())
    return sorted(h for h, c in count.items() if c == top), top


def summary(pairs, below=None):
    """Everything the table and the verdict need: the outliers per metric, the flagged pairs (on a
    bandwidth), the pairs noted for a slow small-message time, the timed-out and failed pairs,
    and the hosts in most of each. below: the fraction of the best pair (few pairs), by default
    the sweep's own (below_of)."""
    below = below or below_of(pairs)
    f = flags(pairs, below)
    flagged = sorted({i for name in FLAGS for i in f[name]["flagged"]})
    noted = sorted({i for name, r in f.items() if name not in FLAGS for i in r["flagged"]})
    timeouts = [i for i, p in enumerate(pairs) if p["status"] == "timeout"]
    failed = [i for i, p in enumerate(pairs) if p["status"] == "failed"]
    return {"metrics": f, "below": below, "flagged": flagged, "noted": noted, "timeouts": timeouts,
            "failed": failed, "most_flagged": most(pairs, flagged), "most_timeouts": most(pairs, timeouts),
            "most_failed": most(pairs, failed)}
