#!/bin/bash
# ./run_all.sh --quick --only mae_threads,checkpoint writes a manifest and valid rows, prints the
# summary, ends by writing the summary and report.html (a plot for checkpoint) into the results
# directory and printing its path, and exits 0; its own bad options exit 2. parallel3d runs on the
# grid its ranks allow, in quick and ci modes, its rows gated.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cd "$top" || exit 1

./run_all.sh --quick --only mae_threads,checkpoint --out "$out/run" >"$out/log" 2>&1
rc=$?
ok $rc "run_all.sh --quick --only mae_threads,checkpoint exits 0"
[ $rc = 0 ] || tail -20 "$out/log" | sed 's/^/#   /' >&2
scripts/validate manifest "$out/run/manifest.json" >/dev/null
ok $? "manifest.json written and valid"
scripts/validate rows "$out/run/mae_threads.jsonl" --min-rows 5 >/dev/null
ok $? "mae_threads.jsonl rows valid"
grep -q '^# summary of' "$out/log" && grep -q 'mae_threads *partial' "$out/log"
ok $? "the summary table is printed"
grep -q 'verdict: every program ran and every check passed' "$out/log"
ok $? "the verdict says every check passed"
[ -s "$out/run/mae_threads.log" ] && grep -q 'mae_threads	0	' "$out/run/status.tsv"
ok $? "per-program log and exit status recorded"
# The run ends with one file to open: report.html beside the rows, its path printed last.
grep -q 'verdict: every program ran' "$out/run/summary.txt" && grep -q 'mae_threads *partial' "$out/run/summary.txt"
ok $? "the summary is also written to OUT/summary.txt"
tail -2 "$out/log" | grep -q "^# report: wrote $out/run/report.html (" \
  && tail -1 "$out/log" | grep -q "open $out/run/report.html"
ok $? "the last lines print the report's path: $(tail -2 "$out/log" | head -1)"
imgs=$(grep -o 'data:image/png;base64,' "$out/run/report.html" | wc -l)
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || python3 -c 'import matplotlib' 2>/dev/null; then
  [ "$imgs" -ge 1 ] && grep -q 'id="checkpoint"' "$out/run/report.html" && grep -q 'id="mae_threads"' "$out/run/report.html"
  ok $? "report.html has both programs and checkpoint's memory plot ($imgs plot(s))"
else
  [ "$imgs" = 0 ] && grep -q 'install python3-matplotlib for plots' "$out/run/report.html"
  ok $? "report.html without matplotlib: tables, and it says why there are no plots"
fi

# ddp runs twice, on the MLP then on the transformer: one status line, one log and jsonl with
# both models' rows, the summary's ddp/gpt groups beside ddp's
./run_all.sh --quick --only ddp --out "$out/gpt" >"$out/gpt.log" 2>&1
rc=$?
python3 - "$out/gpt" <<'PY'
import json, sys
d = sys.argv[1]
models = sorted({r["params"].get("model", "mlp") for r in map(json.loads, open(f"{d}/ddp.jsonl"))})
status = [l.split("\t")[0] for l in open(f"{d}/status.tsv")][1:]
log = open(f"{d}/ddp.log").read()
summary = open(f"{d}/summary.txt").read()
ok = models == ["gpt", "mlp"] and status == ["ddp"] and log.count("# GPT 2 blocks x 64") == 1 and \
    "ddp/gpt" in summary and " ddp " in summary
sys.exit(0 if ok else f"models {models}, status {status}")
PY
ok $? "run_all --only ddp: the MLP's and the GPT's rows in one jsonl and log, one status line, ddp/gpt in the summary (rc=$rc)"

# parallel3d on the grid its ranks allow (2 ranks: 1x1x2), its rows gated by scaling_eff against
# the one-rank step of the same run
./run_all.sh --quick --only parallel3d --np 2 --out "$out/p3d" >"$out/p3d.log" 2>&1
rc=$?
python3 - "$out/p3d/parallel3d.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = [f"{r['variant']}: layout {r['params']['dp']}x{r['params']['tp']}x{r['params']['pp']}, gate {r['gate']}, "
       f"check {r['check']['status']}" for r in rows
       if (r["params"]["dp"], r["params"]["tp"], r["params"]["pp"]) != (1, 1, 2) or r["gate"] != "scaling_eff"
       or not r["metrics"]["scaling_eff"]["value"] > 0 or r["check"]["status"] != "pass"]
