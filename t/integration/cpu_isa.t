#!/bin/bash
# The manifest's cpu_isa: the variant of the cloned CPU kernels the loader picked (avx512f or avx2
# where the CPU has it, else sse2; baseline off x86-64) and which of the flags the vectorised kernels
# may use /proc/cpuinfo lists; the kernels program's notes say the same. The schema takes the
# allowed names only. Seconds.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
V=$top/scripts/validate

launch 1 kernels -n 1 -w 0 --kernels gelu --gemm-n 64 --elems 4096 --copy-bytes 8M -o "$out/k" >"$out/k.txt" 2>&1
ok $? "kernels exits 0"
"$V" manifest "$out/k/manifest.json" >"$out/log" 2>&1
ok $? "its manifest validates"
[ $? = 0 ] || diag "$(cat "$out/log")"

# What /proc/cpuinfo and the architecture say, independently of the program.
python3 - "$out/k/manifest.json" <<'PY' >"$out/isa" 2>&1
import json, platform, sys
isa = json.load(open(sys.argv[1])).get("cpu_isa")
assert isinstance(isa, dict), f"no cpu_isa object in the manifest: {isa!r}"
names = ["avx2", "fma", "avx512f", "f16c", "avx512_bf16"]
line = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), None)
have = None if line is None else [n for n in names if n in line.split(":", 1)[1].split()]
vector = ("baseline" if platform.machine() != "x86_64" else "avx512f" if have and "avx512f" in have
          else "avx2" if have and "avx2" in have else "sse2")
assert isa.get("vector") in ("avx512f", "avx2", "sse2", "baseline"), f"vector {isa.get('vector')!r} not an allowed name"
assert isa["vector"] == vector, f"vector {isa['vector']!r}, the CPU implies {vector!r}"
assert isa.get("flags") == have, f"flags {isa.get('flags')!r}, /proc/cpuinfo lists {have!r}"
print(isa["vector"], " ".join(have or ["(no flags line)"]))
PY
ok $? "manifest cpu_isa: $(cat "$out/isa")"

vector=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cpu_isa"]["vector"])' "$out/k/manifest.json" 2>/dev/null)
grep -q "^# vector math (gelu, gelu_bwd, softmax_xent, attention): $vector; CPU flags: " "$out/k.txt"
ok $? "kernels' note names the same variant ($vector) and the CPU flags"

# A name outside the allowed set is refused.
python3 - "$out/k/manifest.json" "$out/bad.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["cpu_isa"]["vector"] = "avx512"
json.dump(m, open(sys.argv[2], "w"))
PY
"$V" manifest "$out/bad.json" >"$out/log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "cpu_isa" "$out/log"
ok $? "a manifest with cpu_isa.vector avx512 fails validation naming the field (rc=$rc)"
done_testing
