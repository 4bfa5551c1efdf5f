#!/bin/bash
# halo_conv: on 1-4 ranks, 1xp, px1 and 2x2 grids (the squarest by default), F = 1, 3, 5, 7, dilation 2 and tiles of
# uneven sizes (a 13x11 image), every variant passes its check: one pass's output, dx and dW
# and the weights after training equal the serial stack's. Each rank's halo bytes per layer, as
# the communication layer counted them, equal the model recomputed here (faces r W_tile C N 4,
# corners r^2 C N 4, for the neighbours that exist); memory by category equals the model; with
# -C ring (where the all-reduce splits dW evenly), bytes per step equal the model. On the default
# model where a hidden unit's ReLU falls the other way than the serial stack's (-n 15 blocking,
# -n 20 overlap, with OpenBLAS's AVX2 kernel), the check still passes. In f16 and bf16 (-d) every
# variant passes the same checks within the dtype's tolerance, with exactly half of f32's halo
# bytes and bytes per step. Tiles thinner than the halo, a dtype other than f32/f16/bf16, and
# other bad options, are exit 2 naming the option.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
small="--image 13x11 --channels 3 --batch 4 --conv-layers 3 -n 2 -w 1 --baseline 0"

rows_exact() { # rows_exact FILE NP PX PY F DIL VARIANTS: checks, bytes and memory against the model
  python3 - "$@" <<'PY'
import json, sys
path, P, px, py, F, dil = sys.argv[1], *map(int, sys.argv[2:7])
want_variants = sys.argv[7].split(",")
N, C, H, W, L = 4, 3, 13, 11, 3
r = (F - 1) // 2 * dil
def split(n, parts, p):
    base, extra = divmod(n, parts)
    lo = p * base + min(p, extra)
    return lo, lo + base + (p < extra)
def model(q, px, py):  # bytes rank q sends per exchange
    ix, iy = q % px, q // px
    ht = split(H, py, iy)[1] - split(H, py, iy)[0]
    wt = split(W, px, ix)[1] - split(W, px, ix)[0]
    b = 0
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            if (dy, dx) == (0, 0) or not (0 <= ix + dx < px and 0 <= iy + dy < py) or r == 0: continue
            b += (r * r if dy and dx else r * wt if dy else ht * r) * C * N * 4
    return b
rows = [json.loads(l) for l in open(path)]
bad = []
if sorted(r_["variant"] for r_ in rows) != sorted(want_variants): bad.append(f"variants {[r_['variant'] for r_ in rows]}")
for row in rows:
    v, m = row["variant"], {k: x["value"] for k, x in row["metrics"].items()}
    if row["check"]["status"] != "pass": bad.append(f"{v}: {row['check']}")
    gx, gy = (px, py) if v != "data" and P > 1 else (1, 1)
    if row["params"]["grid"] != f"{gx}x{gy}": bad.append(f"{v}: grid {row['params']['grid']}")
    per_rank = [model(q, gx, gy) for q in range(gx * gy)]
    if not (m["halo_model"] == m["halo_bytes"] == max(per_rank)):
        bad.append(f"{v}: busiest rank's halo {m['halo_bytes']} model {m['halo_model']} here {max(per_rank)}")
    if not (m["halo_model_all_ranks"] == m["halo_bytes_all_ranks"] == sum(per_rank)):
        bad.append(f"{v}: all ranks' halo {m['halo_bytes_all_ranks']} model {m['halo_model_all_ranks']} here {sum(per_rank)}")
    for k in ("params", "grads", "optim", "activ"):
        if m["mem_" + k] != m["model_" + k]: bad.append(f"{v}: mem_{k} {m['mem_' + k]} model {m['model_' + k]}")
    if m["mem_params"] != 4 * L * C * C * F * F: bad.append(f"{v}: {m['mem_params']} bytes of weights")
    if row["collective"] == "ring" and P > 1:
        psi = 4 * L * C * C * F * F
        want = max(per_rank) * (2 * L - 1) + 2 * (P - 1) / P * psi
        if m["bytes_sent"] != want or m["bytes_model"] != want: bad.append(f"{v}: ring sent {m['bytes_sent']} model {m['bytes_model']} here {want}")
    for k in ("compute", "halo_comm", "halo_exposed", "allreduce", "weight_rel_err"):
        if m.get(k) is None: bad.append(f"{v}: {k} missing")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

run() { # run NP GRID F DIL VARIANTS [ARGS...]; GRID "default:PXxPY" gives no --grid and expects PXxPY
  local np=$1 grid=$2 f=$3 dil=$4 variants=$5; shift 5
  local gridopt=(--grid "$grid")
  case $grid in default:*) grid=${grid#default:}; gridopt=() ;; esac
  local tag="np${np}_${grid}_f${f}_d${dil}"
  # shellcheck disable=SC2086
  launch "$np" halo_conv $small "${gridopt[@]}" --filter "$f" --dilation "$dil" "$@" -o "$out/$tag" >"$out/$tag.txt" 2>&1
  local rc=$?
  ok $rc "halo_conv -np $np ${gridopt[*]:-(default grid $grid)} --filter $f --dilation $dil $*: $variants pass (output, dx, dW, weights)"
  [ $rc = 0 ] || tail -8 "$out/$tag.txt" | sed 's/^/#   /' >&2
  rows_exact "$out/$tag/halo_conv.jsonl" "$np" "${grid%x*}" "${grid#*x}" "$f" "$dil" "$variants"
  ok $? "np=$np $grid F=$f dilation $dil: halo bytes per rank == faces + corners model; memory == model"
  n=$(grep -c "one pass with the trained weights against the serial stack" "$out/$tag.txt")
  [ "$n" = "$(echo "$variants" | tr ',' '\n' | wc -l)" ]
  ok $? "np=$np $grid: every variant compared one pass's output, dx and dW with the serial stack"
}

run 1 1x1 3 1 blocking,overlap,data
run 2 default:1x2 3 1 blocking,overlap,data
run 2 2x1 5 1 blocking,overlap,data
run 3 1x3 3 2 blocking,overlap -C ring --variants blocking,overlap
run 3 3x1 1 1 blocking,overlap,data
run 4 default:2x2 5 1 blocking,overlap,data
run 4 2x2 7 1 blocking,overlap --variants blocking,overlap
run 4 1x4 3 1 overlap --variants overlap
run 4 4x1 3 2 blocking --variants blocking --optim adamw

# A trained stack has hidden units whose pre-activation lies within rounding of 0: two correct
# computations that order their sums differently (a tile's GEMMs against the whole image's)
# may put such a unit on either side of it, and dL/dx then differs over its receptive field by
# its whole gradient (0.017 relative), which the check once took for a defect. OpenBLAS's AVX2
# (Haswell) kernel does so for the default model at these step counts, one unit each — in
# blocking as well as overlap, so not a race of the overlapped exchange: the check
# must pass, the backward being compared given the pass's own activations, and its note must
# count that unit (where this machine's BLAS puts no unit across 0, that part is skipped).
grep -qw avx2 /proc/cpuinfo 2>/dev/null && export OPENBLAS_CORETYPE=Haswell
# (--grid 1x4 -n 20 --variants overlap is another such case, left out for time.)
for case in "-n 15 --variants blocking" "-n 20 --variants overlap"; do
  tag=relu_$(echo "$case" | tr -dc 'a-z0-9')
  # shellcheck disable=SC2086
  launch 4 halo_conv $case --baseline 0 -o "$out/$tag" >"$out/$tag.txt" 2>&1
  rc=$?
  ok $rc "halo_conv -np 4 $case (default model): the check passes (rc=$rc)"
  [ $rc = 0 ] || tail -4 "$out/$tag.txt" | sed 's/^/#   /' >&2
  flipped=$(grep -o 'of which [0-9]* of' "$out/$tag.txt" | grep -o '[0-9]*' | head -1)
  if [ "${flipped:-0}" -gt 0 ]; then
    ok 0 "$case: $flipped hidden unit(s) on the other side of 0 than the serial stack's, and still a pass"
  else
    echo "ok $((tap_n += 1)) # SKIP $case: this BLAS put no hidden unit across 0 (${flipped:-no} count)"
  fi
done
unset OPENBLAS_CORETYPE

# 16 bits (-d f16,bf16) through the same code as f32, on a 2x2 grid (faces and corners) with
# -C ring: every variant passes its checks (the weights against the serial stack trained in the
# dtype, one pass's output, dx and dW within the dtype's stated tolerance); the halo bytes per
# layer the communication layer counted are exactly half of f32's (busiest rank and all ranks)
# and equal the model with 2-byte elements; the bytes per step (halos and the ring all-reduce
# of dW in the dtype) are exactly half of f32's; memory equals the model (16-bit weights and
# gradients with their f32 master and unscaled twins).
tag=dtypes
# shellcheck disable=SC2086
launch 4 halo_conv $small --grid 2x2 -C ring -d f32,f16,bf16 -o "$out/$tag" >"$out/$tag.txt" 2>&1
rc=$?
ok $rc "halo_conv -np 4 --grid 2x2 -C ring -d f32,f16,bf16: every variant passes in every dtype (rc=$rc)"
[ $rc = 0 ] || tail -8 "$out/$tag.txt" | sed 's/^/#   /' >&2
python3 - "$out/$tag/halo_conv.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
L, C, F = 3, 3, 3
np_ = L * C * C * F * F
by = {(r["variant"], r["dtype"]): r for r in rows}
m = lambda r: {k: x["value"] for k, x in r["metrics"].items()}
bad = []
if sorted(by) != sorted((v, d) for v in ("blocking", "overlap", "data") for d in ("f32", "f16", "bf16")):
    bad.append(f"rows {sorted(by)}")
for (v, d), r in by.items():
    x = m(r)
    if r["check"]["status"] != "pass": bad.append(f"{v} {d}: {r['check']}")
    for k in ("params", "grads", "optim", "activ"):
        if x["mem_" + k] != x["model_" + k]: bad.append(f"{v} {d}: mem_{k} {x['mem_' + k]} model {x['model_' + k]}")
    want = 4 * np_ if d == "f32" else (2 + 4) * np_  # 16-bit weights and the f32 master
    if x["mem_params"] != want: bad.append(f"{v} {d}: mem_params {x['mem_params']}, want {want}")
    if x["halo_bytes"] != x["halo_model"]: bad.append(f"{v} {d}: halo {x['halo_bytes']} model {x['halo_model']}")
    if d == "f32": continue
    f = m(by[(v, "f32")])
    for k in ("halo_bytes", "halo_bytes_all_ranks", "bytes_sent"):
        if not (x[k] * 2 == f[k]): bad.append(f"{v} {d}: {k} {x[k]}, f32's {f[k]}: not half")
    if v != "data" and not x["halo_bytes"] > 0: bad.append(f"{v} {d}: no halo bytes")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "f16 and bf16: halo bytes per layer and bytes per step exactly half of f32's; memory == model"
for d in f16 bf16; do
  n=$(grep -c "^# [a-z]* $d: one pass with the trained weights against the serial stack" "$out/$tag.txt")
  [ "$n" = 3 ]
  ok $? "$d: every variant compared one pass's output, dx and dW with the serial stack in $d ($n)"
done

# The squarest grid by default (the runs above checked the rows' grid): 4 ranks are 2x2, 2
# ranks the row split 1x2; uneven tiles give the first blocks the extra row and column.
grep -q "grid 2x2, rank 0's tile 7x6" "$out/np4_2x2_f5_d1.txt"
ok $? "a 13x11 image on the default 2x2 grid: rank 0's tile is 7x6"

expect_usage() { # expect_usage NP NAME ARGS... (NP 0: one rank without a launcher)
  local np="$1" want="$2"; shift 2
  if [ "$np" = 0 ]; then halo_conv "$@" -o "$out/bad" >"$out/stdout" 2>"$out/stderr"; else
    launch "$np" halo_conv "$@" -o "$out/bad" >"$out/stdout" 2>"$out/stderr"; fi
  local rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr"
  ok $? "halo_conv $* on $np rank(s) -> exit 2 naming $want (rc=$rc)"
  [ $rc = 2 ] || sed 's/^/#   /' "$out/stderr" >&2
}
# 8 rows over 4 ranks are tiles of 2, thinner than a 7x7 filter's halo of 3
expect_usage 4 "--grid 1x4: the smallest tile" --image 8x8 --filter 7 --grid 1x4
# dilation 2 makes a 3x3 filter's halo 2 deep: 6 columns over 4 ranks leave tiles of 1
expect_usage 4 "--grid 4x1: the smallest tile" --image 16x6 --dilation 2 --grid 4x1
expect_usage 0 "--filter" --filter 4
expect_usage 0 "--dtype (-d): halo_conv accepts f32|f16|bf16" -d f64
expect_usage 2 "--grid 3x1: a grid of 3 ranks" --grid 3x1
expect_usage 0 "--grid: expected PXxPY" --grid two
expect_usage 0 "--image" --image 0x5
expect_usage 0 "--image" --image 12
expect_usage 0 "--scaling" --scaling weak
expect_usage 0 "--layers/--width/--inputs/--outputs: halo_conv trains a convolution stack" --layers 3
expect_usage 2 "--batch 1: data parallelism" --variants data --batch 1
[ ! -e "$out/bad" ]
ok $? "usage errors leave no results directory behind"

done_testing
