#!/bin/bash
# ./run_all.sh --quick --only mae_threads writes a manifest and valid rows, prints the summary
# and exits 0; its own bad options exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cd "$top" || exit 1

./run_all.sh --quick --only mae_threads --out "$out/run" >"$out/log" 2>&1
rc=$?
ok $rc "run_all.sh --quick --only mae_threads exits 0"
[ $rc = 0 ] || tail -20 "$out/log" | sed 's/^/#   /' >&2
python3 t/lib/validate_results.py manifest "$out/run/manifest.json" >/dev/null
ok $? "manifest.json written and valid"
python3 t/lib/validate_results.py rows "$out/run/mae_threads.jsonl" --min-rows 5 >/dev/null
ok $? "mae_threads.jsonl rows valid"
grep -q '^# summary of' "$out/log" && grep -q 'mae_threads *partial' "$out/log"
ok $? "the summary table is printed"
grep -q 'verdict: every program ran and every check passed' "$out/log"
ok $? "the verdict says every check passed"
[ -s "$out/run/mae_threads.log" ] && grep -q 'mae_threads	0	' "$out/run/status.tsv"
ok $? "per-program log and exit status recorded"

./run_all.sh --np 0 >/dev/null 2>&1; [ $? = 2 ]
ok $? "--np 0 exits 2"
./run_all.sh --only no_such_program >/dev/null 2>&1; [ $? = 2 ]
ok $? "--only with an unknown program exits 2"
./run_all.sh --bogus >/dev/null 2>&1; [ $? = 2 ]
ok $? "unknown option exits 2"

# A failing program: the suite carries on and exits non-zero (a program past its time limit
# is killed the same way). A stand-in program that fails is placed in a copy of bin/.
mkdir -p "$out/tree/bin" "$out/tree/scripts"
cp run_all.sh "$out/tree/" && cp scripts/sl-launch scripts/report "$out/tree/scripts/"
printf '#!/bin/sh\nexit 1\n' >"$out/tree/bin/always_fails"
printf '#!/bin/sh\nsleep 30\n' >"$out/tree/bin/hangs"
cp bin/mae_threads "$out/tree/bin/"
chmod +x "$out/tree/bin/"*
(cd "$out/tree" && ./run_all.sh --quick --np 1 --timeout 2 --out "$out/tree/res" >"$out/log2" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q 'always_fails: FAILED' "$out/log2" && grep -q 'hangs: FAILED (killed' "$out/log2" \
  && grep -q 'mae_threads *partial' "$out/log2"
ok $? "a failing and a hanging program: the others still run, the summary names them, exit 1"
[ $rc = 1 ] || tail -20 "$out/log2" | sed 's/^/#   /' >&2

done_testing
