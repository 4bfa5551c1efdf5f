#!/bin/bash
# launch.t — scripts/sl-launch's own failures are exit 3 with one line naming the cause, never a
# check failure's exit 1 or an Open MPI banner: a signal to sl-launch (passed on to mpirun once,
# the ranks stop), a TMPDIR Open MPI cannot use, SL_BIND=core beyond the node's cores, a hostfile
# host that does not resolve or cannot be reached, libraries that cannot load under `ulimit -v`.
# A program that ends in MPI_Abort shows its own line only (no MPI_ABORT banner).
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
# every process of the launches with signals has SL_T_RUN=$out in its environment (mpirun passes
# it on); this script's own processes do not
of_this_test() { grep -lzx "SL_T_RUN=$out" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
trap 'left=$(of_this_test); [ -z "$left" ] || kill -KILL $left 2>/dev/null; rm -rf "$out"' EXIT
cd "$top" || exit 1

one_line() { # one_line FILE PATTERN: FILE is one line, which matches PATTERN
  [ "$(wc -l <"$1")" = 1 ] && grep -q -- "$2" "$1"
}

# A signal to sl-launch while two ranks run. Ctrl-C and a closed terminal signal the whole
# process group (here the session setsid made); TERM comes to sl-launch alone (run_all.sh,
# timeout). A background job starts with SIGINT ignored, and a test run under nohup with SIGHUP
# ignored: perl gives both back their default.
printf '#!/bin/sh\necho $$ >%s/rank.$OMPI_COMM_WORLD_RANK\nexec sleep 60\n' "$out" >"$out/ranks_sleep"
chmod +x "$out/ranks_sleep"
for how in "INT group" "HUP group" "TERM pid"; do
  set -- $how
  rm -f "$out"/rank.*
  SL_T_RUN="$out" setsid perl -e '$SIG{INT} = $SIG{HUP} = "DEFAULT"; exec @ARGV' scripts/sl-launch -np 2 "$out/ranks_sleep" \
    >"$out/log" 2>&1 &
  sl=$!
  for _ in $(seq 300); do [ -s "$out/rank.0" ] && [ -s "$out/rank.1" ] && break; sleep 0.1; done
  if [ "$2" = group ]; then kill -"$1" -- "-$sl"; else kill -"$1" "$sl"; fi
  wait "$sl"
  rc=$?
  [ $rc = 3 ] && one_line "$out/log" "^sl-launch: stopped by SIG$1 "
  ok $? "SIG$1 to sl-launch's $2: exit 3, one line naming the signal (rc=$rc): $(head -3 "$out/log")"
  # mpirun has told the ranks to stop before sl-launch ends; they may still be on their way out
  # (a zombie has no environment left)
  for _ in $(seq 100); do left=$(of_this_test); [ -z "$left" ] && break; sleep 0.1; done
  [ -z "$left" ]
  ok $? "... no rank or mpirun of it is left${left:+: $(echo $left)}"
  [ -z "$left" ] || { ps -o pid,ppid,stat,cmd -p "$(echo $left | tr ' ' ,)" >&2; kill -KILL $left; }
done

# Launch failures found before mpirun starts
TMPDIR=/proc scripts/sl-launch -np 1 true >"$out/log" 2>&1
rc=$?
[ $rc = 3 ] && one_line "$out/log" "^sl-launch: TMPDIR: cannot make a directory in '/proc'"
ok $? "a TMPDIR Open MPI cannot use: exit 3, one line (rc=$rc): $(head -3 "$out/log")"

cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
OMP_NUM_THREADS=$((cores + 1)) SL_BIND=core scripts/sl-launch -np 1 true >"$out/log" 2>&1
rc=$?
[ $rc = 3 ] && one_line "$out/log" "^sl-launch: SL_BIND=core: 1 rank(s) x $((cores + 1)) thread(s) need"
ok $? "SL_BIND=core with more threads than cores: exit 3, one line (rc=$rc): $(head -3 "$out/log")"
SL_BIND=core scripts/sl-launch -np 1 true >"$out/log" 2>&1
ok $? "... and within the cores it binds and runs: $(head -3 "$out/log")"

printf 'localhost slots=1\nno-such-host.invalid slots=1  # a typo\n' >"$out/hosts"
scripts/sl-launch --hostfile "$out/hosts" true >"$out/log" 2>&1
rc=$?
[ $rc = 3 ] && one_line "$out/log" "^sl-launch: --hostfile: $out/hosts: host 'no-such-host.invalid' does not resolve"
ok $? "a hostfile host that does not resolve: exit 3, one line (rc=$rc): $(head -3 "$out/log")"

# A host that resolves but cannot be reached: mpirun's banner, then sl-launch's line, exit 3
# (a launch agent that fails as ssh does, 255)
printf '#!/bin/sh\necho "ssh: connect to host $1 port 22: Connection refused" >&2\nexit 255\n' >"$out/agent"
chmod +x "$out/agent"
printf 'unreachable slots=1\n' >"$out/hosts"
SL_LAUNCHER_ARGS="--mca plm_rsh_agent $out/agent" scripts/sl-launch --hostfile "$out/hosts" true >"$out/log" 2>&1
rc=$?
[ $rc = 3 ] && tail -1 "$out/log" | grep -q '^sl-launch: mpirun exited 255: the ranks could not be started'
ok $? "a host that cannot be reached: exit 3, sl-launch's line last (rc=$rc): $(tail -1 "$out/log")"

# A CUDA build maps cuBLAS and NCCL at load time, beyond a small `ulimit -v` (a CPU build may fit)
if (ulimit -v 800000 && ldd bin/mae_threads >/dev/null 2>&1); then
  ok 0 "# SKIP this build of mae_threads loads within ulimit -v 800000"
else
  (ulimit -v 800000 && exec scripts/sl-launch -np 1 bin/mae_threads --samples 1024) >"$out/log" 2>&1
  rc=$?
  [ $rc = 3 ] && one_line "$out/log" "^sl-launch: bin/mae_threads cannot load its shared libraries under ulimit -v 800000 KiB"
  ok $? "libraries that cannot load under ulimit -v: exit 3, one line (rc=$rc): $(head -3 "$out/log")"
fi

# A runtime failure on two ranks ends in MPI_Abort: the program's own line, no Open MPI banner
# (nor the ORTE_ERROR_LOG line mpirun prints when the banner is lost on the way).
scripts/sl-launch -np 2 bin/mae_threads -n 1 -w 0 --samples 1024 --threads 1 -o /proc/no/such \
  >/dev/null 2>"$out/log"
rc=$?
[ $rc = 3 ] && [ -s "$out/log" ] && ! grep -qv '^mae_threads: \[rank [01]\] .*cannot create the results directory' "$out/log"
ok $? "MPI_Abort after the program's line: exit 3, its line only (rc=$rc): $(head -3 "$out/log")"

done_testing
