#!/bin/bash
# results/schema.json and its one validator (scripts/gatelib/schema.py, run by scripts/validate,
# scripts/compare and scripts/report): the committed runs validate; schema.md's field tables are
# the schema's; a row missing a required field, with a field of the wrong type or an unknown
# collective is named as FILE:LINE: FIELD and exits 2 from validate, compare and report; a param,
# metric or field the schema does not name is accepted; python3-jsonschema missing is named.
# Needs no build; seconds. (The rows the programs write are validated where the tests run them:
# row_gate.t, run_all.t, mae_threads.t, kernels.t, allreduce.t, precision.t, vdnn.t, ...)
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
V=$top/scripts/validate
base=$top/results/baselines/xeon-2core-ci

python3 -c 'import json, sys, jsonschema; jsonschema.Draft202012Validator.check_schema(json.load(open(sys.argv[1])))' \
  "$top/results/schema.json"
ok $? "results/schema.json is a valid JSON Schema (draft 2020-12)"

"$V" md --check >"$out/log" 2>&1
ok $? "results/schema.md's field tables are those generated from results/schema.json"
[ $? = 0 ] || diag "$(cat "$out/log")"

# The committed runs: every program's rows, manifests and the trace of the report's run.
"$V" run "$base" "$top/t/data/report-run" >"$out/log" 2>&1 && "$V" trace "$top/t/data/report-run/pipeline.trace.json" >/dev/null
ok $? "the committed runs validate ($(grep -c 'valid rows' "$out/log") directories: $(awk '{n += $2} END {print n}' "$out/log") rows)"
[ $? = 0 ] || diag "$(cat "$out/log")"
for p in allreduce checkpoint ddp halo_conv kernels mae_threads megatron_mlp pipeline precision vdnn zero; do
  grep -q "\"program_$p\"" "$top/results/schema.json" && [ -s "$base/round-01/$p.jsonl" ] || { echo "# $p"; false; }
done
ok $? "schema.json lists the params and metrics of every program of the committed baseline"

# Mutations of one valid row (line 2 of each file; line 1 stays valid).
good=$out/good.jsonl
grep '"benchmark":"mae_threads"' "$base/round-01/mae_threads.jsonl" | grep '"variant":"partial"' | head -1 >"$good"
mutate() { # mutate NAME PYTHON-STATEMENT-ON-r: writes NAME.jsonl (the good row, then the mutated one)
  python3 -c "import json, sys; r = json.loads(open(sys.argv[1]).read()); g = json.dumps(r); $2
print(g); print(json.dumps(r))" "$good" >"$out/$1.jsonl"
}
mutate missing 'del r["run_id"]'
mutate wrongtype 'r["ranks"] = "2"'
mutate coll 'r["collective"] = "carrier-pigeon"'
mutate metric 'r["metrics"]["bw_fraction"]["value"] = "0.9"'
mutate unit 'r["metrics"]["bw_fraction"]["unit"] = "GB/s"'
mutate param 'r["params"]["threads"] = "two"'
mutate nogate 'del r["gate"]'
mutate samples 'r["time"]["samples"] = r["time"]["samples"][:-1]'
mutate open 'r["metrics"]["harness_overhead"] = {"value": 0.01, "unit": "fraction"}; r["params"]["expected"] = "x"; r["of_expected"] = {"a": 1}'
for c in direct torus shm hier p2p; do mutate "c_$c" "r[\"collective\"] = \"$c\""; done

"$V" rows "$good" "$out/open.jsonl" "$out"/c_*.jsonl >/dev/null 2>"$out/err"
ok $? "a new metric, param and top-level field are accepted; collectives direct, torus, shm, hier, p2p too"
[ $? = 0 ] || diag "$(cat "$out/err")"

