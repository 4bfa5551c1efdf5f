"""allreduce_plots.py — collectives: busbw and latency against message size per implementation
(log-log), with each implementation's fitted alpha-beta line t = alpha + beta*S and the sizes at
which the fastest fitted implementation changes (the crossovers) marked.

Rows read (allreduce.jsonl): measured rows (variant = implementation, params op, mode, bytes;
time.median, metrics busbw) and the fit rows (variant 'model', collective = implementation,
params op; metrics alpha, beta; for ring, direct and torus also params steps, in_flight and
torus_grid and metric alpha_per_step, the analytic model's terms read off the fit). The fit was
made by the program on the latency sweep, so the latency panel draws the latency-mode rows
beside it, and labels the ring's, direct's and the torus's lines with their steps."""
import math

from . import figures as F
from .rows import metric, param, median_time


def human_bytes(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.3g} B"


def crossovers(fits, lo, hi):
    """[(size, from, to)] where the implementation with the smallest fitted time changes, on a
    fine logarithmic grid of sizes in [lo, hi]. Lines whose fitted time is not positive there
    (a negative alpha: the sweep did not pin the latency) are left out at those sizes."""
    if not fits or lo <= 0 or hi <= lo:
        return []
    out, prev = [], None
    steps = 400
    for i in range(steps + 1):
        s = lo * (hi / lo) ** (i / steps)
        best = min(((a + b * s, name) for name, (a, b) in fits.items() if a + b * s > 0), default=None)
        if best is None:
            continue
        if prev is not None and best[1] != prev:
            out.append((s, prev, best[1]))
        prev = best[1]
    return out


def pick(rows, get, preferred):
    """The rows with the preferred value of a field (out of place, f32, sum) where there is one,
    else with its first value: a plot draws one placement, dtype and reduction."""
    vals = [get(r) for r in rows]
    if not vals:
        return rows, None
    want = preferred if preferred in vals else vals[0]
    return [r for r in rows if get(r) == want], want


def plot(rows, ranks_note):
    figs = []
    ops = sorted({param(r, "op") for r in rows if isinstance(param(r, "op"), str)})
    for op in ops:
        meas = [r for r in rows if param(r, "op") == op and r.get("variant") != "model"
                and (param(r, "bytes") or 0) > 0 and median_time(r) is not None]
        if not meas:
            continue
        meas, place = pick(meas, lambda r: param(r, "place"), "out")
        meas, dtype = pick(meas, lambda r: r.get("dtype"), "f32")
        meas, redop = pick(meas, lambda r: param(r, "redop"), "sum")
        impls = sorted({r.get("variant") for r in meas}, key=lambda v: (F.NAMED.get(v, 99), v))
        fits, steps = {}, {}
        for r in rows:
            if r.get("variant") == "model" and param(r, "op") == op:
                a, b = metric(r, "alpha"), metric(r, "beta")
                if a is not None and b is not None and r.get("collective") in impls:
                    fits[r.get("collective")] = (a, b)
                k, per = param(r, "steps"), metric(r, "alpha_per_step")
                if k and per is not None:  # "2 steps x 30.4 us (3 in flight)"
                    grid = param(r, "torus_grid")
                    fl = param(r, "in_flight")
                    steps[r.get("collective")] = (f"{k:g} steps{f' of {grid}' if grid else ''} x "
                                                  f"{per * 1e6:.2f} us{f' ({fl:g} in flight)' if fl and fl > 1 else ''}")
        fig, (ax_bw, ax_t) = F.new(12, 4.6, 2)
        any_bw = False
        for i, impl in enumerate(impls):
            c = F.colour(impl, i)
            for mode, style in (("latency", "-"), ("throughput", ":")):
                pts = sorted((param(r, "bytes"), metric(r, "busbw"), median_time(r)) for r in meas
                             if r.get("variant") == impl and (param(r, "mode") or "latency") == mode)
                bw = [(s, b) for s, b, _ in pts if b is not None and b > 0]
                if bw:
                    any_bw = True
                    ax_bw.plot([s for s, _ in bw], [b for _, b in bw], style, marker="o", ms=3, color=c,
                               label=impl if mode == "latency" else None)
                if mode == "latency" and pts:
                    ax_t.plot([s for s, _, _ in pts], [t * 1e6 for _, _, t in pts], "o", ms=4, color=c,
                              label=f"{impl} measured")
        sizes = [param(r, "bytes") for r in meas]
        lo, hi = min(sizes), max(sizes)
        grid = [lo * (hi / lo) ** (i / 100) for i in range(101)] if hi > lo else [lo]
        for i, impl in enumerate(impls):
            if impl not in fits:
                continue
            a, b = fits[impl]
            line = [(s, (a + b * s) * 1e6) for s in grid if a + b * s > 0]
            lat = steps.get(impl, f"{a * 1e6:.2f} us")
            if line:
                ax_t.plot([s for s, _ in line], [t for _, t in line], "--", lw=1, color=F.colour(impl, i),
                          label=f"{impl} fit: {lat} + S / {1 / b / 1e9:.2f} GB/s" if b > 0
                          else f"{impl} fit: {lat} + {b:.3g} s/B * S")
        cross = crossovers(fits, lo, hi)
        for s, frm, to in cross:
            for ax in (ax_bw, ax_t):
                ax.axvline(s, color="#555", lw=0.8, ls="-.")
            ax_t.annotate(f"{frm}→{to}\n{human_bytes(s)}", (s, 1), xycoords=("data", "axes fraction"),
                          xytext=(3, -4), textcoords="offset points", va="top", fontsize=7, color="#333")
        for ax in (ax_bw, ax_t):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("message size S (bytes)")
            ax.grid(True, which="major", alpha=0.3)
        ax_bw.plot([], [], "k:", label="back to back (throughput mode)")
        ax_bw.set_ylabel("busbw (GB/s)")
        ax_bw.set_title(f"{op}: bus bandwidth")
        if any_bw:
            ax_bw.legend(fontsize=7)
        else:
            ax_bw.text(0.5, 0.5, "busbw not applicable (one rank)", transform=ax_bw.transAxes, ha="center")
        ax_t.set_ylabel("time (us), slowest rank, median")
        ax_t.set_title(f"{op}: latency and fitted alpha-beta lines")
        ax_t.legend(fontsize=6, loc="upper left")
        what = ", ".join(str(x) for x in (dtype, redop, {"out": "out of place", "in": "in place"}.get(place, place))
                         if x is not None)
        cap = (f"{op} ({what}) on {ranks_note}: busbw = S/t x the nccl-tests factor (solid: each operation timed "
               "alone; dotted: back to back). Right: latency-mode medians (points) and each "
               "implementation's least-squares fit t = alpha + beta*S (dashed, from the 'model' rows); "
               "for ring, direct and torus alpha is shown as steps x alpha per step (ring 2(p-1) steps, "
               "direct 2 of p-1 messages in flight, torus 2(R-1 + C-1)).")
        if cross:
            cap += " Crossovers of the fitted lines (dash-dot): " + ", ".join(
                f"{frm}→{to} at {human_bytes(s)}" for s, frm, to in cross) + "."
        elif fits:
            cap += " The fitted lines do not cross in the measured range."
        figs.append(F.finish(fig, f"{op}: busbw and latency vs size", cap))
    return figs
