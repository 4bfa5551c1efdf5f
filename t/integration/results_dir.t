#!/bin/bash
# The results directory holds one run: results without this run's manifest are refused; files
# are never written through a planted symbolic link; -o / SL_RESULTS naming a file and an
# SL_RUN_ID that would leave results/ are usage errors (exit 2, one line).
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
small=(-n 1 -w 0 --samples 1024 --threads 1)

expect2() { # expect2 WANT DESCRIPTION CMD...
  local want="$1" what="$2"; shift 2
  "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$? lines; lines=$(wc -l <"$out/stderr")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -q -- "$want" "$out/stderr"; then
    ok 0 "$what: exit 2: $(cat "$out/stderr")"
  else
    ok 1 "$what: exit 2, one line naming '$want'"; diag "rc=$rc: $(cat "$out/stderr")"
  fi
}

mkdir -p "$out/foreign" && echo '{}' >"$out/foreign/allreduce.jsonl"
expect2 "holds results (allreduce.jsonl) without a manifest" "a directory with another run's jsonl and no manifest" \
  mae_threads "${small[@]}" -o "$out/foreign"
[ "$(cat "$out/foreign/allreduce.jsonl")" = '{}' ] && [ ! -e "$out/foreign/mae_threads.jsonl" ]
ok $? "... nothing is appended or created there"
mkdir -p "$out/ftrace" && echo '{}' >"$out/ftrace/ddp.trace.json"
expect2 "ddp.trace.json" "a directory with a trace and no manifest" \
  env SL_RESULTS="$out/ftrace" mae_threads "${small[@]}"

: >"$out/afile"
expect2 "is not a directory" "-o naming a regular file" mae_threads "${small[@]}" -o "$out/afile"
expect2 "SL_RESULTS '$out/afile' is not a directory" "SL_RESULTS naming a regular file" \
  env SL_RESULTS="$out/afile" mae_threads "${small[@]}"
expect2 "is not a directory" "-o below a regular file" mae_threads "${small[@]}" -o "$out/afile/sub"
launch 2 mae_threads "${small[@]}" -o "$out/afile" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 2 ] && [ "$(grep -c 'is not a directory' "$out/stderr")" = 1 ] && ! grep -q MPI_ABORT "$out/stderr"
ok $? "... under mpirun: exit 2, the message once, no MPI_Abort (rc=$rc)"
expect2 "SL_RUN_ID '../x'" "SL_RUN_ID=../x" env -C "$out" SL_RUN_ID=../x "$top/bin/mae_threads" "${small[@]}"
expect2 "SL_RUN_ID 'a/b'" "SL_RUN_ID=a/b" env -C "$out" SL_RUN_ID=a/b "$top/bin/mae_threads" "${small[@]}"
[ ! -e "$out/x" ] && [ ! -e "$out/results" ]
ok $? "... nothing written outside (or inside) results/"

# Planted symbolic links are never followed.
echo precious >"$out/victim"
SL_RUN_ID=r1 mae_threads "${small[@]}" -o "$out/run" >/dev/null 2>&1
ok $? "a first program of run r1"
rm "$out/run/mae_threads.jsonl" && ln -s "$out/victim" "$out/run/mae_threads.jsonl"
SL_RUN_ID=r1 mae_threads "${small[@]}" -o "$out/run" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 3 ] && grep -q "mae_threads.jsonl: it is a symbolic link" "$out/stderr" && [ "$(cat "$out/victim")" = precious ]
ok $? "a jsonl that is a symbolic link is refused (exit 3), its target untouched (rc=$rc)"
rm "$out/run/mae_threads.jsonl"
ln -s "$out/victim" "$out/run/mae_threads.trace.json"
SL_RUN_ID=r1 mae_threads "${small[@]}" --trace -o "$out/run" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 3 ] && grep -q "mae_threads.trace.json: it is a symbolic link" "$out/stderr" && [ "$(cat "$out/victim")" = precious ]
ok $? "a trace that is a symbolic link is refused (exit 3), its target untouched (rc=$rc)"
[ ! -e "$out/run/mae_threads.jsonl" ] && ! grep -q '^ *serial' "$out/stdout"
ok $? "... before anything is measured: no row printed or written"
ln -s "$out/nowhere" "$out/dangling"
expect2 "--out (-o) $out/dangling: a symbolic link to a missing target" "-o naming a dangling symbolic link" \
  mae_threads "${small[@]}" -o "$out/dangling"
expect2 "--out (-o) $out/dangling/sub: $out/dangling is a symbolic link to a missing target" \
  "-o below a dangling symbolic link" mae_threads "${small[@]}" -o "$out/dangling/sub"
[ ! -e "$out/nowhere" ]
ok $? "... nothing is created at the link's target"
mkdir -p "$out/mlink" && ln -s "$out/victim" "$out/mlink/manifest.json"
expect2 "manifest.json is not a regular file" "a manifest that is a symbolic link" \
  mae_threads "${small[@]}" -o "$out/mlink"
[ "$(cat "$out/victim")" = precious ]
ok $? "... the victim is still intact"

done_testing
