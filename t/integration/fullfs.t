#!/bin/bash
# A full filesystem: every write of a result is checked. The program stops with exit 3 naming
# the file and the reason, never "every check passed" over lost rows, and the rows it did write
# are whole lines. Needs a tiny tmpfs, so root (CI); skipped with the reason elsewhere.
. "$(dirname "$0")/../lib/common.sh"
mnt=$(tmpdir)
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=64k tmpfs "$mnt" 2>/dev/null; then
  rmdir "$mnt"
  echo "1..0 # SKIP cannot mount a 64 KiB tmpfs here (needs root and mount permission)"
  exit 0
fi
err="$mnt/../$(basename "$mnt").err"
trap 'umount "$mnt"; rmdir "$mnt"; rm -f "$err" "$err.out"' EXIT

# 1. the disk fills while rows are written (allreduce writes ~150 rows of ~700 bytes)
launch 2 allreduce -C all -b 8 -e 1M -f 2 -n 2 -w 1 -o "$mnt/r" >"$err.out" 2>"$err"
rc=$?
[ $rc = 3 ]
ok $? "a full disk while writing rows: exit 3 (rc=$rc)"
grep -q "cannot write a result row to $mnt/r/allreduce.jsonl: No space left on device" "$err"
ok $? "the message names the file and the reason"
! grep -q "every check passed" "$err.out"
ok $? "no 'every check passed' verdict"
python3 - "$mnt/r/allreduce.jsonl" <<'PY'
import json, sys
n = 0
with open(sys.argv[1], 'rb') as f:
    data = f.read()
assert data.endswith(b'\n'), 'the last line is cut'
for line in data.splitlines():
    json.loads(line); n += 1
assert n > 0
print('# %d whole rows' % n)
PY
ok $? "the rows written are whole lines of valid JSON"

# 2. a disk already full: the manifest cannot be written
rm -rf "$mnt/r"
dd if=/dev/zero of="$mnt/fill" bs=1k count=64 2>/dev/null
mae_threads -n 1 -w 0 --samples 1024 --threads 1 -o "$mnt/m" >"$err.out" 2>"$err"
rc=$?
[ $rc = 3 ] && grep -q "cannot write $mnt/m/manifest.json: No space left on device" "$err"
ok $? "a full disk: exit 3 naming manifest.json (rc=$rc: $(head -1 "$err"))"
[ ! -e "$mnt/m/manifest.json" ]
ok $? "no cut manifest is left behind"

# 3. room for the manifest and the rows but not the trace
rm -f "$mnt/fill"
dd if=/dev/zero of="$mnt/fill" bs=1k count=52 2>/dev/null
launch 2 allreduce -C ring -b 1K -e 1K -n 200 -w 0 --mode latency --place out --trace -o "$mnt/t" >"$err.out" 2>"$err"
rc=$?
[ $rc = 3 ] && grep -q "cannot write the trace $mnt/t/allreduce.trace.json: No space left on device" "$err"
ok $? "a trace that does not fit: exit 3 naming the trace (rc=$rc: $(head -1 "$err"))"
done_testing