sys.exit("; ".join(bad) if bad or not rows else 0)
PY
ok $(( rc || $? )) "run_all --quick --only parallel3d on 2 ranks: 1x1x2, the row passes and is gated by scaling_eff (rc=$rc)"

touch "$out/a_file"
./run_all.sh --quick --only mae_threads --out "$out/a_file" >"$out/log" 2>&1
rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$out/log")" = 1 ] && grep -q -- "--out: '$out/a_file' is not a directory" "$out/log"
ok $? "--out naming a file: exit 2, it is not a directory (rc=$rc): $(cat "$out/log")"
./run_all.sh --np 0 >/dev/null 2>&1; [ $? = 2 ]
ok $? "--np 0 exits 2"
# --args reaches the program after its own arguments: an option it does not know makes it exit 2
./run_all.sh --quick --only mae_threads --args "--no-such-option" --out "$out/args" >"$out/log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q $'^mae_threads\t2\t' "$out/args/status.tsv" &&
  grep -q '^## mae_threads .*--threads 1,2 --no-such-option)$' "$out/log" && grep -q -- '--no-such-option' "$out/args/mae_threads.log"
ok $? "--args is appended to the program's quick arguments (rc=$rc)"
./run_all.sh --quick --args "" >"$out/log" 2>&1
[ $? = 2 ] && [ "$(wc -l <"$out/log")" = 1 ] && grep -q -- '--args: expected' "$out/log"
ok $? "--args with nothing to append exits 2, one line: $(cat "$out/log")"
./run_all.sh --only no_such_program >/dev/null 2>&1; [ $? = 2 ]
ok $? "--only with an unknown program exits 2"
./run_all.sh --bogus >/dev/null 2>&1; [ $? = 2 ]
ok $? "unknown option exits 2"
for bad in , ../bin/mae_threads mae_threads,mae_threads mae_threads, ,mae_threads "mae_threads,,kernels" sl-launch .; do
  ./run_all.sh --quick --only "$bad" --out "$out/only" >"$out/log" 2>&1
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/log")" = 1 ] && grep -q -- '--only' "$out/log"
  ok $? "--only '$bad' exits 2 naming --only: $(cat "$out/log")"
done
[ ! -e "$out/only" ]
ok $? "... and runs nothing"

# sl-launch: a missing program is one line and exit 2; SL_LAUNCHER_ARGS are words, never globs
scripts/sl-launch -np 1 bin/nosuch >"$out/log" 2>&1
rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$out/log")" = 1 ] && grep -q 'bin/nosuch: no such program' "$out/log"
ok $? "sl-launch bin/nosuch: exit 2, one line (rc=$rc)"
scripts/sl-launch -np 1 no_such_program_anywhere >/dev/null 2>&1; [ $? = 2 ]
ok $? "sl-launch with a name not in PATH: exit 2"
touch "$out/glob_a" "$out/glob_b"
(cd "$out" && SL_LAUNCHER_ARGS=' -x   SL_T=glob_* ' "$top/scripts/sl-launch" -np 1 sh -c 'echo "[$SL_T]"') >"$out/log" 2>&1
grep -qx '\[glob_\*\]' "$out/log"
ok $? "SL_LAUNCHER_ARGS split at whitespace, '*' not expanded: $(cat "$out/log")"

