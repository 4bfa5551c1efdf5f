"""timeline.py — a per-rank timeline of one training step from a program's Chrome trace
(<program>.trace.json, written with --trace): the last timed iteration of rank 0, and every
rank's events inside that window, one lane per rank and thread (compute, communication)."""
import json
import os

from . import figures as F
from .rows import num

MAX_EVENTS = 20000      # a trace of a long run: draw the window, never the whole file


def load_events(path):
    """The complete ('X') events of a trace file, or a reason why there are none."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        return None, f"{os.path.basename(path)}: not readable as a Chrome trace ({e.__class__.__name__})"
    ev = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(ev, list):
        return None, f"{os.path.basename(path)}: no traceEvents list"
    out = []
    for e in ev:
        if isinstance(e, dict) and e.get("ph") == "X" and num(e.get("ts")) is not None and num(e.get("dur")) is not None:
            out.append(e)
    return out, None


def plot(path, program):
    events, why = load_events(path)
    if events is None:
        return [], why
    if not events:
        return [], f"{os.path.basename(path)}: no complete events"
    its = [e for e in events if e.get("cat") == "timed" and e.get("pid") == 0]
    if its:
        last = max(its, key=lambda e: e["ts"])
        t0, t1 = last["ts"], last["ts"] + last["dur"]
        what = "the last timed iteration of rank 0"
    else:
        t0 = min(e["ts"] for e in events)
        t1 = max(e["ts"] + e["dur"] for e in events)
        what = "the whole trace"
    win = [e for e in events if e.get("cat") != "timed" and e["ts"] < t1 and e["ts"] + e["dur"] > t0]
    win = sorted(win, key=lambda e: e["ts"])[:MAX_EVENTS]
    if not win:
        return [], f"{os.path.basename(path)}: no events inside {what}"
    lanes = sorted({(e.get("pid", 0), e.get("tid", 0)) for e in win}, key=lambda k: (str(k[0]), str(k[1])))
    index = {k: i for i, k in enumerate(lanes)}
    fig, (ax,) = F.new(12, 0.45 * len(lanes) + 1.8)
    names = []
    for e in win:
        name = str(e.get("name", "?"))
        key = name if name in F.NAMED else str(e.get("cat", "?"))
        if key not in names:
            names.append(key)
        y = index[(e.get("pid", 0), e.get("tid", 0))]
        s = max(e["ts"], t0)
        d = min(e["ts"] + e["dur"], t1) - s
        ax.broken_barh([((s - t0) / 1e3, d / 1e3)], (y - 0.38, 0.76), color=F.colour(key, names.index(key)),
                       edgecolor="none")
    for key in names:
        ax.bar([0], [0], color=F.colour(key, names.index(key)), label=key)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {p}" + (f" / thread {t}" if t else "") for p, t in lanes], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, (t1 - t0) / 1e3)
    ax.set_xlabel("ms from the start of the window")
    ax.set_title(f"{program}: timeline of {what}")
    ax.legend(fontsize=7, ncol=min(len(names), 8), loc="upper center", bbox_to_anchor=(0.5, -0.28))
    ax.grid(True, axis="x", alpha=0.3)
    cap = (f"From {os.path.basename(path)} ({len(events)} events): every rank's events inside {what}, "
           "one lane per rank and thread (thread 0 computes, thread 1 carries the sends). "
           "Gaps and 'wait' bars on a stage's lane are its bubble.")
    return [F.finish(fig, f"{program}: per-rank timeline", cap)], None
