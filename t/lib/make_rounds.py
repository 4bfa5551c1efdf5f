#!/usr/bin/env python3
"""make_rounds — synthetic runs of several rounds for the tests of scripts/compare.

    make_rounds.py DIR --rounds K [--cpu MODEL] [--seed S] ROW...

ROW is VARIANT:ABS:RATIO[:SPREAD[:ROUND=FACTOR,...]]: a row of benchmark "b" whose headline "busbw"
is ABS and whose normalised ratio "vs_ref" (named by the row's "gate") is RATIO, each round's
values jittered by a deterministic +-SPREAD (a fraction, default 0.01) so that rounds differ,
and round ROUND's (an outlier: a round in which the machine stalled) multiplied by FACTOR. A
RATIO of "-" gives a row without a ratio (a probe). Writes DIR/round-NN/{b.jsonl,manifest.json,
status.tsv} (DIR itself when K is 1 and --flat).
"""
import argparse
import json
import os
import random

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--cpu", default="Test CPU")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--flat", action="store_true")
ap.add_argument("rows", nargs="+")
a = ap.parse_args()
rng = random.Random(a.seed)
for r in range(1, a.rounds + 1):
    d = a.dir if a.flat else os.path.join(a.dir, f"round-{r:02d}")
    os.makedirs(d, exist_ok=True)
    manifest = {"schema_version": 2, "run_id": f"t-r{r}", "start_time": "2026-01-01T00:00:00Z",
                "command_line": "make_rounds.py", "git_describe": "t", "build_options": "",
                "mpi_library": "t", "hosts": ["h"], "ranks_per_node": 2, "cpus_per_node": 2,
                "oversubscribed": False, "cpu": {"model": a.cpu, "cores": 2, "pus": 2},
                "rank_binding": [{"rank": 0, "host": "h", "cpus": "0", "ncpus": 1},
                                 {"rank": 1, "host": "h", "cpus": "1", "ncpus": 1}],
                "cuda": {"built": False, "models": []}}
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    with open(os.path.join(d, "status.tsv"), "w") as f:
        f.write("program\texit\tseconds\nb\t0\t1\n")
    with open(os.path.join(d, "b.jsonl"), "w") as f:
        for spec in a.rows:
            parts = spec.split(":")
            variant, absval, ratio = parts[0], float(parts[1]), parts[2]
            spread = float(parts[3]) if len(parts) > 3 else 0.01
            factors = dict(map(float, f.split("=")) for f in parts[4].split(",")) if len(parts) > 4 else {}
            scale = factors.get(r, 1.0)
            j = lambda v: v * scale * (1 + rng.uniform(-spread, spread))  # noqa: E731
            metrics = {"busbw": {"value": j(absval), "unit": "GB/s"}}
            if ratio != "-":
                metrics["vs_ref"] = {"value": j(float(ratio)), "unit": "ratio"}
            row = {"schema_version": 2, "run_id": f"t-r{r}", "benchmark": "b", "variant": variant,
                   "backend": "cpu", "collective": None, "dtype": "f32", "ranks": 2,
                   "params": {"bytes": 1024}, "iterations": {"timed": 5, "warmup": 1},
                   "time": {"unit": "s", "min": 1, "median": 1, "mean": 1, "max": 1, "p95": 1, "cv": 0.01,
                            "samples": [1] * 5, "samples_kind": "all"},
                   "metrics": metrics, "headline": "busbw", "gate": "vs_ref" if ratio != "-" else None,
                   "check": {"status": "pass", "error": 0, "message": None}, "counters": {}}
            f.write(json.dumps(row) + "\n")
