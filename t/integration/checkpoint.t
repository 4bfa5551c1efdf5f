#!/bin/bash
# checkpoint: every variant's gradients and weights equal store-all's bit for bit (the program's
# own check, which fails the row); the measured peak of activation bytes equals the model to the
# byte and, on a model of one width, the closed form ceil(N/k) + 2k tensors (2N + 1 for
# store-all); recomputed FLOPs equal every layer outside the last segment; N = 1, N prime,
# k = 1 and k = N; several ranks; the budget plan fits and is the least recomputation that
# does; a budget no plan fits and bad inputs exit 2. Every variant in f32, f16 and bf16: the same
# checks in each, and in 16 bits every activation figure exactly half f32's.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction calibrates GEMMs and alpha-beta for every row (seconds under the
# sanitizers): off here, but for the one run at the end that tests it.
export SL_NO_PREDICT=1
prog="$top/bin/checkpoint"
[ -x "$prog" ] || { echo "1..0 # SKIP $prog not built"; exit 0; }
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
# One width everywhere, so that every activation is one tensor T = batch x width x 4 bytes (2 in
# f16 and bf16: the rows' tensor counts are the same in every dtype).
uniform="--width 16 --inputs 16 --outputs 16 --batch 4 -n 2 -w 1 --baseline 0"

