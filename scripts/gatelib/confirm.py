"""confirm — `scripts/compare BASELINE NEW --confirm`: a regression must happen twice.

Why: on a shared machine a whole run can sit in another state for its two minutes (the ring's
32 KiB latency at 2.3 GB/s in all five rounds of one run, 3.0 in the run before; a single-threaded
stream read at 14 against 20 GB/s). The five rounds of that run agree with each other, so the
rank test cannot tell the state from a regression, and 2 of 10 pairs of identical CI runs here
were called regressions that way. Such a state did not recur in the next run; a slower code
path does. So when rows regress, the programs they belong to are run again now, with the same
mode (run_all.sh --ci --only PROGRAMS), and compared with the same baseline by the same rules;
a row fails only if it regresses in both. Its cost falls only on the runs that flagged a row,
and only on the programs concerned.

A failed check, a missing row or a program that exited non-zero is not put to a second run: it
fails at once (compare never calls confirm then).
"""
import copy
import os
import subprocess
import sys

from .runs import CompareError, label

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def confirm(a, run):
    """a: compare's options after a run that flagged a.regressed (and nothing else). Runs the
    programs again, compares, returns the exit status: 1 if a row regressed in both runs (or the
    second run failed a check), else 0."""
    programs = sorted({k[0] for k in a.regressed})
    base = a.new.rstrip("/") if os.path.isdir(a.new) else os.path.splitext(a.new)[0]
    n = 1
    while os.path.exists(f"{base}/confirm-{n}" if os.path.isdir(a.new) else f"{base}-confirm-{n}"):
        n += 1
    out = f"{base}/confirm-{n}" if os.path.isdir(a.new) else f"{base}-confirm-{n}"
    run_all = os.path.join(REPO, "run_all.sh")
    print(f"# confirm: {len(a.regressed)} row(s) of {', '.join(programs)} regressed; running "
          f"{' '.join(programs)} again: run_all.sh --ci --only {','.join(programs)} --out {out}", flush=True)
    log = out + ".log"
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(log, "w") as f:
        p = subprocess.run([run_all, "--ci", "--only", ",".join(programs), "--out", out],
                           stdout=f, stderr=subprocess.STDOUT)
    if p.returncode not in (0, 1) or not os.path.isdir(out):
        raise CompareError(f"--confirm: run_all.sh exited {p.returncode}; see {log}")
    second = copy.copy(a)
    second.new, second.allow_missing = out, True  # the other programs were not run again
    print(f"# confirm: {out} against {a.baseline}, the same rules", flush=True)
    rc = run(second)
    if rc == 2:
        return 2
    confirmed = a.regressed & second.regressed
    for k in sorted(a.regressed, key=lambda k: tuple(str(x) for x in k)):
        print(f"# confirm: {label(k)}: "
              + ("REGRESSION in both runs" if k in confirmed else "not confirmed (it did not regress again)"))
    failed = bool(confirmed) or second.hard_fail
    print("# confirm: verdict: " + ("FAILED" if failed else "no regression confirmed"))
    sys.stdout.flush()
    return 1 if failed else 0
