#!/bin/bash
# scripts/report --html: one self-contained page (every plot a base64 PNG, nothing fetched) for
# the committed runs t/data/report-run (allreduce, ddp, zero, pipeline with a trace) and the CI
# baseline; the plots each program's rows call for; a table, never an error, for a program the
# report does not know; baseline vs new under compare's verdict; usage errors; and, where
# Chromium is installed, the page rendered headless with every image loaded.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cd "$top" || exit 1
run=t/data/report-run
base=results/baselines/xeon-2core-ci

has_mpl=0
for py in python3 /usr/bin/python3; do
  "$py" -c 'import matplotlib' 2>/dev/null && has_mpl=1
done
skip() { # skip N REASON: N tests that cannot run here
  local i
  for i in $(seq "$1"); do tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP $2"; done
}
imgs() { grep -o 'src="data:image/png;base64,' "$1" | wc -l; }
has_img() { grep -q "<img alt=\"$2\"[^>]*src=\"data:image/png;base64," "$1"; }

scripts/report "$run" --html "$out/run.html" >"$out/log" 2>&1
rc=$?
ok $rc "report $run --html: exit 0 ($(cat "$out/log"))"
! grep -Eq '(src|href)="(https?:|//|file:)' "$out/run.html" && ! grep -q '<link' "$out/run.html"
ok $? "the page is self-contained: no external source, link or style sheet"
for prog in allreduce ddp zero pipeline; do
  grep -q "<h2 id=\"$prog\">" "$out/run.html" && grep -q "row(s) of $prog.jsonl" "$out/run.html"
  ok $? "$prog has its section and its table of rows"
done
grep -q 'every program ran and every check passed' "$out/run.html"
ok $? "the text summary's verdict is on the page"
if [ $has_mpl = 1 ]; then
  for alt in "allreduce: busbw and latency vs size" "ddp: step time by phase" "zero: step time by phase" \
             "zero: memory per stage vs formula" "pipeline: bubble vs micro-batches" "pipeline: per-rank timeline"; do
    has_img "$out/run.html" "$alt"
    ok $? "plot '$alt' embedded"
  done
  grep -q 'Crossovers of the fitted lines' "$out/run.html" || grep -q 'do not cross in the measured range' "$out/run.html"
  ok $? "the allreduce caption says where the fitted alpha-beta lines cross"
  [ "$(imgs "$out/run.html")" = 7 ]
  ok $? "7 plots in all ($(imgs "$out/run.html"))"
else
  skip 8 "matplotlib not installed (python3-matplotlib)"
fi

scripts/report "$base" --html "$out/base.html" >"$out/log" 2>&1
ok $? "report of the CI baseline ($base) --html: exit 0"
grep -q '<h2 id="kernels">' "$out/base.html" && grep -q '<h2 id="mae_threads">' "$out/base.html" \
  && grep -q '<details open><summary>13 row(s) of mae_threads.jsonl' "$out/base.html"
ok $? "programs with no plot (kernels, mae_threads) get their table, open"

# Programs the report does not know, or knows only by their rows' fields: a copy of the run with
# rows shaped as results/schema.json describes them (string params, null metrics, a field of a
# newer schema) and a jsonl line that is not a row.
cp -r "$run" "$out/more"
/usr/bin/env python3 - "$out/more" <<'PY'
import json, sys
d = sys.argv[1]
def row(bench, variant, params, metrics, headline, check="pass", **extra):
    r = {"schema_version": 1, "run_id": "x", "benchmark": bench, "variant": variant, "backend": "cpu",
         "collective": "mpi", "dtype": "f32", "ranks": 2, "params": params,
         "iterations": {"timed": 3, "warmup": 1},
         "time": {"unit": "s", "min": 0.01, "median": 0.012, "mean": 0.012, "max": 0.02, "p95": 0.02, "cv": 0.1},
         "metrics": {k: {"value": v, "unit": u} for k, (v, u) in metrics.items()}, "headline": headline,
         "check": {"status": check, "error": 0, "message": None}, "counters": {}}
    r.update(extra)
    return json.dumps(r)
