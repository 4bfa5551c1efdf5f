#!/bin/bash
# install.t — `make install` into a staging directory (its copying half, install-files: the tree
# is built) gives a copy that works on its own: the programs and sl-launch in PREFIX/bin, and in
# PREFIX/share/scalelab run_all.sh, the report, the gate, the validator and the pairwise sweep
# with the Python packages they import and the schema they validate against. The copy is run
# from elsewhere, with the build tree's bin/ out of PATH.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

make -s -C "$top" install-files DESTDIR="$out/stage" PREFIX=/opt/sl >"$out/install.txt" 2>&1
ok $? "make install-files (make install after the build) DESTDIR=... PREFIX=/opt/sl exits 0"
root="$out/stage/opt/sl"
share="$root/share/scalelab"
missing=""
for f in bin/allreduce bin/ddp bin/sl-launch share/scalelab/run_all.sh \
  share/scalelab/scripts/report share/scalelab/scripts/compare share/scalelab/scripts/validate \
  share/scalelab/scripts/pairs share/scalelab/scripts/gatelib/schema.py \
  share/scalelab/scripts/reportlib/page.py share/scalelab/scripts/pairslib/schedule.py \
  share/scalelab/results/schema.json share/scalelab/results/schema.md share/scalelab/docs/results.md; do
  [ -e "$root/$f" ] || missing="$missing $f"
done
[ -z "$missing" ]
ok $? "the installed tree holds the programs, the scripts, their packages and the schema${missing:+ (missing:$missing)}"

# One run of the installed program, then the installed scripts on its rows, from elsewhere.
cd "$out"
PATH="$root/bin:/usr/bin:/bin" "$root/bin/sl-launch" -np 2 "$root/bin/allreduce" -C ring -b 64 -e 256 \
  -n 2 -w 0 -o "$out/run/allreduce" >"$out/run.txt" 2>&1
ok $? "the installed allreduce runs through the installed sl-launch"
"$share/scripts/validate" rows "$out/run/allreduce/allreduce.jsonl" >"$out/validate.txt" 2>&1
ok $? "the installed validator finds its schema: the rows validate"
python3 "$share/scripts/report" "$out/run/allreduce" >"$out/report.txt" 2>&1
ok $? "the installed report reads the run"
python3 "$share/scripts/compare" "$out/run/allreduce" "$out/run/allreduce" >"$out/compare.txt" 2>&1
rc=$?
[ $rc = 0 ] || [ $rc = 1 ]
ok $? "the installed compare runs (exit $rc: 0 or 1 are verdicts, 2 and 3 would be failures)"
"$share/scripts/pairs" --help >"$out/pairs.txt" 2>&1
ok $? "the installed pairs imports its packages (--help)"
done_testing
