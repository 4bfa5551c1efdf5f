"""rows.py — reading values out of results rows defensively, and labels that tell rows apart.

Rows come from programs this report may not know (or from a newer schema): every accessor
returns None rather than raising when a field is missing, null, not a number or not finite."""
import math


def num(v):
    """v as a finite float, or None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def metric(row, name):
    m = (row.get("metrics") or {}).get(name)
    return num(m.get("value")) if isinstance(m, dict) else None


def unit(row, name):
    m = (row.get("metrics") or {}).get(name)
    u = m.get("unit") if isinstance(m, dict) else None
    return u if isinstance(u, str) else ""


def param(row, name):
    p = row.get("params")
    return p.get(name) if isinstance(p, dict) else None


def median_time(row):
    t = row.get("time")
    return num(t.get("median")) if isinstance(t, dict) else None


def cv(row):
    t = row.get("time")
    return num(t.get("cv")) if isinstance(t, dict) else None


def check(row):
    c = row.get("check")
    s = c.get("status") if isinstance(c, dict) else None
    return s if isinstance(s, str) else "none"


def varying_params(rows, limit=None):
    """Names of the params whose values differ between rows, in first-seen order."""
    seen, order = {}, []
    for r in rows:
        for k, v in (r.get("params") or {}).items():
            if k not in seen:
                seen[k] = set()
                order.append(k)
            seen[k].add(repr(v))
    for r in rows:   # a param missing from some rows also tells them apart
        for k in order:
            if k not in (r.get("params") or {}):
                seen[k].add("<absent>")
    names = [k for k in order if len(seen[k]) > 1]
    return names[:limit] if limit else names


def labels(rows, params_limit=3, sep=" "):
    """A short label per row: the variant, then whatever else differs (collective, dtype, ranks;
    then, after sep, the params), so that two rows never share a label unless they share all of
    these. A param that only repeats the variant's name (stage=0 of stage0) is left out."""
    def differs(get):
        return len({repr(get(r)) for r in rows}) > 1
    extra = [("", lambda r: r.get("collective"))] if differs(lambda r: r.get("collective")) else []
    if differs(lambda r: r.get("dtype")):
        extra.append(("", lambda r: r.get("dtype")))
    if differs(lambda r: r.get("ranks")):
        extra.append(("np=", lambda r: r.get("ranks")))
    named = [p for p in varying_params(rows)
             if not all(str(param(r, p)) in str(r.get("variant")) for r in rows)][:params_limit]
    out = []
    for r in rows:
        parts = [str(r.get("variant"))]
        parts += [f"{pre}{get(r)}" for pre, get in extra if get(r) is not None]
        ps = [f"{p}={param(r, p)}" for p in named if param(r, p) is not None]
        out.append(" ".join(parts) + (sep + sep.join(ps) if ps else ""))
    return out
