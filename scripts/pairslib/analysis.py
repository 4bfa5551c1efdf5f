"""analysis — which pairs of a sweep are slow, and which host they have in common.

A pair is flagged when its point-to-point bandwidth or its all-reduce bus bandwidth (at the large
size) lies more than K median absolute deviations (MAD) below the median of the measured pairs.
Its small-message times are judged the same way (more than K MAD above the median) but only
noted, never flagged: unbound ranks on a shared node vary by factors there from scheduling
alone, and a link that is really bad also loses bandwidth. The
median and the MAD are taken of the logarithms: bandwidths and times spread by factors, not by
amounts, so that a pair at half the median is as far from it as one at twice. Where the pairs
agree so closely that the MAD is below MIN_MAD, MIN_MAD stands in for it: a pair within 10% of
the median is never flagged, whatever the spread of the others. With fewer than MIN_PAIRS measured pairs nothing is
flagged (a median of two says nothing about either). Pairs that timed out or failed have no
measurement: they are reported as such and named by host, never flagged by value."""
import math

K = 3.0
MIN_MAD = math.log(1.10) / K
MIN_PAIRS = 3
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


def flags(pairs):
    """pairs: dicts with 'status' and the METRICS' values (None where absent). Returns
    {metric: {"median", "mad", "limit", "flagged": [index, ...], "n"}} over the pairs whose
    status is ok and whose value is positive."""
    out = {}
    for name, _unit, higher in METRICS:
        idx = [i for i, p in enumerate(pairs)
               if p["status"] == "ok" and isinstance(p.get(name), (int, float)) and p[name] > 0]
        res = {"n": len(idx), "median": None, "mad": None, "limit": None, "flagged": []}
        if len(idx) >= MIN_PAIRS:
            logs = {i: math.log(pairs[i][name]) for i in idx}
            m = median(logs.values())
            mad = median(abs(v - m) for v in logs.values())
            s = max(mad, MIN_MAD)
            lim = m - K * s if higher else m + K * s
            res.update(median=math.exp(m), mad=mad, limit=math.exp(lim),
                       flagged=[i for i in idx if (logs[i] < lim if higher else logs[i] > lim)])
        out[name] = res
    return out


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


def summary(pairs):
    """Everything the table and the verdict need: the outliers per metric, the flagged pairs (on a
    bandwidth), the pairs noted for a slow small-message time, the timed-out and failed pairs, and the hosts in most of each."""
    f = flags(pairs)
    flagged = sorted({i for name in FLAGS for i in f[name]["flagged"]})
    noted = sorted({i for name, r in f.items() if name not in FLAGS for i in r["flagged"]})
    timeouts = [i for i, p in enumerate(pairs) if p["status"] == "timeout"]
    failed = [i for i, p in enumerate(pairs) if p["status"] == "failed"]
    return {"metrics": f, "flagged": flagged, "noted": noted, "timeouts": timeouts, "failed": failed,
            "most_flagged": most(pairs, flagged), "most_timeouts": most(pairs, timeouts),
            "most_failed": most(pairs, failed)}
