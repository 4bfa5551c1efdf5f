"""render — a sweep's rows (pairs.jsonl) as the table, the host x host heat map and the verdict
that scripts/pairs prints at its end and scripts/report prints for a directory that holds them."""
import math
import re

from . import analysis

UNITS = {"p2p_lat": ("us", 1e6), "allreduce_small": ("us", 1e6), "p2p_bw": ("GB/s", 1),
         "allreduce_busbw": ("GB/s", 1)}
SHORT = {"p2p_lat": "p2p_lat", "p2p_bw": "p2p_bw", "allreduce_small": "ar_small",
         "allreduce_busbw": "ar_busbw"}


def _num(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def from_row(row):
    """A pairs.jsonl row as the dict analysis reads; None for a row of another shape."""
    p = row.get("params") if isinstance(row.get("params"), dict) else {}
    m = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
    if not all(isinstance(p.get(k), str) for k in ("host_a", "host_b", "status")):
        return None
    d = {k: p.get(k) for k in ("host_a", "host_b", "endpoint_a", "endpoint_b", "status", "round")}
    below = _num(p.get("flag_below"))
    d["flag_below"] = below if below is not None and 0 < below < 1 else None
    d["endpoint_a"] = d["endpoint_a"] or d["host_a"]
    d["endpoint_b"] = d["endpoint_b"] or d["host_b"]
    for name, _u, _h in analysis.METRICS:
        v = m.get(name)
        d[name] = _num(v.get("value")) if isinstance(v, dict) else None
    c = row.get("check") if isinstance(row.get("check"), dict) else {}
    d["message"] = c.get("message") if isinstance(c.get("message"), str) else ""
    return d


def fmt(v, scale=1):
    if v is None:
        return "n/a"
    v *= scale
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def natural(name):
    """node2 before node10."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"([0-9]+)", name)]


def hosts_of(pairs):
    return sorted({h for p in pairs for h in (p["host_a"], p["host_b"])}, key=natural)


def heat(pairs, s, metric="p2p_bw"):
    """{(host, host): (value or None, mark)} over host pairs, symmetric; the value is the worst
    of the pairs between the two hosts (GPU endpoints: several), the mark 'T' where one timed
    out, 'F' where one failed, '*' where one was flagged, '' otherwise. The diagonal holds the
    intra-node pairs, where there are any."""
    flagged = set(s["flagged"])
    _u, _s, higher = next(m for m in analysis.METRICS if m[0] == metric)
    cells = {}
    for i, p in enumerate(pairs):
        key = tuple(sorted((p["host_a"], p["host_b"])))
        v, mark = cells.get(key, (None, ""))
        x = p.get(metric)
        if x is not None:
            v = x if v is None else (min(v, x) if higher else max(v, x))
        new = "T" if p["status"] == "timeout" else "F" if p["status"] == "failed" else "*" if i in flagged else ""
        rank = "TF*".find
        if new and (not mark or rank(new) < rank(mark)):
            mark = new
        cells[key] = (v, mark)
    out = {}
    for (a, b), c in cells.items():
        out[(a, b)] = out[(b, a)] = c
    return out


def rule_text(name, g, below):
    """One metric's verdict over one kind of pair: its reference, its limit and what fell past it
    (pairslib.analysis: the median with 10 pairs or more, the best pair below that)."""
    unit, scale = UNITS[name]
    side = "flagged below" if name in analysis.FLAGS else "noted above"
    if g["rule"] == "median":
        return (f"median {fmt(g['median'], scale)} {unit} over {g['n']} pairs; {side} "
                f"{fmt(g['limit'], scale)} {unit} ({analysis.K:g} MAD of the logs, MAD {g['mad']:.3f}): "
                f"{len(g['flagged'])}")
    if g["rule"] == "best":
        ref = f"{below:g} x the best" if name in analysis.FLAGS else f"the best / {below:g}"
        return (f"best {fmt(g['best'], scale)} {unit} of {g['n']} pairs (fewer than "
                f"{analysis.MEDIAN_MIN}: no median); {side} {fmt(g['limit'], scale)} {unit} "
                f"({ref}): {len(g['flagged'])}")
    return f"{g['n']} measured pair(s): nothing to compare with"


def lines(rows, title="pairs"):
    """The text: table, heat map, flags and verdict; and whether anything is wrong (a flagged,
    timed-out or failed pair)."""
    pairs = analysis.merge([p for p in (from_row(r) for r in rows) if p])
    s = analysis.summary(pairs)
    out = [f"# {title}: {len(pairs)} pair(s) of {len(hosts_of(pairs))} host(s)"]
    head = f"#{'round':>5} {'endpoint_a':>16} {'endpoint_b':>16} {'status':>8}"
    units = f"#{'':>5} {'':>16} {'':>16} {'':>8}"
    for name, _unit, _h in analysis.METRICS:
        head += f" {SHORT[name]:>9}"
        units += f" {UNITS[name][0]:>9}"
    out += [head + "  outlier on", units]
    for i, p in enumerate(pairs):
        line = f" {str(p.get('round') if p.get('round') is not None else '-'):>5} {p['endpoint_a']:>16} {p['endpoint_b']:>16} {p['status']:>8}"
        for name, _unit, _h in analysis.METRICS:
            line += f" {fmt(p[name], UNITS[name][1]):>9}"
        on = [SHORT[n] + ("" if n in analysis.FLAGS else "(noted)")
              for n, r in s["metrics"].items() if i in r["flagged"]]
        if p.get("attempts", 1) > 1:
            on.append(f"(best of {p['attempts']} attempts)")
        out.append(line + ("  " + ",".join(on) if on else ""))

    hosts = hosts_of(pairs)
    cells = heat(pairs, s)
    w = max([9] + [len(h) for h in hosts]) + 1
    out.append(f"# heat map: p2p_bw (GB/s) between hosts, the worst of their pairs; "
               "* flagged, T timed out, F failed, . not run")
    out.append("#" + " " * (w - 1) + "".join(f"{h:>{w}}" for h in hosts))
    for a in hosts:
        line = f"#{a:>{w - 1}}"
        for b in hosts:
            v, mark = cells.get((a, b), (None, None))
            cell = "." if mark is None else (fmt(v) if v is not None else "") + mark
            line += f"{cell or '-':>{w}}"
        out.append(line)

    for name, r in s["metrics"].items():
        out += [f"# {SHORT[name]} {g['kind']}: " + rule_text(name, g, s["below"]) for g in r["groups"]]

    def names(idx):
        return ", ".join(f"{pairs[i]['endpoint_a']}-{pairs[i]['endpoint_b']}" for i in idx)
    bad = False
    for key, what, word in (("flagged", "flagged", "flagged"), ("timeouts", "timed out", "timeout"),
                            ("failed", "failed", "failure")):
        if not s[key]:
            continue
        bad = True
        hosts_top, n = s["most_" + ("timeouts" if key == "timeouts" else key)]
        out.append(f"# {what}: {len(s[key])} pair(s): {names(s[key])}")
        for i in s[key] if key != "flagged" else []:
            if pairs[i]["message"]:
                out.append(f"#   {pairs[i]['endpoint_a']}-{pairs[i]['endpoint_b']}: {pairs[i]['message']}")
        tie = f" (a tie: {n} each)" if len(hosts_top) > 1 else f" (in {n} of them)"
        out.append(f"# host in most {word} pairs: {', '.join(hosts_top)}{tie}")
    if s["noted"]:
        out.append(f"# noted, not flagged (a small-message time above its limit): {names(s['noted'])}")
    if not bad:
        out.append("# no pair flagged, timed out or failed")
    return out, bad
