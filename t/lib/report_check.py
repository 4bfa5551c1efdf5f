#!/usr/bin/env python3
"""report_check — what the tests ask of a report.html page: a plot for every program that has
one, and, where a headless Chromium is installed, a page that loads with every image decoded.

    python3 t/lib/report_check.py chrome              the browser's path (exit 1: none installed)
    python3 t/lib/report_check.py render PAGE.html    render PAGE headless; prints
                                                      "images=N broken=M (the page embeds K)",
                                                      exit 0 when M = 0 and N = K, 3 without a browser
    python3 t/lib/report_check.py plots RUN PAGE.html every program that ran in RUN and has a
                                                      plot has one on PAGE: "PROGRAM COUNT" each,
                                                      exit 0 when none lacks it, 3 when it cannot be
                                                      asked here (no matplotlib), saying why

Which programs have a plot: the report draws from what a program's rows carry (the phases of a
step, ZeRO's stages, the checkpoint's k, ...; scripts/reportlib/page.py, figures_for), not from
a list of names, so the list is what scripts/report draws for the committed CI baseline: every
program's rows at the quick sizes (BASELINE below). A program whose fresh rows no longer feed
its plotter then shows here as a missing plot.

Used by t/integration/report_html.t (committed runs) and t/lib/doc_commands.py (the run that
the README's ./run_all.sh --quick leaves). Standard library only.
"""
import functools
import glob
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BASELINE = os.path.join(TOP, "results", "baselines", "xeon-2core-ci", "round-01")
BROWSERS = ("chromium", "chromium-browser", "chromium-headless", "google-chrome",
            "google-chrome-stable", "chrome-headless-shell")
IMG_RE = re.compile(r'<img alt="([^"]*)"[^>]*src="data:image/png;base64,')
NO_MPL = "install python3-matplotlib for plots"     # the page's note without matplotlib
# A hang guard for the browser, not a measurement: a render takes seconds.
BROWSER_LIMIT_S = 120
# Appended to a copy of the page: once it has loaded, a line counting the images that decoded.
CHECK_JS = """<script>
window.addEventListener("load", () => {
  const all = [...document.images];
  const broken = all.filter(i => !(i.complete && i.naturalWidth > 0)).length;
  const d = document.createElement("div");
  d.id = "imgcheck";
  d.textContent = `images=${all.length} broken=${broken}`;
  document.body.appendChild(d);
});
</script>
"""


def chrome():
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def alts(page):
    """The alt text of every embedded PNG of a page, in order."""
    with open(page, encoding="utf-8", errors="replace") as f:
        return [html.unescape(a) for a in IMG_RE.findall(f.read())]


def render(page):
    """(good, message): PAGE rendered headless, every image decoded; good is None without a
    browser."""
    browser = chrome()
    if browser is None:
        return None, "chromium not installed (Debian: apt-get install chromium)"
    want = len(alts(page))
    with tempfile.TemporaryDirectory(prefix="scalelab-render.") as tmp:
        copy = os.path.join(tmp, "check.html")
        shutil.copyfile(page, copy)
        with open(copy, "a", encoding="utf-8") as f:
            f.write(CHECK_JS)
        try:
            p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                                f"--user-data-dir={tmp}/profile", "--virtual-time-budget=10000",
                                "--dump-dom", "file://" + copy],
                               capture_output=True, text=True, errors="replace",
                               timeout=BROWSER_LIMIT_S)
            dom = p.stdout
        except subprocess.TimeoutExpired:
            return False, f"{os.path.basename(browser)} did not finish in {BROWSER_LIMIT_S} s"
    m = re.search(r'id="imgcheck">([^<]*)', dom)
    got = m.group(1) if m else "no result (the page did not load)"
    return got == f"images={want} broken=0", f"{got} (the page embeds {want})"


def matplotlib_missing():
    """Why no plot can be asked for here, or None: the report runs under the python3 on PATH
    (run_all.sh and scripts/report's #! line), so that is the one asked."""
    try:
        p = subprocess.run(["python3", "-c", "import matplotlib"], capture_output=True)
    except OSError:
        return "python3 not found"
    return None if p.returncode == 0 else "matplotlib not installed (python3-matplotlib)"


@functools.lru_cache(maxsize=None)
def programs_with_plots():
    """The programs scripts/report draws a plot for, from the committed baseline's rows."""
    with tempfile.TemporaryDirectory(prefix="scalelab-plots.") as tmp:
        page = os.path.join(tmp, "baseline.html")
        p = subprocess.run(["python3", os.path.join(TOP, "scripts", "report"), BASELINE,
                            "--html", page], capture_output=True, text=True, errors="replace")
        if p.returncode not in (0, 1) or not os.path.exists(page):
            raise RuntimeError(f"scripts/report {BASELINE} --html: exit {p.returncode}: "
                               + p.stdout + p.stderr)
        return frozenset(a.split(":", 1)[0] for a in alts(page))


def programs_ran(run):
    """The programs of a run that exited 0 and left rows (of its last round, for --rounds)."""
    rounds = sorted(glob.glob(os.path.join(run, "round-[0-9]*")))
    d = run if os.path.exists(os.path.join(run, "status.tsv")) or not rounds else rounds[-1]
    ran = []
    with open(os.path.join(d, "status.tsv"), encoding="utf-8") as f:
        for line in f:
            cells = line.rstrip("\n").split("\t")
            rows = os.path.join(d, cells[0] + ".jsonl")
            if len(cells) >= 2 and cells[1] == "0" and os.path.isfile(rows) and os.path.getsize(rows):
                ran.append(cells[0])
    return ran


def plots(run, page):
    """(good, lines): good is None when the question cannot be asked here (lines say why)."""
    why = matplotlib_missing()
    if why:
        return None, [why]
    with open(page, encoding="utf-8", errors="replace") as f:
        if NO_MPL in f.read():
            return False, [f"the page says '{NO_MPL}', yet python3 imports matplotlib"]
    have = {}
    for a in alts(page):
        have.setdefault(a.split(":", 1)[0], []).append(a)
    plotted = programs_with_plots()
    want = [p for p in programs_ran(run) if p in plotted]
    lines = [f"{p} {len(have[p])}" if p in have else f"{p} NONE" for p in want]
    return all(p in have for p in want), lines or ["no program that ran has a plot"]


def main(argv):
    if argv[:1] == ["chrome"] and len(argv) == 1:
        path = chrome()
        print(path or "no chromium")
        return 0 if path else 1
    if argv[:1] == ["render"] and len(argv) == 2:
        good, msg = render(argv[1])
    elif argv[:1] == ["plots"] and len(argv) == 3:
        good, lines = plots(argv[1], argv[2])
        msg = ", ".join(lines)
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print(msg)
    return 3 if good is None else 0 if good else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
