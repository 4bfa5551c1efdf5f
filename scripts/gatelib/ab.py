"""ab — `scripts/compare --ab REV_A REV_B`: build two revisions and run them alternately, round
by round, on this machine, then compare B against A.

Why: a baseline recorded last week on a shared runner compares this week's machine as much as
this week's code. Two builds run in turn within the same minutes see the same machine, so what
differs between them is the code. Rounds alternate A B, B A, A B, ... so that a machine that
slows down steadily during the run does not favour the side that always goes first.

REV is a git revision of the repository this script is in (built in a detached worktree under
OUT) or the path of a tree that is already built (it has run_all.sh and bin/). Both revisions
the same commit: built once.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

from .ranktest import min_p
from .runs import CompareError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # scripts/
REPO = os.path.dirname(HERE)


def say(msg):
    print(f"# ab: {msg}", flush=True)


def git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def prepare(rev, where, log, jobs):
    """A built tree for rev: an existing tree as it is, or a worktree of the revision, made."""
    if os.path.isdir(rev):
        tree = os.path.abspath(rev)
        if not (os.path.isfile(os.path.join(tree, "run_all.sh")) and os.path.isdir(os.path.join(tree, "bin"))):
            raise CompareError(f"--ab: '{rev}' is a directory but not a built scalelab tree "
                             "(no run_all.sh and bin/); build it first or name a git revision")
        return tree, None
    p = git("rev-parse", "--verify", "--quiet", rev + "^{commit}")
    if p.returncode != 0:
        raise CompareError(f"--ab: '{rev}' is neither a directory nor a git revision of {REPO}")
    commit = p.stdout.strip()
    tree = os.path.join(where, "tree-" + commit[:12])
    if not os.path.isdir(tree):
        p = git("worktree", "add", "--detach", tree, commit)
        if p.returncode != 0:
            raise CompareError(f"--ab: git worktree add {tree} {rev} failed: {p.stderr.strip()}")
        say(f"building {rev} ({commit[:12]}) in {tree}; log {log}")
        with open(log, "w") as f:
            if subprocess.run(["make", f"-j{jobs}"], cwd=tree, stdout=f, stderr=subprocess.STDOUT).returncode != 0:
                raise CompareError(f"--ab: building {rev} failed; see {log}")
    return tree, commit


def main(argv, gate_options, check_options, run):
    ap = argparse.ArgumentParser(prog="compare --ab",
                                 description="build two revisions and run them alternately, then compare B with A")
    ap.add_argument("rev_a", help="the baseline: a git revision or a built tree")
    ap.add_argument("rev_b", help="the candidate: a git revision or a built tree")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per side (default 5, the fewest that can reach alpha 0.01)")
    ap.add_argument("--only", default=None, help="run just these programs (run_all.sh --only)")
    ap.add_argument("--np", default=None, help="ranks per program (run_all.sh --np)")
    ap.add_argument("--full", action="store_true", help="the full suite rather than --quick")
    ap.add_argument("--out", default=None, help="where the trees and runs go (default results/ab-<time>)")
    ap.add_argument("--keep", action="store_true", help="keep the worktrees made for the revisions")
    ap.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE",
                    help="set in B's runs only, e.g. SL_TEST_SLOWDOWN=ddp:0.2 to see the gate catch a slowdown")
    gate_options(ap)
    a = ap.parse_args(argv)
    why = check_options(a)
    if not why and not 1 <= a.rounds <= 100:
        why = "--rounds: expected a count from 1 to 100"
    if not why and a.rounds >= 2 and min_p(a.rounds, a.rounds, "less") > a.alpha:
        # said before building and running, not after: the comparison would refuse them
        why = (f"--rounds: {a.rounds} a side cannot reach p <= {a.alpha:g} in the rank test; "
               "give 1 (no rank test) or 5 and more")
    for e in a.b_env:
        if "=" not in e or not e.split("=", 1)[0]:
            why = f"--b-env: expected NAME=VALUE, got '{e}'"
    if why:
        print(f"compare: {why}", file=sys.stderr)
        return 2
    out = os.path.abspath(a.out or os.path.join("results", time.strftime("ab-%Y%m%d-%H%M%S")))
    if os.path.exists(out) and os.listdir(out):
        print(f"compare: --out: '{out}' is not empty; choose a new directory", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    jobs = os.cpu_count() or 2
    made = []
    try:
        tree_a, ca = prepare(a.rev_a, out, os.path.join(out, "build-a.log"), jobs)
        tree_b, cb = prepare(a.rev_b, out, os.path.join(out, "build-b.log"), jobs)
        made = [c for c in {ca, cb} if c]
        env_b = dict(os.environ)
        env_b.update(e.split("=", 1) for e in a.b_env)
        sides = {"a": (tree_a, dict(os.environ)), "b": (tree_b, env_b)}
        args = [] if a.full else ["--quick"]
        if a.only:
            args += ["--only", a.only]
        if a.np:
            args += ["--np", a.np]
        say(f"A = {a.rev_a}, B = {a.rev_b}" + (f" with {' '.join(a.b_env)}" if a.b_env else "")
            + f"; {a.rounds} rounds each, alternating; results in {out}/a and {out}/b")
        for r in range(1, a.rounds + 1):
            order = ("a", "b") if r % 2 else ("b", "a")
            for side in order:
                tree, env = sides[side]
                dest = os.path.join(out, side, f"round-{r:02d}")
                log = dest + ".log"
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(log, "w") as f:
                    rc = subprocess.run([os.path.join(tree, "run_all.sh"), *args, "--out", dest],
                                        env=env, stdout=f, stderr=subprocess.STDOUT).returncode
                say(f"round {r}/{a.rounds} {side.upper()}: exit {rc} ({log})")
        a.baseline, a.new = os.path.join(out, "a"), os.path.join(out, "b")
        return run(a)
    finally:
        if not a.keep:
            for c in made:
                tree = os.path.join(out, "tree-" + c[:12])
                if os.path.isdir(tree):
                    git("worktree", "remove", "--force", tree)
                    shutil.rmtree(tree, ignore_errors=True)
