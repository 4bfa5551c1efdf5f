#!/bin/bash
# precision --model gpt: the GPT trained on the training layer in fp32, fp16 and bf16 with no,
# static and dynamic loss scaling, with and without an f32 master copy. On one rank every run's
# weights equal serial training with its own scaler and master choice bit for bit (fp32: serial
# f32 training); on two ranks (data-parallel, -C mpi,ring) within the stated tolerances, replicas
# identical. The counts: bf16 and fp32 lose no weight gradient to underflow; fp16 without scaling
# does, the scalers do not; a static scale that overflows every step skips every step (exactly
# -n) and fails the loss bound; the dynamic scaler's state follows from its counts, step by step
# in precision.curve.tsv; updates lost without a master copy are counted; the counts the GPT
# cannot have are null, with the row saying why. Usage errors exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
shape="--model gpt --layers 1 --d-model 32 --heads 2 --seq 16 --vocab 32 --batch 4"

rows() { # rows FILE PYTHON-EXPRESSION-OVER-r (a dict: "variant/dtype/collective" -> row): exit 0 when it is true
  python3 - "$1" "$2" <<'PY'
import json, sys
r = {}
for l in open(sys.argv[1]):
    x = json.loads(l)
    x["m"] = {k: v["value"] for k, v in x["metrics"].items()}
    r["/".join((x["variant"], x["dtype"], x["collective"]))] = x
ok = eval("(" + sys.argv[2] + ")")
if not ok:
    for k, x in r.items():
        print("#  ", k, x["check"]["status"], x["check"].get("message"), {m: x["m"].get(m) for m in (
            "weight_rel_err", "weight_l2_err", "loss_vs_fp32", "wgrad_underflow_frac", "skipped_steps", "final_scale",
            "lost_updates_frac")}, file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# One rank: every precision, every scaler, both master choices.
launch 1 precision $shape -n 12 --master all -o "$out/one" >"$out/one.txt" 2>&1
rc=$?
ok $rc "one rank, fp32/fp16/bf16 x none/static/dynamic x master fp32/none: every check passes"
[ $rc = 0 ] || tail -20 "$out/one.txt" | sed 's/^/#   /' >&2
J="$out/one/precision.jsonl"
"$top/scripts/validate" rows "$J" --min-rows 13 >/dev/null
ok $? "13 rows (fp32, and 2 x 3 x 2 in 16 bits), each valid against the schema"
rows "$J" 'sorted(r) == sorted(["none/f32/mpi"] + [s + m + "/" + d + "/mpi" for s in ("none", "static", "dynamic") for m in ("", "/no-master") for d in ("f16", "bf16")]) and all(x["params"]["model"] == "gpt" for x in r.values())'
ok $? "the runs: fp32 once (no scaler, its own master), each 16-bit type with each scaler, with and without a master copy"
rows "$J" 'all(x["check"]["status"] == "pass" and x["m"]["weight_rel_err"] == 0 and x["m"]["weight_l2_err"] == 0 for x in r.values())'
ok $? "one rank: every run's weights equal serial training in its precision with its scaler and master choice, bit for bit (fp32: serial f32 training)"
rows "$J" 'r["none/f32/mpi"]["m"]["wgrad_underflow_frac"] == 0 and r["none/f32/mpi"]["m"]["nonfinite_max"] == 0 and all(x["m"]["nonfinite_max"] == 0 for x in r.values()) and all(x["m"]["wgrad_underflow_frac"] == 0 for k, x in r.items() if "/bf16/" in k) and r["none/f16/mpi"]["m"]["wgrad_underflow_frac"] > 0 and all(r[s + "/f16/mpi"]["m"]["wgrad_underflow_frac"] < r["none/f16/mpi"]["m"]["wgrad_underflow_frac"] for s in ("static", "dynamic"))'
ok $? "no inf/NaN gradient in any run; weight-gradient underflow: none in fp32 and bf16; some in fp16 without scaling, less with a static or dynamic scale"
rows "$J" 'all(x["m"]["underflow_frac"] is None and x["m"]["subnormal_frac"] is None and x["m"]["overflow_max"] is None and "uncounted" in x["params"]["counts_note"] for x in r.values())'
ok $? "the counts the GPT cannot have (activation gradients, rounded in its kernels) are null, and counts_note says why"
rows "$J" 'all((x["m"]["lost_updates_frac"] is None) == (x["params"]["master"] == "fp32") for x in r.values()) and r["none/no-master/bf16/mpi"]["m"]["lost_updates_frac"] > r["none/no-master/f16/mpi"]["m"]["lost_updates_frac"] > 0'
ok $? "updates lost without a master copy counted (bf16 loses more than fp16), null with one"
rows "$J" 'all(x["m"]["skipped_steps"] == 0 and x["m"]["final_scale"] == {"none": 1, "static": 1024, "dynamic": 65536}[k.split("/")[0]] for k, x in r.items() if "/f32/" not in k) and all(abs(x["m"]["loss_vs_fp32"] - 1) <= 0.25 for x in r.values())'
ok $? "no step skipped, each scale as set (1, 1024, 65536); every run ends within 0.25 of fp32's loss"
rows "$J" 'all(x["params"]["loss_check"].startswith("asserted") == (k.split("/")[0] != "none" and "no-master" not in k or "/bf16/" in k and "no-master" not in k) for k, x in r.items() if "/f32/" not in k)'
ok $? "the loss bound is asserted where the run should train as fp32 (bf16, or fp16 with a scaler, with a master copy), reported elsewhere"
python3 - "$out/one" <<'PY'
import json, sys
d = sys.argv[1]
lines = open(d + "/precision.curve.tsv").read().split("\n")
got = {}
for l in lines[1:-1]:
    v, s, loss, scale = l.split("\t")
    got.setdefault(v, []).append(int(s))
want = ["gpt/fp32/none"] + ["gpt/" + p + "/" + s + m for p in ("fp16", "bf16") for s in ("none", "static", "dynamic") for m in ("", "/no-master")]
ok = lines[0] == "variant\tstep\tloss\tscale" and sorted(got) == sorted(want) and all(v == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] for v in got.values())
if not ok:
    print("#   curve:", got, file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "precision.curve.tsv: each of the 13 runs (named gpt/PRECISION/SCALER[/no-master]) at every step (12 steps: a point every step)"

# Two ranks, data-parallel, two collectives: within the stated tolerances of the serial twin.
launch 2 precision $shape -n 6 --loss-scale none,dynamic -C mpi,ring -o "$out/two" >"$out/two.txt" 2>&1
rc=$?
ok $rc "two ranks, -C mpi,ring, fp32/fp16/bf16 x none/dynamic: every check passes"
[ $rc = 0 ] || tail -20 "$out/two.txt" | sed 's/^/#   /' >&2
rows "$out/two/precision.jsonl" 'len(r) == 10 and all(x["check"]["status"] == "pass" and x["params"]["global_batch"] == 8 and x["m"]["bytes_model"] > 0 for x in r.values()) and r["dynamic/f16/ring"]["params"]["overflow_flag_bytes"] == 4'
ok $? "... 10 rows (fp32, and 2 x 2 in 16 bits, per collective), global batch 8, the overflow flag agreed over the ranks"

# A static scale that overflows every step: every step skipped, exactly; the run does not train.
launch 1 precision $shape --precision fp16 --loss-scale static --scale 1073741824 -n 20 --lr 0.01 -o "$out/ovf" >"$out/ovf.txt" 2>&1
ok $([ $? = 1 ] && echo 0 || echo 1) "fp16, static scale 2^30: exit 1"
rows "$out/ovf/precision.jsonl" 'x["m"]["skipped_steps"] == 20 and x["m"]["overflow_seen"] == 20 and x["m"]["nonfinite_max"] > 0 and x["check"]["status"] == "fail" and "from fp32" in x["check"]["message"] and x["m"]["weight_rel_err"] == 0 and r["none/f32/mpi"]["check"]["status"] == "pass" if (x := r["static/f16/mpi"]) else False'
ok $? "... all 20 steps overflowed (inf/NaN gradients counted) and were skipped (as in its serial twin: weights equal), so its loss is outside fp32's bound"

# The dynamic scaler from 2^30: it backs off until the gradients fit, skipping a step each time,
# and grows after 5 clean steps; its final scale follows from its counts, and the curve shows it.
launch 1 precision $shape --precision fp16 --loss-scale dynamic --init-scale 1073741824 --growth-interval 5 -n 30 --curve-every 1 -o "$out/dyn" >"$out/dyn.txt" 2>&1
ok $? "fp16, dynamic from 2^30, growth every 5 clean steps: checks pass"
rows "$out/dyn/precision.jsonl" 'x["m"]["backoffs"] >= 1 and x["m"]["growths"] >= 1 and x["m"]["skipped_steps"] == x["m"]["backoffs"] and x["m"]["final_scale"] == 2.0**30 * 2.0**(x["m"]["growths"] - x["m"]["backoffs"]) if (x := r["dynamic/f16/mpi"]) else False'
ok $? "... skipped steps == backoffs, final scale = 2^30 x 2^(growths - backoffs)"
python3 - "$out/dyn" <<'PY'
import json, sys
d = sys.argv[1]
m = {k: v["value"] for x in map(json.loads, open(d + "/precision.jsonl")) if x["variant"] == "dynamic"
     for k, v in x["metrics"].items()}
sc = [float(l.split("\t")[3]) for l in open(d + "/precision.curve.tsv") if l.startswith("gpt/fp16/dynamic\t")]
falls = sum(b == a / 2 for a, b in zip(sc, sc[1:]))
rises = sum(b == a * 2 for a, b in zip(sc, sc[1:]))
ok = len(sc) == 30 and sc[0] == 2.0**30 and falls + rises == sum(a != b for a, b in zip(sc, sc[1:]))
# the last step's own change is in the row's counts, not in the curve's scales (which each step ran with)
ok = ok and falls <= m["backoffs"] <= falls + 1 and rises <= m["growths"] <= rises + 1
if not ok:
    print("#   scales:", sc, m.get("backoffs"), m.get("growths"), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "... precision.curve.tsv: the scale each of the 30 steps ran with, from 2^30, each change a halving or a doubling, as many as counted"

# A loss weighted 2^-20 (the MLP scenario's): in fp16 without scaling the loss's gradient underflows
# before any weight gradient is made (in the kernels: uncounted), so every weight gradient is 0.
launch 1 precision $shape --precision fp16 --loss-scale none,dynamic --loss-weight 9.5367431640625e-07 -n 6 -o "$out/lw" >"$out/lw.txt" 2>&1
ok $? "--loss-weight 2^-20, fp16 none and dynamic: checks pass"
rows "$out/lw/precision.jsonl" 'r["none/f16/mpi"]["m"]["wgrad_zero_frac"] == 1 and r["dynamic/f16/mpi"]["m"]["wgrad_zero_frac"] < 0.05 and r["dynamic/f16/mpi"]["m"]["wgrad_underflow_frac"] < 0.01 and r["none/f16/mpi"]["params"]["loss_check"].startswith("not asserted")'
ok $? "... fp16 without scaling: every weight gradient of every step is zero; dynamic scaling: under 5% zero, under 1% underflowed"

# Usage errors: exit 2, one line naming the option.
expect_usage_of precision "--precision" $shape --precision fp8
expect_usage_of precision "--scale: expected a power of two" $shape --scale 1000
expect_usage_of precision "--loss-scale" $shape --loss-scale bogus
expect_usage_of precision "--width: the MLP stack's" $shape --width 64
expect_usage_of precision "--gemm-n" $shape --gemm-n 64

done_testing
