#!/usr/bin/env python3
"""validate_results.py — checks files against results/schema.md (versions 1 and 2), for the tests.

    validate_results.py rows FILE.jsonl [--min-rows N]   every line is JSON with the required fields
    validate_results.py manifest FILE.json               the manifest's required fields
    validate_results.py trace FILE.json                  a Chrome trace with complete events
Prints what is wrong and exits 1, or prints a one-line summary and exits 0.
"""
import json
import sys

ROW_REQUIRED = {"schema_version": int, "run_id": str, "benchmark": str, "variant": str,
                "ranks": int, "params": dict, "iterations": dict, "metrics": dict, "check": dict}
MANIFEST_REQUIRED = {"schema_version": int, "run_id": str, "start_time": str, "command_line": str,
                     "git_describe": str, "hosts": list, "cpu": dict, "rank_binding": list,
                     "mpi_library": str, "cuda": dict, "build_options": str,
                     "ranks_per_node": int, "cpus_per_node": int, "oversubscribed": bool}
CHECKS = {"pass", "fail", "skipped", "not_asserted", "none"}
VERSIONS = {1, 2}
SKETCH = 32  # time.samples: all samples up to this many, else this many quantiles


def fail(msg):
    print(msg)
    sys.exit(1)


def check_fields(obj, required, where):
    for k, t in required.items():
        if k not in obj:
            fail(f"{where}: missing field '{k}'")
        if not isinstance(obj[k], t) or (t is int and isinstance(obj[k], bool)):
            fail(f"{where}: field '{k}' is {type(obj[k]).__name__}, expected {t.__name__}")


def samples(t, timed, where):
    """v2: time.samples is the row's sketch of its samples (results/schema.md)."""
    x, kind = t.get("samples"), t.get("samples_kind")
    if not isinstance(x, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
        fail(f"{where}: time.samples must be a list of numbers, got {x!r}")
    if not isinstance(timed, int) or len(x) != min(timed, SKETCH):
        fail(f"{where}: time.samples has {len(x)} numbers, expected min(iterations.timed = {timed}, {SKETCH})")
    if kind != ("all" if timed <= SKETCH else "quantiles"):
        fail(f"{where}: time.samples_kind {kind!r} with {timed} timed iterations")
    if kind == "all" and (min(x) != t["min"] or max(x) != t["max"]):
        fail(f"{where}: time.samples min/max {min(x)}/{max(x)} differ from time.min/max {t['min']}/{t['max']}")
    if kind == "quantiles" and (x != sorted(x) or x[0] < t["min"] or x[-1] > t["max"]):
        fail(f"{where}: time.samples (quantiles) must ascend within [time.min, time.max]")


def rows(path, min_rows):
    n = 0
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            where = f"{path}:{i}"
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{where}: not JSON: {e}")
            check_fields(r, ROW_REQUIRED, where)
            if r["schema_version"] not in VERSIONS:
                fail(f"{where}: schema_version {r['schema_version']}")
            if "time" not in r:
                fail(f"{where}: missing field 'time'")
            if r["time"] is not None:
                for k in ("unit", "min", "median", "mean", "max", "p95", "cv"):
                    if k not in r["time"]:
                        fail(f"{where}: time.{k} missing")
                t = r["time"]
                if not t["min"] <= t["median"] <= t["max"] or not t["min"] <= t["p95"] <= t["max"]:
                    fail(f"{where}: time statistics out of order: {t}")
                if r["schema_version"] >= 2:
                    samples(t, r["iterations"].get("timed"), where)
            for name, m in r["metrics"].items():
                if not isinstance(m, dict) or "value" not in m or "unit" not in m:
                    fail(f"{where}: metric '{name}' needs value and unit")
            if r["schema_version"] >= 2:
                if "gate" not in r:
                    fail(f"{where}: missing field 'gate'")
                g = r["gate"]
                if g is not None and (not isinstance(g, str) or g not in r["metrics"]
                                      or not isinstance(r["metrics"][g].get("value"), (int, float))):
                    fail(f"{where}: gate {g!r} names no metric with a value in the row")
            if r["check"].get("status") not in CHECKS:
                fail(f"{where}: check.status '{r['check'].get('status')}'")
            n += 1
    if n < min_rows:
        fail(f"{path}: {n} rows, expected at least {min_rows}")
    print(f"{path}: {n} valid rows")


def manifest(path):
    with open(path, encoding="utf-8") as f:
        m = json.load(f)
    check_fields(m, MANIFEST_REQUIRED, path)
    if not m["hosts"] or not m["rank_binding"]:
        fail(f"{path}: empty hosts or rank_binding")
    print(f"{path}: valid manifest, {len(m['rank_binding'])} ranks")


def trace(path):
    with open(path, encoding="utf-8") as f:
        t = json.load(f)
    events = t.get("traceEvents")
    if not isinstance(events, list):
        fail(f"{path}: no traceEvents array")
    complete = [e for e in events if e.get("ph") == "X"]
    for e in complete:
        for k in ("name", "pid", "tid", "ts", "dur"):
            if k not in e:
                fail(f"{path}: event without {k}: {e}")
    print(f"{path}: {len(complete)} complete events, {len({e['pid'] for e in complete})} ranks")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        fail(__doc__)
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "rows":
        rows(path, int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--min-rows" else 1)
    elif kind == "manifest":
        manifest(path)
    elif kind == "trace":
        trace(path)
    else:
        fail(__doc__)
