"""pipeline_plots.py — pipeline parallelism: the measured bubble fraction against the number of
micro-batches m beside the formula (p-1)/(v*m+p-1), per schedule (pipeline.jsonl: params
schedule, stages, virtual, micro_batches, compute_mode; metrics bubble_frac, bubble_formula)."""
from . import figures as F
from .rows import metric, num, param


def theory(p, v, m):
    return (p - 1) / (v * m + p - 1)


def bubble_vs_microbatches(rows):
    pr = [r for r in rows if metric(r, "bubble_frac") is not None and num(param(r, "micro_batches"))]
    if not pr:
        return []
    fig, (ax,) = F.new(7.5, 4.4)
    scheds = sorted({str(param(r, "schedule") or r.get("variant")) for r in pr})
    modes = sorted({str(param(r, "compute_mode") or "real") for r in pr})
    ms = [num(param(r, "micro_batches")) for r in pr]
    mmax = max(ms) * 1.5 + 1
    curves = set()
    for i, s in enumerate(scheds):
        for mode in modes:
            sr = sorted((r for r in pr if str(param(r, "schedule") or r.get("variant")) == s
                         and str(param(r, "compute_mode") or "real") == mode),
                        key=lambda r: num(param(r, "micro_batches")))
            if not sr:
                continue
            ax.plot([num(param(r, "micro_batches")) for r in sr], [metric(r, "bubble_frac") for r in sr],
                    "o" if mode == "real" else "s", ls="-" if len(sr) > 1 else "", color=F.PALETTE[i % 10],
                    label=f"{s} measured ({mode} compute)", ms=6)
            for r in sr:
                p = num(param(r, "stages"))
                v = num(param(r, "virtual")) or 1
                if s == "pipedream" or not p or p < 2:
                    continue
                curves.add((int(p), int(v) if s == "interleaved" else 1))
    for p, v in sorted(curves):
        grid = [1 + (mmax - 1) * j / 200 for j in range(201)]
        ax.plot(grid, [theory(p, v, m) for m in grid], "--", color="#444" if v == 1 else "#999", lw=1,
                label=f"(p-1)/({'' if v == 1 else f'{v}'}m+p-1), p={p}")
    ax.set_ylim(0, 1.02)
    F.label_axes(ax, "micro-batches m per step", "bubble fraction (busiest stage's idle / pipeline time)",
                 "pipeline: bubble vs micro-batches")
    cap = ("Measured bubble_frac (median over steps, busiest stage) per schedule against the "
           "formula (p-1)/(v*m+p-1) (dashed; v = model chunks per stage, interleaved only). "
           "PipeDream has no flush, so no bubble formula. Sleep-mode rows replace each layer's "
           "compute by a sleep of its measured time and come closest to the formula on a busy machine.")
    return [F.finish(fig, "pipeline: bubble vs micro-batches", cap)]