# Each mutation named by scripts/validate (one run over them all: exit 2, every file:line: field).
"$V" rows "$out"/{missing,wrongtype,coll,metric,unit,param,nogate,samples}.jsonl >/dev/null 2>"$out/all"
rc=$?
named() { # named NAME FIELD-MESSAGE DESCRIPTION
  [ $rc = 2 ] && grep -q -- "$1.jsonl:2: $2" "$out/all" && ! grep -q "$1.jsonl:1:" "$out/all"
  ok $? "$3: validate exits 2 naming $1.jsonl:2: $2"
}
named missing "run_id: missing (a required field)" "a row without run_id"
named wrongtype 'ranks: "2" is a string, expected an integer' "ranks a string"
named coll 'collective: "carrier-pigeon" is not one of "mpi", "nccl", "ring"' "an unknown collective"
named metric 'metrics.bw_fraction.value: "0.9" is a string, expected a number or null' "a metric value a string"
named unit 'metrics.bw_fraction.unit: "GB/s", expected "ratio"' "a known metric in another unit"
named param 'params.threads: "two" is a string, expected a number' "a known numeric param a string"
named nogate "gate: missing (a required field)" "a version 2 row without gate"
named samples "time.samples: 9 numbers, expected min(iterations.timed = 10, 32)" "time.samples one short"
[ "$(wc -l <"$out/all")" = 8 ] || diag "$(cat "$out/all")"

# compare (against the good row: one line) and report (a run holding the file) on the same
# validator: exit 2 naming NAME.jsonl:2: FIELD, never a traceback.
refused() { # refused NAME FIELD-MESSAGE DESCRIPTION
  local want="$1.jsonl:2: not a results row (results/schema.json): $2" bad=0
  local in_run="dir/mae_threads.jsonl:2: not a results row (results/schema.json): $2"
  "$top/scripts/compare" "$good" "$out/$1.jsonl" >/dev/null 2>"$out/err"
  [ $? = 2 ] && [ "$(wc -l <"$out/err")" = 1 ] && grep -q -- "$want" "$out/err" || { bad=1; diag "compare: $(cat "$out/err")"; }
  rm -rf "$out/dir" && mkdir "$out/dir" && cp "$base/round-01/manifest.json" "$out/dir/" &&
    cp "$out/$1.jsonl" "$out/dir/mae_threads.jsonl"
  "$top/scripts/report" "$out/dir" >"$out/log" 2>"$out/err"
  [ $? = 2 ] && grep -q -- "$in_run" "$out/err" && grep -q "verdict: INVALID: 1 line" "$out/log" \
    || { bad=1; diag "report: $(cat "$out/err" "$out/log" | tail -3)"; }
  ! grep -q Traceback "$out/err" "$out/log" && [ $bad = 0 ]
  ok $? "$3: compare and report exit 2 naming the file, line 2 and $2"
}
refused missing "run_id: missing (a required field)" "a row without run_id"
refused wrongtype 'ranks: "2" is a string, expected an integer' "ranks a string"
refused coll 'collective: "carrier-pigeon" is not one of' "an unknown collective"

cp "$base/round-01/manifest.json" "$out/manifest.json"
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m["rank_binding"][0]["ncpus"] = "1"; json.dump(m, open(sys.argv[1], "w"))' \
  "$out/manifest.json"
"$V" manifest "$out/manifest.json" >/dev/null 2>"$out/err"
[ $? = 2 ] && grep -q 'manifest.json: rank_binding\[0\].ncpus: "1" is a string, expected an integer' "$out/err"
ok $? "a manifest field of the wrong type is named with its path, exit 2: $(cat "$out/err")"

# Without python3-jsonschema (python3 -S: no site packages): one line naming the package, exit 3.
python3 -S "$top/scripts/compare" "$good" "$good" >/dev/null 2>"$out/err"
rc=$?
[ $rc = 3 ] && [ "$(wc -l <"$out/err")" = 1 ] && grep -q "install python3-jsonschema" "$out/err"
ok $? "jsonschema missing: compare exits 3 naming python3-jsonschema (rc=$rc): $(cat "$out/err")"

done_testing
