"""runs — what scripts/compare reads: a run of one or more rounds, its rows and its machine.

A side of a comparison is one of
  - a results directory of one run (every <program>.jsonl in it, manifest.json, status.tsv),
  - a directory of rounds (round-01/, round-02/, ... each a results directory), as written by
    `run_all.sh --rounds K` and `--ci`: the same suite run K times, one round after another,
  - a single .jsonl file (one round, no manifest).
Rows are matched across rounds and sides on (benchmark, variant, dtype, collective, backend,
ranks, params), params without the expected-value annotations (ANNOTATIONS) and those a program
derives from its own measurements (MEASURED_PARAMS). Every line is validated against
results/schema.json first (schema.py): one that is not a row refuses the side, naming file:line
and the field.
"""
import math
import os
import sys

from .cli import UsageError
from .files import json_lines, load_manifest, load_status
from .schema import SCHEMA_NAME, row_error


class CompareError(UsageError):
    """A comparison that cannot be made honestly: one line, exit 2."""


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Parameters a program derives from what it measured, not from its arguments: they differ
# between identical runs, so a row keyed on them would go MISSING on one side. allreduce's
# iterations (a time budget per size), kernels' bound (which side of the measured ridge point),
# pipeline's idle_stages (each stage's idle share), the training programs' eff_note ("superlinear"
# when the measured efficiency came out above 1), and the performance model's pred_fit (the α-β it
# fitted to the collectives timed in the run) and pred_dominant (the term its prediction found
# largest, which can change with those timings).
MEASURED_PARAMS = frozenset({"iterations", "bound", "idle_stages", "eff_note", "pred_fit", "pred_dominant"})


# parameters that describe the hardware's expected value (docs/expected.md), not what was run:
# a row keeps its identity whether the machine is in results/expected or not
ANNOTATIONS = {"expected_of", "expected_source"}


def key(r):
    params = tuple(sorted((k, str(v)) for k, v in (r.get("params") or {}).items()
                          if k not in MEASURED_PARAMS and k not in ANNOTATIONS))
    return (r.get("benchmark"), r.get("variant"), r.get("dtype"), r.get("collective"),
            r.get("backend"), r.get("ranks"), params)


def label(k, varying=None):
    """A row's name in the table: benchmark/variant, dtype, collective, ranks, and the
    parameters in `varying` (those that tell the rows of one variant apart)."""
    bench, variant, dtype, coll, _backend, ranks, params = k
    shown = varying if varying is not None else ("threads", "bytes", "size", "batch", "stages", "mode")
    p = " ".join(f"{a}={b}" for a, b in params if a in shown)
    return f"{bench}/{variant}" + (f" {dtype}" if dtype else "") + (f" {coll}" if coll else "") + \
        f" np={ranks}" + (f" {p}" if p else "")


# parameters that follow from others (count from bytes, iterations from mode): not shown
DERIVED = {"count", "iterations"}


def labels(keys):
    """label() for each key, showing the parameters that vary among the rows of its variant."""
    values = {}
    for k in keys:
        for a, b in k[6]:
            values.setdefault((k[0], k[1], a), set()).add(b)
    return {k: label(k, {a for a, _ in k[6] if a not in DERIVED and len(values[(k[0], k[1], a)]) > 1})
            for k in keys}


def metric_value(r, name):
    """The finite value of metric `name` in row r, or None."""
    m = (r.get("metrics") or {}).get(name) if name else None
    v = m.get("value") if isinstance(m, dict) else None
    return v if is_num(v) and math.isfinite(v) else None


def metric_state(r, name):
    """What row r holds for metric `name`: its value (a number, finite or not), "null" or
    "missing"."""
    m = (r.get("metrics") or {}).get(name) if name else None
    if not isinstance(m, dict):
        return "missing"
    return "null" if m.get("value") is None else m["value"]


