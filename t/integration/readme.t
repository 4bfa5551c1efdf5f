#!/bin/bash
# readme.t — the skeletons of docs/adding-a-benchmark.md are real: extracted from the page, each
# compiles with the suite's flags (warnings are errors), links against its libraries and runs:
# the measurement on one rank, writing its row; the training technique on two ranks, to the
# serial reference's weights.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
page="$top/docs/adding-a-benchmark.md"

mapfile -t build < <(env -u MAKEFLAGS -u MAKELEVEL make -s -C "$top" print-build SANITIZE="${SL_SANITIZE:-0}" 2>/dev/null | tail -3)
# skeleton NAME FILE.c: the C block between <!-- skeleton:begin NAME --> and its end marker,
# built into FILE (without .c)
skeleton() {
  sed -n "/<!-- skeleton:begin $1 -->/,/<!-- skeleton:end -->/p" "$page" | sed '1,2d;$d' | sed '$d' >"$2.c"
  grep -q "int main" "$2.c"
  ok $? "the $1 skeleton is found in docs/adding-a-benchmark.md"
  # shellcheck disable=SC2086
  (cd "$top" && ${build[0]} ${build[1]} "$2.c" -o "$2" ${build[2]}) >"$out/build.txt" 2>&1
  local rc=$?
  ok $rc "the $1 skeleton compiles with -Wall -Wextra -Werror and links"
  [ $rc = 0 ] || sed 's/^/#   /' "$out/build.txt" >&2
}

skeleton plain "$out/name"
launch 1 "$out/name" -n 3 -w 1 -o "$out/plain" >"$out/plain.txt" 2>&1
rc=$?
[ $rc = 0 ] && python3 - "$out/plain/name.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(rows) == 1 and rows[0]["check"]["status"] == "pass" and "bw" in rows[0]["metrics"] else 1)
PY
ok $? "the plain skeleton runs, exit 0, and writes its row with the check and its metric (rc=$rc)"

skeleton training "$out/mydp"
launch 2 "$out/mydp" --layers 3 --width 32 --inputs 8 --outputs 4 --batch 4 -C mpi,ring -o "$out/run" >"$out/run.txt" 2>&1
ok $? "the training skeleton runs on 2 ranks and passes its check with mpi and ring"
python3 - "$out/run/mydp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = len(rows) == 2 and all(r["check"]["status"] == "pass" and r["metrics"]["comm"]["value"] is not None for r in rows)
sys.exit(0 if ok else 1)
PY
ok $? "its rows carry the check and the comm phase"
done_testing
