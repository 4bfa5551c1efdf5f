#!/bin/bash
# train.t — the training layer, through a small technique (build/t/test_train) on 1-3 ranks:
# correct variants pass their check and carry the common row; a step that is deliberately
# wrong (samples off by one) and replicas that drift apart by one ulp must each fail it (exit 1);
# the shared training options are parsed once, with their usage errors.
. "$(dirname "$0")/../lib/common.sh"
prog="$top/build/t/test_train"
[ -x "$prog" ] || { echo "1..0 # SKIP $prog not built"; exit 0; }
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

rows() { # rows FILE NP STATUS VARIANTS...: every row has STATUS and the common fields
  python3 - "$@" <<'PY'
import json, sys
path, np, status, want = sys.argv[1], int(sys.argv[2]), sys.argv[3], set(sys.argv[4:])
rows = [json.loads(l) for l in open(path)]
bad = []
if {r["variant"] for r in rows} != want: bad.append(f"variants {sorted({r['variant'] for r in rows})}")
for r in rows:
    m, v = r["metrics"], r["variant"]
    if r["check"]["status"] != status: bad.append(f"{v}/{r['collective']}: {r['check']}")
    if r["ranks"] != np: bad.append(f"ranks {r['ranks']}")
    for k in ("samples_per_s", "data", "compute", "comm", "mem_params", "mem_grads", "mem_optim",
              "mem_activ", "mem_peak", "bytes_model", "weight_rel_err", "tflops"):
        if m.get(k, {}).get("value") is None: bad.append(f"{v}: {k} missing")
    for k in ("bubble", "transfer", "recompute"):  # never recorded: absent, not zero
        if k in m: bad.append(f"{v}: unrecorded phase {k} in the row")
    if m["mem_params"]["value"] != r["params"]["params"] * 4: bad.append(f"{v}: mem_params")
    if r["collective"] == "ring" and np > 1:
        sent, model = m["bytes_sent"]["value"], m["bytes_model"]["value"]
        if sent is None or abs(sent - model) > 0.01 * model: bad.append(f"{v}: ring sent {sent} vs {model}")
    if v == "sharded":  # the before-hook ran for every layer, forward and backward, every step
        steps = r["iterations"]["timed"] + r["iterations"]["warmup"]
        if m["hook_calls"]["value"] != 2 * r["params"]["layers"] * steps: bad.append(f"hook calls {m['hook_calls']}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

for np in 1 2 3; do
  launch $np "$prog" -C mpi,ring -o "$out/ok$np" >"$out/ok$np.txt" 2>&1
  ok $? "$np rank(s): replicated and sharded (gathered) techniques pass the driver's check"
  rows "$out/ok$np/test_train.jsonl" $np pass replicated sharded
  ok $? "$np rank(s): rows carry phases, memory by category, bytes, errors; no unrecorded phase"
  launch $np "$prog" --variants offbyone -o "$out/wrong$np" >"$out/wrong$np.txt" 2>&1
  rc=$?
  [ $rc = 1 ] && grep -q "CHECK FAILED: offbyone: weights differ from the serial reference" "$out/wrong$np.txt"
  ok $? "$np rank(s): a step trained on the wrong samples fails its check (rc=$rc)"
done
launch 3 "$prog" --variants drift -o "$out/drift" >"$out/drift.txt" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "1 elements differ between replicas" "$out/drift.txt"
ok $? "3 ranks: one weight one ulp off on one replica fails the replica check (rc=$rc)"
launch 2 "$prog" --scaling strong --batch 7 -o "$out/strong" >"$out/strong.txt" 2>&1
ok $? "strong scaling with an uneven split (4+3) passes"
launch 2 "$prog" --optim adamw -o "$out/adamw" >/dev/null 2>&1
ok $? "AdamW through the driver passes (L2 tolerance)"

"$prog" --help >"$out/help.txt"
grep -q "^training" "$out/help.txt" && grep -q -- "--width *hidden width (default 24)" "$out/help.txt" \
  && grep -q "^test_train options" "$out/help.txt"
ok $? "--help lists the training group with the technique's own defaults, then its options"

expect_usage() { # expect_usage NP NAME ARGS...
  local np="$1" want="$2"; shift 2
  launch "$np" "$prog" "$@" -o "$out/bad" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr" && [ "$(wc -l <"$out/stderr")" -ge 1 ]
  ok $? "$* on $np ranks -> exit 2 naming $want (rc=$rc)"
}
expect_usage 1 --lr --lr 0
expect_usage 3 --batch --scaling strong --batch 2
expect_usage 1 --optim --optim lamb
expect_usage 1 --layers --layers 0
expect_usage 1 --variants --variants nothing
[ ! -e "$out/bad" ]
ok $? "usage errors leave no results directory behind"

done_testing