def _read_rows(files):
    rows = []
    for f in files:
        for n, row, why in json_lines(f):
            if why:
                raise CompareError(f"{f}:{n}: {why}")
            why = row_error(row)
            if why:
                raise CompareError(f"{f}:{n}: not a results row ({SCHEMA_NAME}): {why}")
            rows.append(row)
    return rows


def _read_status(path):
    """Programs that failed according to a run's status.tsv: list of one-line notes."""
    if not os.path.lexists(path):
        return []
    status, errors = load_status(path)
    notes = [f"{e}; counted as a failed program" for e in errors]
    where = f" ({os.path.basename(os.path.dirname(path))})" if "round-" in path else ""
    notes += [f"{prog}: exited {rc} in the new run{where}" for prog, (rc, _) in status.items() if rc != 0]
    return notes


class Round:
    def __init__(self, path, rows, manifest, status_notes):
        self.path, self.rows, self.manifest, self.status_notes = path, rows, manifest, status_notes


class Side:
    """One side of a comparison: its rounds, and each row key's rows across them."""

    def __init__(self, path, rounds):
        self.path = path
        self.rounds = rounds
        self.by_key = {}
        for rd in rounds:
            seen = {}
            for r in rd.rows:
                seen[key(r)] = r  # a key repeated within a round: the last row stands
            for k, r in seen.items():
                self.by_key.setdefault(k, []).append(r)

    def versions(self):
        """The schema versions of the side's rows, e.g. [2] (None: a row without one)."""
        return sorted({r.get("schema_version") for rd in self.rounds for r in rd.rows}, key=str)

    @property
    def manifest(self):
        return next((rd.manifest for rd in self.rounds if rd.manifest), None)


def _load_round(path):
    if os.path.isdir(path):
        files = [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".jsonl")]
    else:
        files = [path]
    rows = _read_rows(files)
    if not rows:
        what = "no .jsonl files" if not files else "no rows"
        raise CompareError(f"{path}: {what}; nothing to compare (is the path a results directory of a run?)")
    manifest = None
    mpath = os.path.join(path, "manifest.json") if os.path.isdir(path) else None
    if mpath and os.path.lexists(mpath):
        manifest = load_manifest(mpath)
    notes = _read_status(os.path.join(path, "status.tsv")) if os.path.isdir(path) else []
    return Round(path, rows, manifest, notes)


def load_side(path):
    if not os.path.exists(path):
        raise CompareError(f"{path}: no such directory or file")
    if os.path.isdir(path):
        subs = sorted(d for d in os.listdir(path)
                      if d.startswith("round-") and os.path.isdir(os.path.join(path, d)))
        if subs:
            return Side(path, [_load_round(os.path.join(path, d)) for d in subs])
    return Side(path, [_load_round(path)])


def machine(manifest):
    """What makes two runs' absolute figures comparable: CPU model and counts, the binding of
    ranks to CPUs, ranks per node, and the GPUs. Host names are left out (identical CI runners
    differ in name). None when there is no manifest."""
    if not manifest:
        return None
    cpu = manifest.get("cpu") or {}
    cuda = manifest.get("cuda") or {}
    binding = tuple((b.get("rank"), b.get("cpus")) for b in manifest.get("rank_binding") or []
                    if isinstance(b, dict))
    return (("cpu", cpu.get("model")), ("cores", cpu.get("cores")), ("pus", cpu.get("pus")),
            ("hosts", len(manifest.get("hosts") or [])),
            ("ranks_per_node", manifest.get("ranks_per_node")),
            ("oversubscribed", manifest.get("oversubscribed")),
            ("binding", binding), ("gpus", tuple(cuda.get("models") or [])))


def describe(m):
    if m is None:
        return "unknown (no manifest)"
    d = dict(m)
    gpus = ", ".join(d["gpus"]) or "no GPU"
    return f"{d['cpu']} x{d['cores']} cores, {d['hosts']} host(s), {gpus}"


def differences(a, b):
    """The fields in which two machine descriptions differ."""
    return [k for (k, va), (_, vb) in zip(a, b) if va != vb]


def warn(msg):
    print(f"compare: {msg}", file=sys.stderr)
