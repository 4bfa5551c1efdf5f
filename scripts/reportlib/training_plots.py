"""training_plots.py — plots of the training layer's rows: the step time stacked by phase (any
program whose rows carry the phases), ZeRO's memory per stage against its formula, activation
checkpointing's memory against k, and mixed precision's loss curves and loss scale.

Every reader is defensive: rows from a program that lacks a field give no plot, not an error."""
import os

from . import figures as F
from .rows import labels, metric, param, median_time, num

# The step's phases as the training layer writes them (results/schema.md), in drawing order.
# 'comm' overlaps compute; the part of it nothing overlapped (exposed_comm) is what adds to the
# step, so it is drawn when present and comm only when it is not.
PHASES = ["data", "compute", "recompute", "transfer", "exposed_comm", "bubble"]


def phase_bars(rows, program):
    timed = [r for r in rows if median_time(r) is not None
             and any(metric(r, p) is not None for p in PHASES + ["comm"])]
    if not timed:
        return []
    names = labels(timed, 2, "\n")
    fig, (ax,) = F.new(max(7.0, 1.25 * len(timed) + 2), 4.6)
    bottoms = [0.0] * len(timed)
    used = []
    for ph in PHASES + ["comm", "other"]:
        vals = []
        for i, r in enumerate(timed):
            if ph == "comm":
                v = metric(r, "comm") if metric(r, "exposed_comm") is None else None
            elif ph == "other":
                v = max(0.0, median_time(r) - bottoms[i] / 1e3)
            else:
                v = metric(r, ph)
            vals.append((v or 0.0) * 1e3)
        if not any(vals):
            continue
        used.append(ph)
        ax.bar(range(len(timed)), vals, bottom=bottoms, color=F.colour(ph), label=ph.replace("_", " "),
               hatch="//" if ph == "other" else None, edgecolor="white", lw=0.5)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    ax.plot(range(len(timed)), [median_time(r) * 1e3 for r in timed], "k_", ms=18, mew=2,
            label="step (median)")
    F.label_bars(ax, names, "ms per step", f"{program}: step time by phase")
    cap = ("Each phase is the median over the timed steps of its slowest rank (results/schema.md), "
           "so the stack need not add up to the step exactly; 'exposed comm' is the communication "
           "nothing overlapped, 'other' the rest of the median step (optimizer, waits).")
    return [F.finish(fig, f"{program}: step time by phase", cap)]


def zero_memory(rows):
    """Measured bytes per rank by category beside the ZeRO formula, one pair of bars per stage
    (the first collective's rows: memory does not depend on the collective)."""
    zr = [r for r in rows if param(r, "stage") is not None and metric(r, "mem_params") is not None]
    if not zr:
        return []
    first_coll = zr[0].get("collective")
    zr = [r for r in zr if r.get("collective") == first_coll]
    zr.sort(key=lambda r: (str(param(r, "stage")), str(param(r, "precision"))))
    names = labels(zr, 2, "\n")
    fig, (ax,) = F.new(max(8.0, 1.5 * len(zr) + 5), 4.6)
    cats = [("params", 0), ("grads", 2), ("optim", 1)]
    x = list(range(len(zr)))
    for side, off, pre, hatch in (("measured", -0.2, "mem_", None), ("formula", 0.2, "model_", "..")):
        bottom = [0.0] * len(zr)
        for cat, ci in cats:
            vals = [F.mib(metric(r, pre + cat) or 0) for r in zr]
            ax.bar([i + off for i in x], vals, 0.38, bottom=bottom, color=F.PALETTE[ci], hatch=hatch,
                   edgecolor="white", lw=0.5, label=f"{cat} ({side})")
            bottom = [b + v for b, v in zip(bottom, vals)]
        if side == "measured":
            comm = [F.mib(metric(r, "mem_comm") or 0) for r in zr]
            if any(comm):
                ax.bar([i + off for i in x], comm, 0.38, bottom=bottom, color=F.PALETTE[7], hatch="xx",
                       edgecolor="white", lw=0.5, label="comm buffers (outside the formula)")
            bottom = [b + c for b, c in zip(bottom, comm)]
        for i, r in enumerate(zr):
            tot = metric(r, "mem_total" if side == "measured" else "mem_model_total")
            if tot is not None:
                ax.annotate(f"{F.mib(tot):.2f}", (i + off, bottom[i]), ha="center", va="bottom", fontsize=7)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    F.label_bars(ax, names, "MiB per rank (rank 0)",
                 f"zero: memory per rank, measured (left) vs the formula (right), {first_coll}")
    cap = ("Bytes this rank holds by category as the allocator counted them (mem_*) beside the ZeRO "
           "paper's formula for the same categories (model_*); the numbers above the bars are "
           "mem_total and mem_model_total. Communication buffers, which the formula leaves out, "
           "are stacked on the measured bar.")
    return [F.finish(fig, "zero: memory per stage vs formula", cap)]