# rows_exact FILE N: every row passes; peak == model exactly; uniform models: the closed form.
rows_exact() {
  python3 - "$@" <<'PY'
import json, math, sys
path, N, uniform = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
rows = [json.loads(l) for l in open(path)]
bad = []
for r in rows:
    v, p, m = r["variant"], r["params"], {k: x["value"] for k, x in r["metrics"].items()}
    tag = f"{v} k={p['k']}"
    if r["check"]["status"] != "pass": bad.append(f"{tag}: {r['check']}")
    if m["activ_peak"] != m["activ_model"]: bad.append(f"{tag}: peak {m['activ_peak']} != model {m['activ_model']}")
    if m["recompute_flops"] != m["recompute_flops_model"]: bad.append(f"{tag}: recomputed FLOPs {m['recompute_flops']} != model")
    if uniform and v != "budget":
        k, S = p["k"], p["segments"]
        if S != math.ceil(N / k): bad.append(f"{tag}: {S} segments")
        want = 2 * N + 1 if S == 1 else S + 2 * k
        if m["activ_peak_tensors"] != want: bad.append(f"{tag}: {m['activ_peak_tensors']} T, closed form {want}")
        last = N - k * (S - 1)
        T = r["params"]["rank_batch"] * r["params"]["width"]
        if m["recompute_flops"] != 2.0 * T * r["params"]["width"] * (N - last):
            bad.append(f"{tag}: recomputed {m['recompute_flops']} FLOPs, not the {N - last} layers below the last segment")
    if v == "budget" and m["activ_peak"] > p["budget"]: bad.append(f"budget: peak {m['activ_peak']} > {p['budget']}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

run() { # run NAME NP ARGS...: runs, then checks the rows
  local name="$1" np="$2"; shift 2
  launch "$np" checkpoint "$@" -o "$out/$name" >"$out/$name.txt" 2>&1
  local rc=$?
  [ $rc = 0 ] || tail -5 "$out/$name.txt" | sed 's/^/#   /' >&2
  return $rc
}

# N = 1, 2, 7 (prime), 12 and 13 (prime) with every k: k = 1 and k = N among them.
for N in 1 2 7 12 13; do
  ks=$(seq -s, 1 "$N")
  # shellcheck disable=SC2086
  run "n$N" 1 --layers "$N" $uniform --segments "$ks"
  ok $? "--layers $N --segments 1..$N: every variant equals store-all bit for bit"
  rows_exact "$out/n$N/checkpoint.jsonl" "$N" 1
  ok $? "--layers $N: measured peak == model to the byte == ceil(N/k) + 2k tensors (2N+1 at k=N); recompute == layers below the last segment"
done

# Widths that differ (inputs 6, outputs 3): the model still holds to the byte.
run mixed 1 --layers 9 --width 12 --inputs 6 --outputs 3 --batch 5 --segments sweep -n 2 -w 1 --baseline 0
ok $? "--layers 9 with inputs 6, width 12, outputs 3, --segments sweep: every row passes"
rows_exact "$out/mixed/checkpoint.jsonl" 9 0
ok $? "widths that differ: measured peak == model to the byte in every row"

# Several ranks (data-parallel replicas, uneven strong split), two collectives, AdamW, in every
# dtype (16 bits: gradients all-reduced in 16 bits, the loss scaler, the f32 master).
run np3 3 --layers 7 --width 16 --inputs 16 --outputs 16 -n 2 -w 1 --baseline 0 --scaling strong --batch 7 --segments 2,3 -C mpi,ring --optim adamw -d f32,f16,bf16
ok $? "3 ranks, strong batch 7 (3/2/2 rows), -C mpi,ring, adamw, -d f32,f16,bf16: every variant equals store-all in its dtype, and serial training within the dtype's tolerance"
rows_exact "$out/np3/checkpoint.jsonl" 7 0
ok $? "3 ranks, every dtype: measured peak == model on the busiest rank"

# Every variant x {f32, f16, bf16} x {mpi, ring} on 2 ranks, k = 1, 3 and 7 (= N: store-all's plan).
# shellcheck disable=SC2086
run dtypes 2 --layers 7 $uniform --segments 1,3,7 -C mpi,ring -d f32,f16,bf16
ok $? "-d f32,f16,bf16 -C mpi,ring on 2 ranks: every variant equals store-all bit for bit in its dtype"
rows_exact "$out/dtypes/checkpoint.jsonl" 7 1
ok $? "every dtype: measured peak == model == ceil(N/k) + 2k tensors"
python3 - "$out/dtypes/checkpoint.jsonl" "$out/np3/checkpoint.jsonl" <<'PY'
import json, sys
bad = []
for path in sys.argv[1:]:
    rows = {}
    for r in map(json.loads, open(path)):
        rows.setdefault((r["variant"], r["params"]["k"], r["collective"]), {})[r["dtype"]] = r
    for key, by in rows.items():
        if sorted(by) != ["bf16", "f16", "f32"]: bad.append(f"{key}: dtypes {sorted(by)}"); continue
        for name in ("activ_peak", "activ_model", "activ_store_all"):
            f32 = by["f32"]["metrics"][name]["value"]
            for d in ("f16", "bf16"):
                if 2 * by[d]["metrics"][name]["value"] != f32:
                    bad.append(f"{key} {d}: {name} {by[d]['metrics'][name]['value']}, f32 {f32}")
        for d in ("f16", "bf16"):
            if by[d]["params"]["plan"] != by["f32"]["params"]["plan"]: bad.append(f"{key} {d}: plan differs")
            if by[d]["metrics"]["recompute_flops"] != by["f32"]["metrics"]["recompute_flops"]: bad.append(f"{key} {d}: recomputed FLOPs differ")
    print(f"# {path.split('/')[-2]}: {len(rows)} variant x collective rows in each dtype", file=sys.stderr)
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "f16 and bf16: activation peak, model and store-all bytes exactly half f32's, same plans, same recomputed FLOPs"

# The sqrt(N) point and the sweep's minimum on 64 layers.
run sweep 1 --layers 64 $uniform --segments sweep
ok $? "--layers 64 --segments sweep passes"
rows_exact "$out/sweep/checkpoint.jsonl" 64 1
ok $? "--layers 64: every row's peak == model == closed form"
python3 - "$out/sweep/checkpoint.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ek = {r["params"]["k"]: r["metrics"] for r in rows if r["variant"] == "every_k"}
t = {k: m["activ_peak_tensors"]["value"] for k, m in ek.items()}
best = min(t.values())
argmin = sorted(k for k, v in t.items() if v == best)
frac8 = ek[8]["activ_frac"]["value"]
ok = argmin == [5, 6] and best == 23 and all(t[k] <= best + 1 for k in (4, 7, 8)) \
    and abs(frac8 - 24 / 129) < 1e-12 and frac8 <= 2 * 8 / 64
print(f"# minimum {best} T at k = {argmin}; k = 8: {t[8]} T, {frac8:.4f} of store-all", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "64 layers: the memory curve's minimum (23 T) at k = 5, 6 = sqrt(N/2); k = 4..8 within 1 T; k = 8 holds 24/129 of store-all (<= 2 sqrt(N)/N)"

# Default k is ceil(sqrt(N)); the budget plan: the least recomputation whose model fits.
T=$((4 * 16 * 4))
run budget 1 --layers 16 $uniform --budget $((20 * T))
ok $? "--layers 16 --budget 20 T passes"
python3 - "$out/budget/checkpoint.jsonl" $((20 * T)) <<'PY'
import json, math, sys
rows = {r["variant"]: r for r in map(json.loads, open(sys.argv[1]))}
N, budget = 16, int(sys.argv[2])
def peak(k):
    S = math.ceil(N / k)
    return 2 * N + 1 if S == 1 else S + 2 * k
def recompute(k):
    S = math.ceil(N / k)
    return N - (N - k * (S - 1))
fits = [k for k in range(1, N + 1) if peak(k) * 64 * 4 <= budget]
best = min(fits, key=lambda k: (recompute(k), peak(k)))
b, e = rows["budget"], rows["every_k"]
ok = e["params"]["k"] == 4 and b["params"]["k"] == best == 8 and b["metrics"]["activ_peak"]["value"] <= budget
print(f"# budget 20 T: expected k = {best} (peak {peak(best)} T, recomputes {recompute(best)} layers); got k = {b['params']['k']}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "default every_k k = ceil(sqrt(16)) = 4; --budget 20 T picks k = 8 (18 T, 8 layers recomputed), not k = 9 (20 T, 9 layers)"
# shellcheck disable=SC2086
run roomy 1 --layers 16 $uniform --variants budget --budget 1G
python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).readline())
sys.exit(0 if r['params']['segments'] == 1 and r['metrics']['recompute_flops']['value'] == 0 else 1)" "$out/roomy/checkpoint.jsonl"
ok $? "--budget 1G (room for everything): the budget plan is store-all, nothing recomputed"
# In 16 bits the budget holds twice the tensors: 20 f32 T is 40 T of 2 bytes, room for store-all (33 T).
# shellcheck disable=SC2086
run budget16 1 --layers 16 $uniform --variants budget --budget $((20 * T)) -d f16
python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).readline())
sys.exit(0 if r['dtype'] == 'f16' and r['params']['segments'] == 1 and r['metrics']['activ_peak_tensors']['value'] == 33 else 1)" "$out/budget16/checkpoint.jsonl"
ok $? "-d f16 --budget 20 f32 T: plans for 2-byte elements (store-all, 33 T, fits)"

