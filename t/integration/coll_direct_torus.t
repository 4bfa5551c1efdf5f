#!/bin/bash
# coll_direct_torus.t — the fully connected (direct) and 2-D torus collectives reach every
# program that takes -C through the shared collective list: ddp (a training program) trains to
# the serial reference's weights with -C direct,torus on 4 ranks (a 2x2 grid, 3 exchanges in
# flight) and on 3 ranks (--torus 1x3, --max-inflight 1); --help names both options; and a
# training program refuses the same bad --torus / --max-inflight as allreduce (exit 2, one line),
# and --torus-bidir without -C torus. allreduce -C torus --torus-bidir passes its checks, its
# rows say torus_bidir 1 and its model row 2 messages in flight (one each way round the ring).
# The collectives' own exactness is coll.t's (test_coll on 1..9 ranks), allreduce's is
# allreduce.t's.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction and its calibration are ddp.t's and zero.t's to test; here they would only
# cost time (every dtype x collective's GEMMs and alpha-beta sweep, seconds under the sanitizers).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
small="--layers 3 --width 48 --inputs 12 --outputs 5 --bucket-mb 0.004 --accum 3 -n 2 -w 1 --baseline 0 --batch 5"

# rows_pass FILE COLLS...: every row's check passed and every collective named has rows
rows_pass() {
  python3 - "$@" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = [f"{r['variant']}/{r['collective']}: {r['check']}" for r in rows if r["check"]["status"] != "pass"]
seen = {r["collective"] for r in rows}
if not set(sys.argv[2:]) <= seen: bad.append(f"collectives {sorted(seen)}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad or not rows else 0)
PY
}

launch 4 ddp $small -C direct,torus -o "$out/ddp4" >"$out/ddp4.txt" 2>&1
rc=$?
rows_pass "$out/ddp4/ddp.jsonl" direct torus
ok $? "ddp -C direct,torus on 4 ranks (grid 2x2): every variant's check passes (rc=$rc)"
[ $rc = 0 ] || tail -n 15 "$out/ddp4.txt" | sed 's/^/#   /' >&2

launch 3 ddp $small -C direct,torus --torus 1x3 --max-inflight 1 -o "$out/ddp3" >"$out/ddp3.txt" 2>&1
rc=$?
rows_pass "$out/ddp3/ddp.jsonl" direct torus
ok $? "ddp -C direct,torus --torus 1x3 --max-inflight 1 on 3 ranks: every variant's check passes (rc=$rc)"

launch 4 allreduce -C torus --torus-bidir -b 64 -e 64K -f 32 -n 2 -w 1 -o "$out/ar" >"$out/ar.txt" 2>&1
rc=$?
python3 - "$out/ar/allreduce.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
timed = [r for r in rows if r.get("collective") == "torus" and r["variant"] != "model"]
model = [r for r in rows if r["variant"] == "model"]
ok = timed and all(r["check"]["status"] == "pass" and r["params"].get("torus_bidir") == 1 for r in timed)
ok = ok and len(model) == 1 and model[0]["params"].get("in_flight") == 2 and model[0]["params"].get("steps") == 4
sys.exit(0 if ok else 1)
PY
ok $? "allreduce -C torus --torus-bidir on 4 ranks: checks pass, rows say torus_bidir 1, model row 4 steps with 2 in flight (rc=$rc)"
[ $rc = 0 ] || tail -n 15 "$out/ar.txt" | sed 's/^/#   /' >&2

bin/ddp --help | grep -q -- '--torus-bidir' &&
bin/ddp --help | grep -q -- '--torus RxC' && bin/ddp --help | grep -q -- '--max-inflight K'
ok $? "ddp --help lists --torus-bidir, --torus and --max-inflight"

# expect_usage NP WANT ARGS...: exit 2, one line naming WANT, no results directory
n=0
expect_usage() {
  local np=$1 want=$2; shift 2
  n=$((n + 1))
  launch "$np" ddp $small "$@" -o "$out/bad$n" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [ $rc = 2 ] && [ "$(wc -l < "$out/stderr")" = 1 ] && grep -q -- "$want" "$out/stderr" && [ ! -e "$out/bad$n" ]
  ok $? "ddp $* on $np ranks -> exit 2, one line naming $want (rc=$rc: $(head -n 1 "$out/stderr"))"
}
expect_usage 3 "--coll (-C) torus: 3 ranks is prime" -C torus
expect_usage 4 "--torus 3x2: a grid of 6 ranks" -C torus --torus 3x2
expect_usage 4 "--torus: expected a grid RxC" -C torus --torus 2by2
expect_usage 4 "--max-inflight 5: at most 3" -C direct --max-inflight 5
expect_usage 4 "--max-inflight applies to -C direct only" -C ring --max-inflight 2
expect_usage 4 "--torus-bidir applies to -C torus only" -C direct --torus-bidir
done_testing