with open(f"{d}/halo_conv.jsonl", "w") as f:
    for v, g in (("blocking", "1x2"), ("overlapped", "2x1")):
        print(row("halo_conv", v, {"grid": g, "tiles": "2,1", "filter": 3},
                  {"samples_per_s": (120.5, "samples/s"), "halo_bytes": (4096, "bytes"), "future": (None, "")},
                  "samples_per_s", new_field={"a": 1}), file=f)
    print("not json", file=f)
with open(f"{d}/checkpoint.jsonl", "w") as f:
    for k, peak, model in ((1, 12e6, 12e6), (2, 7e6, 7e6), (4, 5e6, 5e6), (8, 7.5e6, 7.5e6), (3, None, None)):
        print(row("checkpoint", "every_k", {"k": k, "layers": 16},
                  {"activ_peak": (peak, "bytes"), "activ_model": (model, "bytes"),
                   "activ_store_all": (16e6, "bytes"), "samples_per_s": (100, "samples/s")}, "samples_per_s"), file=f)
with open(f"{d}/precision.jsonl", "w") as f, open(f"{d}/precision.curve.tsv", "w") as c:
    print("variant\tstep\tloss\tscale", file=c)
    for dt, mode in (("fp32", "none"), ("fp16", "dynamic"), ("bf16", "none")):
        print(row("precision", f"{dt}/{mode}", {"loss_scale": mode, "master": "fp32"},
                  {"final_loss": (1.0 / 41, ""), "loss_last": (1.0 / 41, "")}, "final_loss"), file=f)
        for s in list(range(0, 40, 10)) + [39]:
            print(f"{dt}/{mode}\t{s}\t{1.0 / (s + 1)!r}\t{(65536 >> (s // 10)) if mode == 'dynamic' else 1}", file=c)
PY
printf 'program\texit\tseconds\nhalo_conv\t0\t1\nvdnn\t3\t2\n' >>"$out/more/status.tsv"
scripts/report "$out/more" --html "$out/more.html" >"$out/log" 2>&1
rc=$?
[ $rc = 2 ] && [ -s "$out/more.html" ] && ! grep -q Traceback "$out/log"
ok $? "a run with a failed program and a line that is not a row: page written, exit 2 as the text report (rc=$rc)"
grep -q '<h2 id="halo_conv">' "$out/more.html" && grep -q '<td>overlapped</td>' "$out/more.html" \
  && grep -q 'halo_bytes<br><small>bytes</small>' "$out/more.html" && grep -q '<td>2x1</td>' "$out/more.html" \
  && grep -q 'in every row: tiles=2,1, filter=3' "$out/more.html"
ok $? "an unknown program (halo_conv) gets a table: variants, params, metrics with units"
grep -q 'halo_conv.jsonl:3: not valid JSON' "$out/more.html"
ok $? "the line that is not a row is named on the page (file:line)"
grep -q '<h2 id="vdnn">' "$out/more.html" && grep -q 'no vdnn.jsonl (exit 3)' "$out/more.html"
ok $? "a program that left no rows (exit 3) is listed with its exit status"
if [ $has_mpl = 1 ]; then
  has_img "$out/more.html" "checkpoint: memory vs k" && has_img "$out/more.html" "precision: loss curves"
  ok $? "checkpoint memory vs k drawn from its rows, precision loss curves from precision.curve.tsv"
else
  skip 1 "matplotlib not installed (python3-matplotlib)"
fi

# Baseline vs new: compare's verdict at the top, the two runs side by side.
scripts/report "$run" "$run" --html "$out/same.html" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'class="verdict ok">no regression (exit 0)' "$out/same.html" \
  && [ "$(grep -c '<div class="side"><h3>baseline</h3>' "$out/same.html")" = 4 ]
