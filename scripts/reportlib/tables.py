"""tables.py — HTML tables of a program's rows, for any program: the report knows nothing of a
program to draw its table. Columns: what tells rows apart (variant, collective, dtype, ranks,
the params that vary), the median step or operation time and its cv, every metric with its unit
(the headline first), and the check."""
import html

from .rows import check, cv, median_time, num, varying_params


def fmt(v):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int) and abs(v) < 10 ** 7:
        return str(v)
    if isinstance(v, (int, float)):
        a = abs(v)
        if a != 0 and (a >= 1e6 or a < 1e-3):
            return f"{v:.3e}"
        return f"{v:.4g}"
    return str(v)


def esc(v):
    return html.escape(fmt(v) if not isinstance(v, str) else v)


def rows_table(rows, limit=400):
    if not rows:
        return "<p>no rows</p>"
    shown = rows[:limit]
    ident = [("variant", lambda r: r.get("variant"))]
    for k in ("collective", "dtype", "backend", "ranks"):
        if any(r.get(k) is not None for r in shown):
            ident.append((k, lambda r, k=k: r.get(k)))
    vp = varying_params(shown)
    same = {}        # params alike in every row: said once above the table, not in a column
    if len(shown) > 1:
        for k, v in (shown[0].get("params") or {}).items():
            if k not in vp and all((r.get("params") or {}).get(k) == v for r in shown):
                same[k] = v
    else:
        vp = list((shown[0].get("params") or {}).keys())
    heads = [h for h, _ in ident] + vp
    metric_names, units = [], {}
    for r in shown:
        h = r.get("headline")
        if isinstance(h, str) and h not in metric_names and h in (r.get("metrics") or {}):
            metric_names.insert(0, h)
    for r in shown:
        for k, m in (r.get("metrics") or {}).items():
            if k not in metric_names:
                metric_names.append(k)
            if isinstance(m, dict) and isinstance(m.get("unit"), str) and m["unit"]:
                units.setdefault(k, m["unit"])
    out = []
    if same:
        out.append("<p>in every row: " + ", ".join(f"{html.escape(k)}={esc(v)}" for k, v in same.items()) + "</p>")
    out.append('<div class="scroll"><table class="rows"><thead><tr>')
    out += [f"<th>{html.escape(h)}</th>" for h in heads]
    out += ["<th>time<br><small>ms median</small></th><th>cv</th>"]
    out += [f"<th>{html.escape(k)}<br><small>{html.escape(units.get(k, ''))}</small></th>" for k in metric_names]
    out += ["<th>check</th></tr></thead><tbody>"]
    for r in shown:
        cells = [f"<td>{esc(get(r))}</td>" for _, get in ident]
        params = r.get("params") or {}
        cells += [f"<td>{esc(params.get(p))}</td>" for p in vp]
        t = median_time(r)
        cells.append(f"<td>{esc(t * 1e3 if t is not None else None)}</td><td>{esc(cv(r))}</td>")
        for k in metric_names:
            m = (r.get("metrics") or {}).get(k)
            v = num(m.get("value")) if isinstance(m, dict) else None
            cls = ' class="head"' if k == r.get("headline") else ""
            cells.append(f"<td{cls}>{esc(v)}</td>")
        st = check(r)
        cells.append(f'<td class="check-{html.escape(st)}">{html.escape(st)}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    if len(rows) > limit:
        out.append(f"<p class=note>first {limit} of {len(rows)} rows shown; all are in the jsonl.</p>")
    return "".join(out)


def kv_table(pairs, heads=None):
    out = ['<table class="kv">']
    if heads:
        out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr>")
    for pair in pairs:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in pair) + "</tr>")
    out.append("</table>")
    return "".join(out)
