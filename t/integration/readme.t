#!/bin/bash
# readme.t — the README's "Adding a training benchmark" skeleton is real: extracted from the
# page, it compiles with the suite's flags (warnings are errors), links against its libraries,
# and trains on two ranks to the serial reference's weights.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

sed -n '/<!-- skeleton:begin -->/,/<!-- skeleton:end -->/p' "$top/README.md" | sed '1,2d;$d' | sed '$d' >"$out/mydp.c"
grep -q "sl_train_main" "$out/mydp.c"
ok $? "the skeleton is found in README.md"

mapfile -t build < <(env -u MAKEFLAGS -u MAKELEVEL make -s -C "$top" print-build SANITIZE="${SL_SANITIZE:-0}" 2>/dev/null | tail -3)
# shellcheck disable=SC2086
(cd "$top" && ${build[0]} ${build[1]} "$out/mydp.c" -o "$out/mydp" ${build[2]}) >"$out/build.txt" 2>&1
rc=$?
ok $rc "the skeleton compiles with -Wall -Wextra -Werror and links"
[ $rc = 0 ] || sed 's/^/#   /' "$out/build.txt" >&2

launch 2 "$out/mydp" --layers 3 --width 32 --inputs 8 --outputs 4 --batch 4 -C mpi,ring -o "$out/run" >"$out/run.txt" 2>&1
ok $? "the skeleton runs on 2 ranks and passes its check with mpi and ring"
python3 - "$out/run/mydp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = len(rows) == 2 and all(r["check"]["status"] == "pass" and r["metrics"]["comm"]["value"] is not None for r in rows)
sys.exit(0 if ok else 1)
PY
ok $? "its rows carry the check and the comm phase"
done_testing
