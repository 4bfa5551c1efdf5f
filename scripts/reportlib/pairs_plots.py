"""pairs_plots.py — the heat map of a scripts/pairs sweep: host x host, the point-to-point
bandwidth of the worst pair between two hosts (scripts/pairslib/render.heat), flagged pairs
outlined in red, timed-out and failed pairs marked T and F on grey."""
import math

from pairslib import analysis, render

from . import figures as F


def heat_map(rows):
    pairs = analysis.merge([p for p in (render.from_row(r) for r in rows) if p])
    if not pairs:
        return []
    s = analysis.summary(pairs)
    hosts = render.hosts_of(pairs)
    cells = render.heat(pairs, s)
    n = len(hosts)
    grid = [[math.nan] * n for _ in range(n)]
    size = min(12.0, 2.5 + 0.6 * n)
    fig, (ax,) = F.new(size + 1.5, size)
    for i, a in enumerate(hosts):
        for j, b in enumerate(hosts):
            v, mark = cells.get((a, b), (None, None))
            if v is not None and v > 0:
                grid[i][j] = math.log10(v)
    im = ax.imshow(grid, cmap="viridis", interpolation="nearest")
    lo, hi = im.get_clim()
    ax.set_facecolor("#dddddd")   # no value: not run, timed out or failed
    bar = fig.colorbar(im, ax=ax)
    bar.set_label("log10 p2p_bw (GB/s)")
    for i, a in enumerate(hosts):
        for j, b in enumerate(hosts):
            v, mark = cells.get((a, b), (None, None))
            if mark is None:
                continue
            text = (render.fmt(v) if v is not None else "") + (mark if mark != "*" else "")
            # dark text on the light (fast) end of the colour map, light on the dark end
            light = v is not None and v > 0 and (hi <= lo or (math.log10(v) - lo) / (hi - lo) < 0.6)
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if light else "black")
            if mark == "*":
                ax.add_patch(F.plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    ax.set_xticks(range(n))
    ax.set_xticklabels(hosts, rotation=90, fontsize=7)
    ax.set_yticks(range(n))
    ax.set_yticklabels(hosts, fontsize=7)
    ax.set_title("point-to-point bandwidth between hosts (worst pair)")
    named, k = s["most_flagged"]
    caption = (f"{len(pairs)} pairs of {n} hosts. Each cell: the p2p_bw (GB/s) of the worst pair between "
               "the two hosts (the diagonal: pairs inside a node). Red outline: flagged (p2p_bw or "
               f"all-reduce busbw: {analysis.describe(s['below'])}); T timed out, F failed (grey: no value).")
    if named:
        caption += f" Host in most flagged pairs: {', '.join(named)} ({k})."
    tnamed, tk = s["most_timeouts"]
    if tnamed:
        caption += f" Host in most timed-out pairs: {', '.join(tnamed)} ({tk})."
    return [F.finish(fig, "pairs heat map", caption)]