ok $? "a run against itself: no regression, exit 0, four programs side by side (rc=$rc)"
cp -r "$run" "$out/slow"
/usr/bin/env python3 - "$out/slow/ddp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# every timed iteration slower too: with one round a side compare calls a drop a REGRESSION only
# where the two runs' iterations do not overlap (docs/ci-gate.md)
for r in rows:
    r["metrics"]["samples_per_s"]["value"] *= 0.3
    for k in ("min", "median", "mean", "max", "p95"):
        if isinstance(r.get("time", {}).get(k), (int, float)): r["time"][k] /= 0.3
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
scripts/report "$run" "$out/slow" --html "$out/slow.html" >"$out/log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'class="verdict bad">REGRESSION or failed check (exit 1)' "$out/slow.html" \
  && grep -q 'ddp/sync.*REGRESSION' "$out/slow.html"
ok $? "ddp 70% slower: the page shows compare's REGRESSION, exit 1 (rc=$rc)"

# Usage errors and an unwritable page.
expect() { # expect RC PATTERN DESCRIPTION ARGS...
  local want=$1 pat=$2 what=$3; shift 3
  scripts/report "$@" >"$out/log" 2>&1
  local rc=$?
  [ $rc = "$want" ] && grep -q -- "$pat" "$out/log" && ! grep -q Traceback "$out/log"
  ok $? "$what: exit $want ($(head -1 "$out/log"))"
}
expect 2 "--html: expected the path" "--html without a file" "$run" --html
expect 2 "usage: report" "three directories" "$run" "$run" "$run" --html "$out/x.html"
expect 2 "not a results directory" "a directory that does not exist" "$out/nosuch" --html "$out/x.html"
expect 2 "--html: given twice" "--html twice" "$run" --html "$out/x.html" --html "$out/y.html"
expect 3 "cannot write $out/nodir/r.html" "a page that cannot be written" "$run" --html "$out/nodir/r.html"

# Without matplotlib: tables and a note, never a traceback.
mkdir -p "$out/nompl/matplotlib"
echo 'raise ImportError("no matplotlib in this test")' >"$out/nompl/matplotlib/__init__.py"
PYTHONPATH="$out/nompl" scripts/report "$run" --html "$out/nompl.html" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'install python3-matplotlib for plots' "$out/nompl.html" \
  && [ "$(imgs "$out/nompl.html")" = 0 ] && grep -q 'row(s) of allreduce.jsonl' "$out/nompl.html"
ok $? "without matplotlib: a page of tables that says why there are no plots (rc=$rc)"

# Headless Chromium: the page renders and every image has loaded (naturalWidth > 0); the render
# is t/lib/report_check.py's, the one doc_commands.py uses on the README's run.
if ! chrome=$(python3 "$top/t/lib/report_check.py" chrome); then
  skip 4 "chromium not installed (Debian: apt-get install chromium)"
else
  for page in run more base; do
    got=$(python3 "$top/t/lib/report_check.py" render "$out/$page.html")
    ok $? "chromium renders $page.html: $got"
  done
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --user-data-dir="$out/chrome" --hide-scrollbars \
    --window-size=1300,2400 --screenshot="$out/shot.png" "file://$out/run.html" >/dev/null 2>&1
  if /usr/bin/env python3 -c 'import PIL' 2>/dev/null || /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    py=python3; python3 -c 'import PIL' 2>/dev/null || py=/usr/bin/python3
    "$py" - "$out/shot.png" <<'PY'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
colours = im.getcolors(1 << 20) or [None] * 1000     # None: more colours than the limit
sys.exit(0 if im.size == (1300, 2400) and len(colours) > 50 else 1)
PY
    ok $? "the screenshot is 1300x2400 and not blank (plots drawn)"
  else
    [ -s "$out/shot.png" ] && [ "$(head -c 8 "$out/shot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    ok $? "the screenshot is a PNG (PIL not installed: its pixels not examined)"
  fi
fi
done_testing
