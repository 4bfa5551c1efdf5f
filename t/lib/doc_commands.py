#!/usr/bin/env python3
"""doc_commands — run every command that README.md and docs/*.md show.

    python3 t/lib/doc_commands.py [--list] [PAGE.md ...]     (default: README.md docs/*.md)

A page's commands are its ```sh blocks, read as the lab sheets' are (t/lib/lab_sheets.py,
conventions in benchmarks/labs/README.md): one command per line, `#` a comment, and
`<!-- lab-test quick PROGRAM: OPTION VALUE ... -->` shrinking PROGRAM's runs for the test
(PROGRAM may be run_all.sh). Two more conventions:

  - a block opened with ```sh cluster needs a cluster (Slurm, several hosts, a GPU node), and
    one opened with ```sh whole-suite builds or tests the whole suite (make, make check,
    compare --ab: minutes each; .ci/run runs make and make check): both are listed as skipped,
    saying why, never run;
  - `<!-- doc-test verdict: WORD ... -->`: a command holding one of these words is a gate whose
    verdict depends on the machine's timings (scripts/compare): exit 0 or 1 (a verdict) passes,
    anything else (2: nothing compared, 3: a failure) fails.

A command that leaves a report (run_all.sh prints "# report: wrote PATH (...)") gets two more
tests of that page (t/lib/report_check.py): a plot on it for every program that ran and has one
(skipped, saying why, without matplotlib), and the page rendered in headless Chromium with every
image decoded (skipped without a browser). So the README's `./run_all.sh --quick` is checked
for what a newcomer opens after it.

Each page's commands run one after another in a sandbox of their own: a directory whose entries
are links to the repository's, except results/, which is new (holding links to the baselines
and the schema), so that a page's `--out results/NAME` is written there and a later command of
the same page reads it. Output is TAP, one test per command. Standard library only.
"""
import glob
import os
import re
import shlex
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_sheets as labs  # noqa: E402
import report_check  # noqa: E402

TOP = labs.TOP
VERDICT_RE = re.compile(r"<!--\s*doc-test\s+verdict\s*:\s*(.*?)\s*-->")
# A hang guard, not a measurement: the README's ./run_all.sh --quick runs every program (each
# under run_all.sh's own limit), minutes on 2 cores and more under the sanitizers, where one
# program's guard (labs.TIMEOUT_S) would cut it short.
SUITE_LIMIT_S = 1200
REPORT_RE = re.compile(r"^# report: wrote (.+?\.html) \(", re.M)   # run_all.sh's last lines
NOT_RUN = {"cluster": "needs a cluster (Slurm, several hosts or a GPU node)",
           "whole-suite": "builds or tests the whole suite (.ci/run runs make and make check; "
                          "gate.t runs compare --ab on built trees)"}


def pages(argv):
    return argv or [os.path.join(TOP, "README.md")] + sorted(glob.glob(os.path.join(TOP, "docs", "*.md")))


def verdict_words(path):
    with open(path, encoding="utf-8") as f:
        return {w for words in VERDICT_RE.findall(f.read()) for w in words.split()}


def sandbox(root):
    """root made to look like the repository: every entry a link, results/ a fresh directory
    holding links to what the repository keeps there (baselines, schema, screenshots)."""
    for name in os.listdir(TOP):
        if name not in ("results", ".git"):
            os.symlink(os.path.join(TOP, name), os.path.join(root, name))
    os.mkdir(os.path.join(root, "results"))
    for name in ("baselines", "schema.md", "screenshots"):
        if os.path.exists(os.path.join(TOP, "results", name)):
            os.symlink(os.path.join(TOP, "results", name), os.path.join(root, "results", name))


def main(argv):
    listing = "--list" in argv
    argv = [a for a in argv if a != "--list"]
    n = failed = 0
    gpu, smpi = labs.has_gpu(), labs.has_smpi_build()
    env = {k: v for k, v in os.environ.items() if k not in ("SL_RESULTS", "SL_RUN_ID")}
    for page in pages(argv):
        name = os.path.relpath(page, TOP)
        commands, quick, as_written, _ = labs.parse_sheet(page)
        gates = verdict_words(page)
        if listing:
            for no, cmd, tag in commands:
                print(f"{name}:{no}: {cmd}" + (f"    [{tag}: not run]" if tag else ""))
            continue
        with tempfile.TemporaryDirectory(prefix="scalelab-doc.") as root:
            sandbox(root)
            for no, cmd, tag in commands:
                n += 1
                if tag:
                    why = NOT_RUN.get(tag)
                    if why is None:
                        failed += 1
                        print(f"not ok {n} - {name}:{no}: a ```sh {tag} block: expected sh, sh cluster or sh whole-suite")
                    else:
                        print(f"ok {n} - {name}:{no}: {cmd} # SKIP {why}")
                    continue
                words, skip = labs.prepare(cmd, quick, as_written, gpu, smpi)
                if skip:
                    print(f"ok {n} - {name}:{no}: {shlex.join(words)} # SKIP {skip}")
                    continue
                t0 = time.monotonic()
                rc, text = labs.run_command(words, root, env, SUITE_LIMIT_S if
                                            labs.program_of(words) == "run_all.sh" else labs.TIMEOUT_S)
                secs = time.monotonic() - t0
                good = rc in (0, 1) if gates & set(words) else rc == 0
                print(("ok" if good else "not ok") + f" {n} - {name}:{no}: {shlex.join(words)} "
                      f"(exit {rc}, {secs:.0f} s)")
                if not good:
                    failed += 1
                    for line in text.splitlines()[-15:]:
                        print("#   " + line)
                # (a path printed relative is relative to the sandbox, where the command ran)
                for page in (os.path.join(root, p) for p in REPORT_RE.findall(text)):
                    shown = os.path.relpath(page, root)
                    for what, check in (("a plot for every program that ran and has one",
                                         lambda: report_check.plots(os.path.dirname(page), page)),
                                        ("rendered in headless Chromium, every image decoded",
                                         lambda: report_check.render(page))):
                        n += 1
                        try:
                            got, detail = check()
                        except (OSError, RuntimeError) as e:   # no status.tsv, the page unreadable
                            got, detail = False, f"{e.__class__.__name__}: {e}"
                        detail = ", ".join(detail) if isinstance(detail, list) else detail
                        if got is None:
                            print(f"ok {n} - {name}:{no}: {shown}: {what} # SKIP {detail}")
                            continue
                        print(("ok" if got else "not ok") + f" {n} - {name}:{no}: {shown}: {what}: {detail}")
                        failed += not got
                sys.stdout.flush()
    if not listing:
        print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