# The check itself: with one recomputed element spoilt, every_k must fail (exit 1), store_all pass.
SL_TEST_CORRUPT=1 checkpoint --layers 7 $uniform --variants store_all,every_k --segments 2 -d f32,f16,bf16 \
  -o "$out/corrupt" >"$out/corrupt.txt" 2>&1
rc=$?
python3 - "$out/corrupt/checkpoint.jsonl" <<'PY'
import json, sys
st = {(r["variant"], r["dtype"]): r["check"] for r in map(json.loads, open(sys.argv[1]))}
ok = all(st[("store_all", d)]["status"] == "pass" and st[("every_k", d)]["status"] == "fail"
         and "differ from store-all" in st[("every_k", d)]["message"] for d in ("f32", "f16", "bf16"))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] && [ $rc = 1 ]
ok $? "SL_TEST_CORRUPT=1 (one recomputed z off by 1), f32, f16, bf16: every_k fails naming store-all, store_all passes, exit 1 (rc=$rc)"

expect_usage() { # expect_usage NAME ARGS...
  local want="$1"; shift
  checkpoint "$@" -o "$out/bad" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr" && [ "$(wc -l <"$out/stderr")" = 1 ]
  ok $? "checkpoint $* -> exit 2, one line naming $want (rc=$rc)"
}
# 16 layers: the least any plan needs is 12 T (k = 2, 3, 4: 8 + 4, 6 + 6, 4 + 8)
expect_usage "--budget" --layers 16 $uniform --budget 100
least=$(grep -o 'least any needs is [0-9]*' "$out/stderr" | grep -o '[0-9]*$')
python3 - "$least" $T <<'PY'
import math, sys
least, T, N = int(sys.argv[1]), int(sys.argv[2]), 16
want = min((2 * N + 1 if math.ceil(N / k) == 1 else math.ceil(N / k) + 2 * k) for k in range(1, N + 1)) * T
sys.exit(0 if least == want else 1)
PY
ok $? "--budget too small: the message gives the least any plan needs, min over k of the model ($least bytes)"
expect_usage "--budget" --layers 16 $uniform --budget 0
expect_usage "--budget" --budget -5
expect_usage "--budget" --budget 1X
expect_usage "--segments" --layers 8 --segments 0
expect_usage "--segments" --layers 8 --segments 9
expect_usage "--segments" --segments abc
expect_usage "--segments" --segments 2,2
expect_usage "--segments" --segments 2,
expect_usage "--segments" --segments ""
expect_usage "--segments: expected K\[,K...\] or sweep, not both" --segments sweep,2
expect_usage "--segments applies to every_k" --layers 8 $uniform --variants store_all --segments 2
expect_usage "--budget applies to budget" --layers 8 $uniform --variants store_all --budget 1M
expect_usage "--variants" --variants every_x
expect_usage "--layers" --layers 0
[ ! -e "$out/bad" ]
ok $? "usage errors leave no results directory behind"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  # shellcheck disable=SC2086
  run cuda 1 -B cuda --layers 7 $uniform --segments 1,3,7
  ok $? "-B cuda: every variant equals store-all bit for bit"
  rows_exact "$out/cuda/checkpoint.jsonl" 7 1
  ok $? "-B cuda: device activation bytes measured == model == closed form"
else
  echo "ok $((tap_n + 1)) # SKIP no CUDA device"; tap_n=$((tap_n + 1))
fi

# The step predicted from the run's primitives (perf_model.h): each plan's row carries it, and
# every_k's predicted GEMMs exceed store_all's (its recomputed forward GEMMs are counted again)
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$prog" $uniform --layers 4 --variants store_all,every_k --segments 2 -o "$out/pred" >"$out/pred.txt" 2>&1
ok $? "prediction: checkpoint exits 0"
python3 "$top/t/lib/train_rows.py" pred "$out/pred/checkpoint.jsonl" store_all=allreduce every_k=allreduce
ok $? "prediction: every row carries the predicted step and its arithmetic"
python3 -c 'import json,sys; g={json.loads(l)["variant"]: json.loads(l)["metrics"]["pred_gemm"]["value"] for l in open(sys.argv[1])}; sys.exit(0 if g["every_k"] > g["store_all"] else 1)' "$out/pred/checkpoint.jsonl"
ok $? "prediction: every_k's predicted GEMMs exceed store_all's (recomputation)"

done_testing