def checkpoint_memory(rows):
    """Peak activation bytes against k (every_k rows), the analytic model beside them and
    store-all's peak as a line."""
    kr = sorted((r for r in rows if num(param(r, "k")) is not None and metric(r, "activ_peak") is not None),
                key=lambda r: num(param(r, "k")))
    if not kr:
        return []
    fig, (ax,) = F.new(7, 4.2)
    for i, v in enumerate(sorted({r.get("variant") for r in kr}, key=str)):
        vr = [r for r in kr if r.get("variant") == v]
        ax.plot([num(param(r, "k")) for r in vr], [F.mib(metric(r, "activ_peak")) for r in vr], "o-",
                color=F.PALETTE[i], label=f"{v}: measured peak")
        mod = [(num(param(r, "k")), metric(r, "activ_model")) for r in vr if metric(r, "activ_model") is not None]
        if mod:
            ax.plot([k for k, _ in mod], [F.mib(m) for _, m in mod], "x--", color=F.PALETTE[i], ms=8,
                    label=f"{v}: model")
    store = [metric(r, "activ_store_all") for r in rows if metric(r, "activ_store_all") is not None]
    if store:
        ax.axhline(F.mib(store[0]), color="#555", ls=":", label="store all (model)")
    layers = [num(param(r, "layers")) for r in kr if num(param(r, "layers"))]
    if layers:
        ax.axvline(layers[0] ** 0.5, color="#999", ls="-.", lw=0.8, label=f"k = sqrt(N), N = {layers[0]:g}")
    F.label_axes(ax, "k (layers per checkpointed segment)", "peak activation MiB per rank",
                 "checkpoint: activation memory vs k")
    cap = ("activ_peak (counted by the allocator at the step's peak) against the plan's longest "
           "segment k, beside the analytic peak (activ_model) and store-all's; the minimum of "
           "N/k + k lies near k = sqrt(N).")
    return [F.finish(fig, "checkpoint: memory vs k", cap)]


def curves_from_tsv(path):
    """precision.curve.tsv as [(variant, [(step, loss, scale), ...])], in the file's order. A
    line that is not variant, step, loss, scale raises ValueError naming file:line."""
    runs = {}
    with open(path, encoding="utf-8") as f:
        head = f.readline().rstrip("\n").split("\t")
        if head[:4] != ["variant", "step", "loss", "scale"]:
            raise ValueError(f"{path}:1: expected the header variant, step, loss, scale")
        for no, line in enumerate(f, 2):
            parts = line.rstrip("\n").split("\t")
            try:
                runs.setdefault(parts[0], []).append((int(parts[1]), num(float(parts[2])), num(float(parts[3]))))
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{no}: expected variant, step, loss, scale separated by tabs") from None
    return list(runs.items())


def curves_from_rows(rows):
    """The same from the rows' metrics loss_at_<step> and scale_at_<step>: results written
    before the curve had its own file."""
    runs = []
    for r, name in zip(rows, labels(rows)):
        pts = []
        for key, m in (r.get("metrics") or {}).items():
            if key.startswith("loss_at_") and key[8:].isdigit() and isinstance(m, dict):
                pts.append((int(key[8:]), num(m.get("value")), metric(r, "scale_at_" + key[8:])))
        runs.append((name, pts))
    return runs


def precision_curves(rows, curve_path=None):
    """Loss against step for each precision / loss-scaling run, and the loss scale against step
    where it changes (dynamic scaling): from precision.curve.tsv (curve_path) where the run
    has one, else from the rows."""
    found = curves_from_tsv(curve_path) if curve_path and os.path.exists(curve_path) else curves_from_rows(rows)
    runs = []
    for name, pts in found:
        pts = sorted(p for p in pts if p[1] is not None)
        if pts:
            runs.append((name, pts))
    if not runs:
        return []
    scaled = [(n, p) for n, p in runs if len({s for _, _, s in p if s is not None}) > 1]
    fig, axes = F.new(12 if scaled else 7, 4.2, 2 if scaled else 1)
    ax = axes[0]
    for i, (name, pts) in enumerate(runs):
        ax.plot([s for s, _, _ in pts], [v for _, v, _ in pts], "-", marker=".", color=F.PALETTE[i % 10],
                label=name)
    if all(v > 0 for _, pts in runs for _, v, _ in pts):
        ax.set_yscale("log")
    F.label_axes(ax, "step", "training loss", "precision: loss curves", 6)
    if scaled:
        ax2 = axes[1]
        for i, (name, pts) in enumerate(runs):
            if (name, pts) in scaled:
                sp = [(s, sc) for s, _, sc in pts if sc is not None and sc > 0]
                ax2.step([s for s, _ in sp], [sc for _, sc in sp], where="post", color=F.PALETTE[i % 10],
                         label=name)
        ax2.set_yscale("log", base=2)
        F.label_axes(ax2, "step", "loss scale", "precision: dynamic loss scale", 6)
    cap = ("The loss every K steps of each run (precision.curve.tsv; in older results the rows' loss_at_<step>)"
           + ("; right: the loss scale at those steps: halved on an overflow, "
              "grown after a run of good steps." if scaled else "."))
    return [F.finish(fig, "precision: loss curves", cap)]
