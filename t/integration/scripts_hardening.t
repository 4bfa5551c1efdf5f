#!/bin/bash
# scripts/compare and scripts/report on inputs they cannot read as results/schema.json describes
# them: one line naming the file and what is wrong, exit 2, never a traceback (whose exit 1
# would read as a regression or a failed run); options that are not finite numbers refused;
# figures that are not finite, unknown schema versions and differing schemas said as such.
# The shared checks live in scripts/gatelib/cli.py and files.py. Needs no build; seconds.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
run=$top/t/data/report-run

# refused SCRIPT PATTERN DESCRIPTION ARGS...: exit 2, exactly one line on stderr matching
# PATTERN, no traceback anywhere
refused() {
  local script=$1 want=$2 what=$3; shift 3
  timeout 60 "$top/scripts/$script" "$@" >"$out/log" 2>"$out/err"
  local rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <"$out/err")" = 1 ] && grep -q -- "$want" "$out/err" \
     && ! grep -q Traceback "$out/log" "$out/err"; then
    ok 0 "$script $what: exit 2: $(cat "$out/err")"
  else
    ok 1 "$script $what: exit 2 and one line naming '$want'"; diag "rc=$rc: $(tail -3 "$out/err")"
  fi
}
copy() { rm -rf "$out/$1"; cp -r "$run" "$out/$1"; }
edit_manifest() { # edit_manifest DIR PYTHON-STATEMENT-ON-m
  python3 -c "import json, sys; m = json.load(open(sys.argv[1])); $2; json.dump(m, open(sys.argv[1], 'w'))" \
    "$out/$1/manifest.json"
}

# A manifest field of the wrong type: named, in compare, report and the two-run page.
copy hosts5 && edit_manifest hosts5 'm["hosts"] = 5'
copy cpux && edit_manifest cpux 'm["cpu"] = "x"'
refused compare "hosts5/manifest.json: not a manifest (results/schema.json): hosts: 5 is an integer, expected a list" \
  '"hosts": 5' "$run" "$out/hosts5"
refused compare "cpux/manifest.json: not a manifest (results/schema.json): cpu: \"x\" is a string, expected an object" \
  '"cpu": "x"' "$out/cpux" "$run"
refused report "hosts5/manifest.json: .*hosts: 5" '"hosts": 5' "$out/hosts5"
refused report "cpux/manifest.json: .*cpu: " '"cpu": "x" --html' "$out/cpux" --html "$out/cpux.html"
refused report "cpux/manifest.json: .*cpu: " '"cpu": "x", two runs --html' "$run" "$out/cpux" --html "$out/two.html"
[ ! -e "$out/two.html" ]
ok $? "report A B --html with a bad manifest writes no page (it would have embedded compare's traceback)"

# A directory where status.tsv or a .jsonl should be; a FIFO is refused, not waited on.
copy stdir && rm "$out/stdir/status.tsv" && mkdir "$out/stdir/status.tsv"
copy jdir && mkdir "$out/jdir/extra.jsonl"
copy fifo && rm "$out/fifo/status.tsv" && mkfifo "$out/fifo/status.tsv"
for s in compare report; do
  args=("$run"); [ $s = report ] && args=()
  refused $s "stdir/status.tsv: cannot read: a directory" "status.tsv a directory" "${args[@]}" "$out/stdir"
  refused $s "jdir/extra.jsonl: cannot read: a directory" "a .jsonl that is a directory" "${args[@]}" "$out/jdir"
  refused $s "fifo/status.tsv: cannot read: not a regular file" "status.tsv a FIFO" "${args[@]}" "$out/fifo"
done
refused report "jdir/extra.jsonl: cannot read" "a .jsonl that is a directory, two runs --html" \
  "$run" "$out/jdir" --html "$out/j.html"

# A number Python will not convert (over 4300 digits) is a line that is not JSON, not a traceback.
python3 -c 'print("{\"schema_version\": 2, \"benchmark\": " + "1" * 5000 + "}")' >"$out/big.jsonl"
refused compare "big.jsonl:1: not valid JSON" "an integer of 5000 digits" "$out/big.jsonl" "$out/big.jsonl"
mkdir -p "$out/bigrun" && cp "$out/big.jsonl" "$out/bigrun/b.jsonl"
"$top/scripts/report" "$out/bigrun" >"$out/log" 2>"$out/err"
rc=$?
[ $rc = 2 ] && grep -q "b.jsonl:1: not valid JSON" "$out/err" && ! grep -q Traceback "$out/err"
ok $? "report an integer of 5000 digits: the line named as not JSON, exit 2 (rc=$rc)"

