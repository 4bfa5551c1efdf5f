#!/bin/bash
# deps.t — make's dependency step: as root on Debian/Ubuntu it installs the optional packages the
# main job's output uses (python3-matplotlib for report.html's plots, libpapi-dev for --papi)
# with scripts/install-deps.sh, NO_OPTIONAL=1 skips them, and where it cannot install (not root,
# or tried before) the ✗ line names the package. Nothing is installed here: make runs with -n
# (the probes' results overridden as if the packages were missing) and install-deps.sh runs
# against a stand-in apt-get that records what it is asked. Seconds.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

# mk ARGS...: make -n as if matplotlib and PAPI were missing, in a build tree of its own
mk() {
  env -u MAKEFLAGS -u MAKELEVEL make -n -C "$top" BUILD="$out/build" BIN="$out/bin" HAVE_MPL=0 PAPI_FOUND=0 "$@" all \
    >"$out/make.txt" 2>&1
}
install_line() { grep -q 'scripts/install-deps.sh.*--optional libpapi-dev python3-matplotlib' "$out/make.txt"; }
x_lines() {
  grep -q '^✗ PAPI .*apt: libpapi-dev' "$out/make.txt" &&
    grep -q '^✗ matplotlib (python3) .*python3-matplotlib' "$out/make.txt"
}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  mk
  install_line && x_lines && grep -q 'installing missing packages with scripts/install-deps.sh' "$out/make.txt"
  ok $? "root on Debian: make installs the missing optional packages, and says so"
  [ $? = 0 ] || diag "$(head -20 "$out/make.txt")"
else
  echo "ok $((tap_n += 1)) # SKIP make's install step: needs root and apt-get"
fi

mk NO_OPTIONAL=1
! grep -q 'install-deps.sh' "$out/make.txt" && x_lines
ok $? "make NO_OPTIONAL=1: nothing installed; the ✗ lines name the packages"

mk CAN_AUTO_INSTALL=0
! grep -q 'install-deps.sh' "$out/make.txt" && x_lines
ok $? "where make cannot install (not root, not apt): the ✗ lines name the packages, the build goes on"

mk PAPI=0 NO_OPTIONAL=0
! grep -q 'install-deps.sh.*libpapi-dev' "$out/make.txt"
ok $? "PAPI=0 given: libpapi-dev is not asked for"

mkdir -p "$out/build" && echo libpapi-dev python3-matplotlib >"$out/build/optional-deps.tried"
mk
! grep -q 'install-deps.sh' "$out/make.txt" && x_lines
ok $? "an optional package tried before (build/optional-deps.tried) is not tried again"
rm -f "$out/build/optional-deps.tried"

# install-deps.sh against a stand-in apt-get: required packages must install, optional ones
# may fail (said, exit 0).
mkdir -p "$out/path"
cat >"$out/path/apt-get" <<'SH'
#!/bin/sh
echo "apt-get $*" >>"$APT_LOG"
case " $* " in *" $APT_FAIL "*) exit 100 ;; esac
exit 0
SH
chmod +x "$out/path/apt-get"
if [ "$(id -u)" = 0 ]; then
  export APT_LOG="$out/apt.log"
  PATH="$out/path:$PATH" APT_FAIL=python3-matplotlib "$top/scripts/install-deps.sh" libhwloc-dev \
    --optional libpapi-dev python3-matplotlib >"$out/log" 2>&1
  rc=$?
  [ $rc = 0 ] && grep -q 'install -y -qq libhwloc-dev' "$APT_LOG" && grep -q 'install -y -qq libpapi-dev' "$APT_LOG" &&
    grep -q 'optional python3-matplotlib could not be installed' "$out/log" && grep -q 'installed optional libpapi-dev' "$out/log"
  ok $? "install-deps.sh PKG --optional A B: each optional one on its own, one that fails is said, exit 0 (rc=$rc)"
  : >"$APT_LOG"
  PATH="$out/path:$PATH" APT_FAIL=libhwloc-dev "$top/scripts/install-deps.sh" libhwloc-dev --optional libpapi-dev \
    >"$out/log" 2>&1
  rc=$?
  [ $rc != 0 ]
  ok $? "install-deps.sh: a required package that cannot be installed fails (rc=$rc)"
else
  echo "ok $((tap_n += 1)) # SKIP install-deps.sh: needs root"
  echo "ok $((tap_n += 1)) # SKIP install-deps.sh: needs root"
fi
done_testing