# A failing program: the suite carries on and exits non-zero (a program past its time limit
# is killed the same way). A stand-in program that fails is placed in a copy of bin/.
mkdir -p "$out/tree/bin" "$out/tree/scripts" "$out/tree/results"
cp run_all.sh "$out/tree/" && cp -r scripts/sl-launch scripts/report scripts/gatelib scripts/reportlib "$out/tree/scripts/"
cp results/schema.json "$out/tree/results/"  # what the report validates the rows against
printf '#!/bin/sh\nexit 1\n' >"$out/tree/bin/always_fails"
printf '#!/bin/sh\nsleep 60\n' >"$out/tree/bin/hangs"
cp bin/mae_threads "$out/tree/bin/"
chmod +x "$out/tree/bin/"*
# (the limit leaves mae_threads' quick run room under the sanitizers on a busy 2-core machine,
# where it takes several seconds, with another test file beside it (make check runs two at a
# time); the stand-in that hangs is killed at it)
(cd "$out/tree" && ./run_all.sh --quick --np 1 --timeout 30 --out "$out/tree/res" >"$out/log2" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q 'always_fails: FAILED' "$out/log2" && grep -q 'hangs: FAILED (killed' "$out/log2" \
  && grep -q 'mae_threads *partial' "$out/log2"
ok $? "a failing and a hanging program: the others still run, the summary names them, exit 1"
[ $rc = 1 ] || tail -20 "$out/log2" | sed 's/^/#   /' >&2


# Ctrl-C: the running program (and its ranks) stops, the next does not start, the summary so far
# is printed marked INTERRUPTED, exit 130. A program killed by SIGKILL well within the limit is
# called that (an OOM kill), not a time-limit kill.
rm -rf "$out/tree/bin/"* "$out/tree/res"
printf '#!/bin/sh\necho $$ >%s/sleeper.pid\nexec sleep 60\n' "$out" >"$out/tree/bin/a_hangs"
printf '#!/bin/sh\ntouch %s/b_ran\n' "$out" >"$out/tree/bin/b_next"
chmod +x "$out/tree/bin/"*
# (a background job starts with SIGINT ignored; perl gives it back its default)
(cd "$out/tree" && exec perl -e '$SIG{INT}="DEFAULT"; exec @ARGV' ./run_all.sh --quick --np 1 --out "$out/tree/res") >"$out/log3" 2>&1 &
ra=$!
for _ in $(seq 300); do [ -s "$out/sleeper.pid" ] && break; sleep 0.1; done
sleep 0.5
kill -INT "$ra"
wait "$ra"
rc=$?
sleeper=$(cat "$out/sleeper.pid" 2>/dev/null)
[ $rc = 130 ] && grep -q 'INTERRUPTED by SIGINT after 1 of 2' "$out/log3" && grep -q '^# summary of' "$out/log3" \
  && [ ! -e "$out/b_ran" ] && grep -q 'a_hangs	130	' "$out/tree/res/status.tsv"
ok $? "Ctrl-C: exit 130, the summary so far marked INTERRUPTED, the next program not started (rc=$rc)"
gone() { ! kill -0 "$1" 2>/dev/null || ps -o stat= -p "$1" | grep -q Z; } # a zombie is gone
for _ in $(seq 100); do gone "$sleeper" && break; sleep 0.1; done
[ -n "$sleeper" ] && gone "$sleeper"
ok $? "... and the running program is gone"
[ -n "$sleeper" ] && ! gone "$sleeper" && diag "$(ps -o pid,ppid,stat,cmd -p "$sleeper")"
[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null

rm -rf "$out/tree/bin/"* "$out/tree/res"
printf '#!/bin/sh\nkill -9 $$\n' >"$out/tree/bin/oom_killed"
chmod +x "$out/tree/bin/oom_killed"
(cd "$out/tree" && ./run_all.sh --quick --np 1 --timeout 60 --out "$out/tree/res" >"$out/log4" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q 'oom_killed: killed by SIGKILL from outside the suite' "$out/log4" && ! grep -q 'limit$' "$out/log4" \
  && ! grep -q 'killed after the' "$out/log4"
ok $? "a SIGKILL within the limit is called an outside kill (OOM?), not the time limit (rc=$rc)"
[ $rc = 1 ] || tail -5 "$out/log4" | sed 's/^/#   /' >&2

# --ci's 5 rounds are a default: an explicit --rounds wins, before --ci or after it
rm -rf "$out/tree/bin/"* "$out/tree/res"
printf '#!/bin/sh\nexit 0\n' >"$out/tree/bin/quiet"
chmod +x "$out/tree/bin/quiet"
for opts in "--ci --rounds 2" "--rounds 2 --ci" "--ci"; do
  want=2; [ "$opts" = --ci ] && want=5
  rm -rf "$out/tree/res"
  # shellcheck disable=SC2086
  (cd "$out/tree" && ./run_all.sh $opts --np 1 --out "$out/tree/res") >"$out/log5" 2>&1
  n=$(find "$out/tree/res" -maxdepth 1 -name 'round-*' | wc -l)
  [ "$n" = $want ] && grep -q "($want rounds: " "$out/log5"
  ok $? "run_all.sh $opts: $want rounds ($n)"
done

# parallel3d's grid from its ranks, in quick and ci modes alike (a stand-in records its arguments)
rm -rf "$out/tree/bin/"* "$out/tree/res"
printf '#!/bin/sh\n[ "$OMPI_COMM_WORLD_RANK" = 0 ] && echo "$*" >>%s/p3d_args\nexit 0\n' "$out" >"$out/tree/bin/parallel3d"
chmod +x "$out/tree/bin/parallel3d"
rm -f "$out/p3d_args"
for opts in "--quick --np 4" "--ci --rounds 1 --np 2" "--quick --np 3" "--quick --np 8"; do
  rm -rf "$out/tree/res"
  # shellcheck disable=SC2086
  (cd "$out/tree" && ./run_all.sh $opts --out "$out/tree/res") >"$out/log7" 2>&1
done
want="--dp 1 --tp 2 --pp 2|-n 10 -w 2 .*--dp 1 --tp 1 --pp 2|--dp 3 --tp 1 --pp 1|--dp 2 --tp 2 --pp 2"
got=$(paste -sd'|' "$out/p3d_args" 2>/dev/null)
python3 - "$want" "$got" <<'PY'
import re, sys
want, got = sys.argv[1].split("|"), sys.argv[2].split("|")
sys.exit(0 if len(want) == len(got) and all(re.search(w, g) for w, g in zip(want, got)) else 1)
PY
ok $? "run_all gives parallel3d the grid of its ranks: 4 -> 1x2x2 (quick), 2 -> 1x1x2 (ci), 3 -> 3x1x1, 8 -> 2x2x2"
[ "$(wc -l <"$out/p3d_args")" = 4 ] || diag "parallel3d's arguments: $(cat "$out/p3d_args")"

# A hangup (the terminal or ssh session closed) is handled as Ctrl-C and TERM are. The terminal's
# SIGHUP reaches run_all.sh's process group (here its own session, from setsid), not the
# launcher's, which timeout puts in a group of its own. Every process of the run has the results
# directory in its environment (SL_RESULTS): none may be left.
# (rank.* of an earlier case would end the wait below before a_hangs has started: then the HUP
# could reach run_all.sh before its program does)
rm -rf "$out/tree/bin/"* "$out/tree/res" "$out/b_ran" "$out"/rank.*
printf '#!/bin/sh\necho $$ >%s/rank.$OMPI_COMM_WORLD_RANK\nexec sleep 60\n' "$out" >"$out/tree/bin/a_hangs"
printf '#!/bin/sh\ntouch %s/b_ran\n' "$out" >"$out/tree/bin/b_next"
chmod +x "$out/tree/bin/"*
of_run() { grep -lzx "SL_RESULTS=$out/tree/res" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
# (perl gives SIGHUP back its default: a test run under nohup inherits it ignored, and an
# ignored signal stays ignored through exec, where run_all.sh's trap cannot take it)
(cd "$out/tree" && exec setsid perl -e '$SIG{HUP} = "DEFAULT"; exec @ARGV' ./run_all.sh --quick --np 2 \
  --out "$out/tree/res") >"$out/log6" 2>&1 &
ra=$!
for _ in $(seq 300); do [ -s "$out/rank.0" ] && [ -s "$out/rank.1" ] && break; sleep 0.1; done
kill -HUP -- "-$ra"
wait "$ra"
rc=$?
[ $rc = 130 ] && grep -q 'INTERRUPTED by SIGHUP after 1 of 2' "$out/log6" && grep -q '^# summary of' "$out/log6" \
  && grep -q 'a_hangs: FAILED (interrupted' "$out/log6" && [ ! -e "$out/b_ran" ]
ok $? "SIGHUP: exit 130, the summary so far marked INTERRUPTED, the next program not started (rc=$rc)"
[ $rc = 130 ] || tail -5 "$out/log6" | sed 's/^/#   /' >&2
grep -q '^a_hangs	130	' "$out/tree/res/status.tsv"
ok $? "... status.tsv names the program stopped"
# (the ranks may still be on their way out when run_all.sh ends; a zombie has no environment)
for _ in $(seq 100); do left=$(of_run); [ -z "$left" ] && break; sleep 0.1; done
[ -z "$left" ]
ok $? "... and no mpirun or rank of the run is left${left:+: $(echo $left)}"
[ -z "$left" ] || { ps -o pid,ppid,stat,cmd -p "$(echo $left | tr ' ' ,)" >&2; kill -KILL $left; }

done_testing
