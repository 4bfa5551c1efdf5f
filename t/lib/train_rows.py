#!/usr/bin/env python3
"""train_rows.py — what every training program's rows must show, for the tests.

    train_rows.py phases FILE.jsonl
        in every row that has both: exposed_comm <= comm (exposed is the part of comm the step
        waited for), compared as the row's exact doubles
    train_rows.py pred FILE.jsonl VARIANT=OP,OP...
        every row carries the predicted step (benchmarks/train/perf_model.h) and its arithmetic
        holds: pred_step = pred_compute + pred_exposed, pred_gemm <= pred_compute, pred_exposed
        <= pred_comm, step_vs_pred = the median step / pred_step; on 2 ranks or more pred_fit
        names exactly the operations given for the row's variant (none given: not checked), and
        on one rank no all-reduce (in place on one rank it moves nothing); an operation on a
        group's communicator is named GROUP.OP (tp.allreduce)
    train_rows.py cells TABLE.txt FILE.jsonl TITLE=KEY...
        the stdout table's column TITLE shows each row's metric KEY to 3 significant digits
        (an error of 0.004 read against a bound of 1e-3 must not print as "0.00")
Prints what is wrong and exits 1, or exits 0.
"""
import json
import re
import sys


def phases(path):
    bad = []
    for r in map(json.loads, open(path)):
        m = r["metrics"]
        comm, exposed = (m.get(k, {}).get("value") for k in ("comm", "exposed_comm"))
        if comm is not None and exposed is not None and not exposed <= comm:
            bad.append(f"{r['variant']}/{r['collective']}/{r['dtype']}: exposed_comm {exposed!r} > comm {comm!r}")
    return bad


def pred(path, specs):
    ops = dict(spec.split("=", 1) for spec in specs)
    bad = []
    for r in map(json.loads, open(path)):
        name = f"{r['variant']}/{r['collective']}/{r['dtype']}"
        m, p = r["metrics"], r["params"]
        v = {k: m.get(k, {}).get("value") for k in
             ("pred_step", "pred_compute", "pred_gemm", "pred_comm", "pred_exposed", "step_vs_pred", "pred_bw")}
        if any(x is None for x in v.values()):
            bad.append(f"{name}: missing {[k for k, x in v.items() if x is None]}")
            continue
        close = lambda a, b: abs(a - b) <= 1e-9 * max(abs(a), abs(b))
        idle = m.get("pred_idle", {}).get("value") or 0  # a pipeline's bubble; 0 elsewhere
        if not (v["pred_step"] > 0 and close(v["pred_step"], v["pred_compute"] + v["pred_exposed"] + idle)):
            bad.append(f"{name}: pred_step {v['pred_step']!r} != pred_compute + pred_exposed + pred_idle")
        if not (0 < v["pred_gemm"] <= v["pred_compute"] and v["pred_exposed"] <= v["pred_comm"] + 1e-9 * v["pred_step"]):
            bad.append(f"{name}: pred_gemm {v['pred_gemm']!r}, pred_compute {v['pred_compute']!r}, "
                       f"pred_exposed {v['pred_exposed']!r}, pred_comm {v['pred_comm']!r}")
        if not close(v["step_vs_pred"], r["time"]["median"] / v["pred_step"]):
            bad.append(f"{name}: step_vs_pred {v['step_vs_pred']!r} != median / pred_step")
        if p.get("pred_dominant") not in ("gemm", "elementwise", "exposed_comm", "idle"):
            bad.append(f"{name}: pred_dominant {p.get('pred_dominant')!r}")
        want = ops.get(r["variant"])
        # an operation of a group (a tensor-parallel group's, the replicas') is "GROUP OP ...": GROUP.OP
        got = sorted(re.match(r"(?:(\w+) (?=\w+ [\d.-]+ us))?(\w+)", part).expand(r"\1.\2").lstrip(".")
                     for part in p.get("pred_fit", "").split("; ") if part)
        if r["ranks"] == 1 and {"allreduce", "iallreduce", "p2p"} & {g.split(".")[-1] for g in got}:
            bad.append(f"{name}: one rank fits {got}")
        if want is not None and r["ranks"] > 1:
            if got != sorted(want.split(",")):
                bad.append(f"{name}: pred_fit fits {got}, the schedule's operations are {sorted(want.split(','))}")
    return bad


def cells(table, path, pairs):
    """A cell never holds a space and the columns right of TITLE have one-word titles: the cell
    is the row's token as far from its end as TITLE is from the header's (a cell wider than its
    column, further left, shifts the row's alignment but not that count)."""
    lines = open(table).read().splitlines()
    header = next((l for l in lines if l.startswith("#") and " variant " in l), None)
    if header is None:
        return [f"{table}: no header row"]
    rows = [json.loads(l) for l in open(path)]
    variants = {r["variant"] for r in rows}
    body = [l for l in lines if l.startswith(" ") and l.split() and l.split()[0] in variants]
    if len(body) != len(rows):
        return [f"{table}: {len(body)} table rows, {path}: {len(rows)} rows"]
    bad = []
    for title, key in (p.split("=", 1) for p in pairs):
        at = re.search(r"(?<=\s)" + re.escape(title) + r"(?=\s|$)", header)
        if not at:
            bad.append(f"no column '{title}' in {header!r}")
            continue
        right = len(header[at.end():].split())
        for line, r in zip(body, rows):
            tokens = line.split()
            text = tokens[-1 - right] if right < len(tokens) else ""
            value = r["metrics"][key]["value"]
            try:
                ok = text == "n/a" if value is None else float(text) == float(f"{value:.3g}")
            except ValueError:
                ok = False
            if not ok:
                bad.append(f"{r['variant']}/{r['collective']}/{r['dtype']}: {title} printed '{text}', "
                           f"the row's {key} is {value!r}")
    return bad


def main(argv):
    if len(argv) == 2 and argv[0] == "phases":
        bad = phases(argv[1])
    elif len(argv) >= 2 and argv[0] == "pred":
        bad = pred(argv[1], argv[2:])
    elif len(argv) >= 4 and argv[0] == "cells":
        bad = cells(argv[1], argv[2], argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
