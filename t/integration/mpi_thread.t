#!/bin/bash
# The MPI thread level: each program asks for the lowest it needs (single, where no thread runs
# beside an MPI call; funneled for mae_threads, whose workers do), --mpi-thread overrides it
# (never below the program's need), and the manifest records what was asked for and provided.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

# level DIR FIELD: the manifest's mpi_thread.FIELD
level() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mpi_thread"][sys.argv[2]])' "$1/manifest.json" "$2"; }

launch 2 allreduce -C mpi -b 8 -e 8 -n 2 -w 0 -o "$out/default" >"$out/default.txt" 2>&1
ok $? "allreduce with its default level exits 0"
[ "$(level "$out/default" requested)" = single ] && [ "$(level "$out/default" provided)" = single ]
ok $? "allreduce asks for and gets single (manifest: $(level "$out/default" requested)/$(level "$out/default" provided))"
grep -q 'thread level single' "$out/default.txt"
ok $? "the run header says the thread level"

launch 2 allreduce -C mpi -b 8 -e 8 -n 2 -w 0 --mpi-thread funneled -o "$out/funneled" >"$out/funneled.txt" 2>&1
ok $? "--mpi-thread funneled exits 0"
[ "$(level "$out/funneled" requested)" = funneled ] && [ "$(level "$out/funneled" provided)" = funneled ]
ok $? "--mpi-thread funneled is what is asked for and provided"

launch 1 mae_threads --threads 2 --samples 4096 -n 1 -w 0 -o "$out/mae" >"$out/mae.txt" 2>&1
ok $? "mae_threads exits 0"
[ "$(level "$out/mae" requested)" = funneled ]
ok $? "mae_threads, whose worker threads run beside MPI, asks for funneled"

launch 1 mae_threads --threads 2 --samples 4096 -n 1 -w 0 --mpi-thread single -o "$out/mae1" \
  >"$out/mae1.txt" 2>"$out/mae1.err"
rc=$?
[ $rc = 2 ] && grep -q -- '--mpi-thread single: mae_threads needs at least funneled' "$out/mae1.err" && [ ! -e "$out/mae1" ]
ok $? "mae_threads --mpi-thread single: exit 2 naming the option and the level it needs (rc=$rc)"
done_testing
