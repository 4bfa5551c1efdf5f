"""page.py — the self-contained HTML report of one run, or of a baseline and a new run side by
side with scripts/compare's verdict. Plots are embedded as base64 PNG and the style sheet is
inline, so the one file is the whole report: it can be mailed, attached to a CI job or opened
from a laptop with no network."""
import datetime
import html
import os
import subprocess
import sys

from gatelib.files import load_manifest

from . import figures as F
from . import allreduce_plots, pipeline_plots, timeline, training_plots
from .tables import kv_table, rows_table

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # scripts/

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1400px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555;max-width:1100px}
table{border-collapse:collapse;font-size:.8em}td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}
th{background:#f4f4f4;vertical-align:bottom}table.kv td{text-align:left}
td.head{font-weight:bold}.check-pass{color:#080}.check-fail{color:#c00;font-weight:bold}
.scroll{overflow-x:auto}pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em}
.note{color:#a60}.verdict{font-size:1.2em;font-weight:bold;padding:.4em .8em;display:inline-block}
.ok{background:#e6f4e6;color:#060}.bad{background:#fbe4e4;color:#a00}.warn{background:#fff3d6;color:#840}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}.side h3{margin:.3em 0;color:#555}
"""


class Run:
    """A results directory as the page needs it: its manifest, exit statuses, rows per program
    and the messages about lines that are not rows."""
    def __init__(self, path, load_rows, load_status):
        self.path = path
        self.notes = []
        self.manifest = {}
        mpath = os.path.join(path, "manifest.json")
        if os.path.lexists(mpath):
            self.manifest = load_manifest(mpath)  # a manifest that cannot be read: exit 2, no page
        else:
            self.notes.append(f"{mpath}: no manifest.json")
        self.status = {}
        spath = os.path.join(path, "status.tsv")
        if os.path.lexists(spath):
            self.status, errors = load_status(spath)
            self.notes += errors
        self.rows = {}
        names = sorted({f[:-6] for f in os.listdir(path) if f.endswith(".jsonl")} | set(self.status))
        for prog in names:
            jp = os.path.join(path, prog + ".jsonl")
            if os.path.lexists(jp):
                rows, errors = load_rows(jp)
                self.notes += errors
                self.rows[prog] = rows

    def ranks_note(self, rows):
        ranks = sorted({r.get("ranks") for r in rows if isinstance(r.get("ranks"), int)})
        hosts = self.manifest.get("hosts")
        nh = len(hosts) if isinstance(hosts, list) else None
        return (f"{'/'.join(map(str, ranks)) or '?'} rank(s)"
                + (f" on {nh} host(s)" if nh else ""))


def figures_for(run, prog):
    """(figures, notes) for one program of a run. A plot that fails on an odd row becomes a
    note on the page, never a missing page."""
    rows = run.rows.get(prog, [])
    figs, notes = [], []
    plotters = []
    if prog == "allreduce":
        plotters.append(("busbw and latency", lambda: allreduce_plots.plot(rows, run.ranks_note(rows))))
    if prog == "pairs":
        from . import pairs_plots   # (needs scripts/pairslib: only for a pairs sweep)
        plotters.append(("heat map", lambda: pairs_plots.heat_map(rows)))
    plotters.append(("step time by phase", lambda: training_plots.phase_bars(rows, prog)))
    if prog == "zero":
        plotters.append(("memory per stage", lambda: training_plots.zero_memory(rows)))
    if prog == "pipeline":
        plotters.append(("bubble vs micro-batches", lambda: pipeline_plots.bubble_vs_microbatches(rows)))
    plotters.append(("memory vs k", lambda: training_plots.checkpoint_memory(rows)))
    plotters.append(("loss curves", lambda: training_plots.precision_curves(
        rows, os.path.join(run.path, prog + ".curve.tsv"))))
    for what, fn in plotters:
        try:
            figs += fn()
        except Exception as e:          # a row shape this report did not expect
            notes.append(f"{prog}: the plot '{what}' was not drawn: {e.__class__.__name__}: {e}")
    tpath = os.path.join(run.path, prog + ".trace.json")
    if os.path.exists(tpath):
        try:
            tf, why = timeline.plot(tpath, prog)
            figs += tf
            if why:
                notes.append(why)
        except Exception as e:
            notes.append(f"{prog}: the timeline was not drawn: {e.__class__.__name__}: {e}")
    return figs, notes


def figure_html(fig):
    return (f'<figure><img alt="{html.escape(fig.title)}" width="{fig.width}" height="{fig.height}" '
            f'src="data:image/png;base64,{fig.png_b64}"><figcaption>{html.escape(fig.caption)}'
            "</figcaption></figure>")


def program_html(run, prog, with_table=True):
    out = []
    if F.plt is not None:
        figs, notes = figures_for(run, prog)
    else:
        figs, notes = [], []
    out += [f'<p class="note">{html.escape(n)}</p>' for n in notes]
    out += [figure_html(f) for f in figs]
    rows = run.rows.get(prog)
    if rows is None:
        rc = run.status.get(prog, (None,))[0]
        out.append(f'<p class="note">no {html.escape(prog)}.jsonl (exit {rc})</p>')
    elif with_table:
        # a program with no plot is read from its table, so that one starts open
        opened = " open" if not figs else ""
        out.append(f"<details{opened}><summary>{len(rows)} row(s) of {html.escape(prog)}.jsonl</summary>"
                   f"{rows_table(rows)}</details>")
    return "".join(out)


def manifest_pairs(m):
    cpu = m.get("cpu") if isinstance(m.get("cpu"), dict) else {}
    cuda = m.get("cuda") if isinstance(m.get("cuda"), dict) else {}
    hosts = m.get("hosts")
    return [
        ("run id", m.get("run_id", "—")), ("start", m.get("start_time", "—")),
        ("command", m.get("command_line", "—")), ("git", m.get("git_describe", "—")),
        ("hosts", ", ".join(map(str, hosts)) if isinstance(hosts, list) else "—"),
        ("ranks", m.get("ranks", "—")),
        ("cpu", f"{cpu.get('model', '—')}, {cpu.get('cores', '?')} cores; {cpu.get('topology', '')}"),
        ("MPI", m.get("mpi_library", "—")), ("build", m.get("build_options", "—")),
        ("CUDA", f"{cuda.get('devices', 0)} device(s) {', '.join(map(str, cuda.get('models') or []))}"
                 f" {cuda.get('note') or ''}".strip()),
    ]


def status_html(run):
    if not run.status:
        return ""
    pairs = []
    for prog, (rc, secs) in sorted(run.status.items()):
        pairs.append((prog, rc, secs, "ok" if rc == 0 else "FAILED"))
    return "<h3>programs</h3>" + kv_table(pairs, ["program", "exit", "seconds", ""])


def text_summary(path):
    """scripts/report's text summary of the run, as it prints it, and its exit status."""
    p = subprocess.run([sys.executable, os.path.join(HERE, "report"), path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.stdout.decode("utf-8", "replace"), p.returncode


def head(title):
    gen = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
           f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
           f"<h1>{html.escape(title)}</h1><p>written {gen} by scripts/report --html</p>"]
    if F.MISSING:
        out.append(f'<p class="note">{html.escape(F.MISSING)}: this page has tables only.</p>')
    return out


def single(run):
    """The page of one run and its exit status (the text summary's: 1 if anything failed, 2 if a
    line is not a results row)."""
    out = head(f"scalelab report: {run.manifest.get('run_id', os.path.basename(run.path.rstrip('/')))}")
    out.append(kv_table(manifest_pairs(run.manifest)))
    out.append(status_html(run))
    out += [f'<p class="note">{html.escape(n)}</p>' for n in run.notes]
    text, rc = text_summary(run.path)
    cls = "ok" if rc == 0 else "bad"
    verdict = next((ln[len("# verdict: "):] for ln in text.splitlines() if ln.startswith("# verdict: ")),
                   "no verdict")
    out.append(f'<h2>summary</h2><p class="verdict {cls}">{html.escape(verdict)}</p>'
               f"<pre>{html.escape(text)}</pre>")
    for prog in sorted(set(run.rows) | set(run.status)):
        out.append(f'<h2 id="{html.escape(prog)}">{html.escape(prog)}</h2>')
        out.append(program_html(run, prog))
    out.append("</body></html>")
    return "\n".join(out), (rc if rc == 2 else 1 if rc != 0 else 0)  # 2: a line is not a row


def comparison(base, new):
    """Baseline and new run side by side, under scripts/compare's verdict; the exit status is
    compare's (0 no regression, 1 regression or failure, 2 nothing compared)."""
    out = head("scalelab report: baseline vs new")
    p = subprocess.run([sys.executable, os.path.join(HERE, "compare"), base.path, new.path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = p.stdout.decode("utf-8", "replace")
    verdict, cls = {0: ("no regression", "ok"), 1: ("REGRESSION or failed check", "bad")}.get(
        p.returncode, ("nothing compared", "warn"))
    out.append(f'<h2>regression verdict (scripts/compare)</h2><p class="verdict {cls}">{verdict} '
               f"(exit {p.returncode})</p><pre>{html.escape(text)}</pre>")
    bp, np_ = manifest_pairs(base.manifest), manifest_pairs(new.manifest)
    out.append("<h2>runs</h2>" + kv_table([(k, b, n) for (k, b), (_, n) in zip(bp, np_)],
                                          ["", f"baseline: {base.path}", f"new: {new.path}"]))
    out.append('<div class="pair">')
    for run in (base, new):
        out.append('<div class="side">' + status_html(run)
                   + "".join(f'<p class="note">{html.escape(n)}</p>' for n in run.notes) + "</div>")
    out.append("</div>")
    for prog in sorted(set(base.rows) | set(new.rows) | set(base.status) | set(new.status)):
        out.append(f'<h2 id="{html.escape(prog)}">{html.escape(prog)}</h2><div class="pair">')
        for name, run in (("baseline", base), ("new", new)):
            body = (program_html(run, prog) if prog in run.rows or prog in run.status
                    else f'<p class="note">not in this run</p>')
            out.append(f'<div class="side"><h3>{name}</h3>{body}</div>')
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out), p.returncode


def write(paths, out_path, load_rows, load_status):
    runs = [Run(p, load_rows, load_status) for p in paths]
    page, rc = single(runs[0]) if len(runs) == 1 else comparison(runs[0], runs[1])
    tmp = out_path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, out_path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        print(f"report: --html: cannot write {out_path}: {e.strerror}", file=sys.stderr)
        return 3
    nimg = page.count("data:image/png;base64,")
    print(f"report: wrote {out_path} ({len(page) // 1024} KiB, {nimg} plot(s)"
          + (f"; {F.MISSING}" if F.MISSING else "") + ")")
    return rc