# Schema versions: an unknown one refused by name (rows and manifest); 1 against 2 said.
row() { # row VERSION VARIANT VALUE
  printf '{"schema_version":%s,"run_id":"r","benchmark":"b","variant":"%s","backend":"cpu","collective":"ring","dtype":"f32","ranks":2,"params":{"bytes":1024},"iterations":{"timed":5,"warmup":1},"time":{"unit":"s","min":1,"median":1,"mean":1,"max":1,"p95":1,"cv":0.01,"samples":[1,1,1,1,1],"samples_kind":"all"},"metrics":{"busbw":{"value":%s,"unit":"GB/s"}},"headline":"busbw","gate":null,"check":{"status":"pass","error":0,"message":null},"counters":{}}\n' "$1" "$2" "$3"
}
row 1 s 10 >"$out/v1.jsonl"
row 2 s 10 >"$out/v2.jsonl"
row 99 s 10 >"$out/v99.jsonl"
refused compare "v99.jsonl:1: schema_version 99: this reader knows versions 1 and 2" "rows of schema 99" "$out/v1.jsonl" "$out/v99.jsonl"
mkdir -p "$out/rep99" && cp "$out/v99.jsonl" "$out/rep99/b.jsonl" && cp "$run/manifest.json" "$out/rep99/"
refused report "b.jsonl:1: schema_version 99: this reader knows versions 1 and 2" "rows of schema 99" "$out/rep99"
copy m99 && edit_manifest m99 'm["schema_version"] = 99'
refused compare "m99/manifest.json: schema_version 99: this reader knows versions 1 and 2" "a manifest of schema 99" "$run" "$out/m99"
refused report "m99/manifest.json: schema_version 99" "a manifest of schema 99" "$out/m99"
"$top/scripts/compare" --absolute yes "$out/v1.jsonl" "$out/v2.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "the schemas differ: the baseline's rows are version 1, the new run's 2" "$out/log"
ok $? "compare schema 1 against 2: says the schemas differ (rc=$rc)"

# What is really wrong, not "a schema 1 baseline?".
row 2 s NaN >"$out/nan.jsonl"
row 2 s Infinity >"$out/inf.jsonl"
refused compare "b/s f32 ring np=2.*the baseline's busbw is nan, not a finite number" "a NaN baseline" "$out/nan.jsonl" "$out/v2.jsonl"
refused compare "the baseline's busbw is inf" "an infinite baseline" --absolute yes "$out/inf.jsonl" "$out/v2.jsonl"
refused compare "--metric nosuch: no matched row has a metric of that name; they have busbw" "--metric nosuch" \
  --metric nosuch "$out/v2.jsonl" "$out/v2.jsonl"
! grep -q "schema 1" "$out/err"
ok $? "... and none of them blames a schema 1 baseline"

# Gate options that are not finite numbers.
for opt in "--noise-k nan" "--noise-k inf" "--noise-k -1" "--drift-k nan" "--min-effect nan" "--alpha inf"; do
  refused compare "${opt%% *}: expected a finite number\|${opt%% *}: expected a fraction\|${opt%% *}: expected a probability" \
    "$opt" $opt --absolute yes "$out/v2.jsonl" "$out/v2.jsonl"
done

# report: headlines that are NaN or Infinity are not "every check passed".
mkdir -p "$out/nf" && cp "$run/manifest.json" "$out/nf/"
{ row 2 a NaN; row 2 b Infinity; } >"$out/nf/b.jsonl"
"$top/scripts/report" "$out/nf" >"$out/log" 2>"$out/err"
rc=$?
[ $rc = 1 ] && ! grep -q "every check passed" "$out/log" && grep -q "verdict: FAILED" "$out/log" \
  && grep -q "b a f32 ring: 1 of 1 row(s) have a headline that is not a finite number (busbw nan)" "$out/err" \
  && grep -q "b b f32 ring: 1 of 1 row(s) have a headline that is not a finite number (busbw inf)" "$out/err"
ok $? "report: NaN and Infinity headlines are named as not finite, verdict FAILED, exit 1 (rc=$rc)"
[ $rc = 1 ] || diag "$(cat "$out/log" "$out/err")"

# report on a directory that holds no run, or that cannot be read: a usage error (exit 2, one
# line), not a failed run (exit 1).
mkdir -p "$out/empty"
refused report "empty: not a results directory" "an empty directory" "$out/empty"
refused report "empty: not a results directory" "an empty directory --html" "$out/empty" --html "$out/e.html"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  mkdir -p "$out/unread" && chmod 000 "$out/unread" && chmod a+rx "$out"
  setpriv --reuid=65534 --regid=65534 --clear-groups "$top/scripts/report" "$out/unread" >"$out/log" 2>"$out/err"
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/err")" = 1 ] && grep -q "unread: cannot read the results directory" "$out/err"
  ok $? "report on an unreadable directory (as nobody): exit 2, one line (rc=$rc: $(cat "$out/err"))"
else
  echo "ok $((tap_n += 1)) # SKIP report on an unreadable directory: needs root and setpriv to drop to another user"
fi

done_testing
