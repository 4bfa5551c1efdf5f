#!/usr/bin/env bash
# install-deps.sh — install what scalelab needs from the distribution's packages.
#
#   scripts/install-deps.sh            everything (required and optional; the tests' optional
#                                      tools too: matplotlib, chromium, Slurm, munge, iproute2;
#                                      SimGrid's SMPI, libsimgrid-dev, where the distribution has it)
#   scripts/install-deps.sh PKG...     just these packages (the Makefile passes what it lacks)
#   scripts/install-deps.sh [PKG...] --optional OPT...
#                                      and these optional ones, each on its own: one that cannot be
#                                      installed is said and skipped, never a failure (the Makefile
#                                      passes the missing python3-matplotlib and libpapi-dev)
#
# Debian/Ubuntu (apt-get) and Fedora/RHEL (dnf). Needs root (or sudo).
set -euo pipefail

# python3-jsonschema: scripts/compare, scripts/report and the tests validate results against
# results/schema.json with it (scripts/gatelib/schema.py).
apt_all=(build-essential make openssh-client openmpi-bin libopenmpi-dev libopenblas-dev libhwloc-dev hwloc
         libpapi-dev perl python3 python3-jsonschema git gnuplot-nox)
# Optional, each on its own so that one the release lacks leaves the rest: plots in
# scripts/report --html (python3-matplotlib), and, for tests that skip without them, a headless
# browser that renders the report (chromium), a real one-node Slurm cluster (slurm-wlm: slurmctld,
# slurmd, srun, sbatch; munge) and hosts in network namespaces with a slowed link (iproute2: ip,
# tc); SimGrid's SMPI for
# make SIMGRID=1 and scripts/simulate (libsimgrid-dev).
apt_optional=(python3-matplotlib python3-pil chromium slurm-wlm munge iproute2 libsimgrid-dev)
dnf_all=(gcc make openmpi-devel openblas-devel hwloc-devel hwloc papi-devel perl-Test-Harness
         python3 python3-jsonschema git gnuplot)

# The required packages asked for, then the optional ones (after --optional).
pkgs=() optional=() all=1
while [[ $# -gt 0 ]]; do
  if [[ "$1" == --optional ]]; then
    shift
    optional+=("$@")
    break
  fi
  pkgs+=("$1")
  shift
done
[[ ${#pkgs[@]} -eq 0 && ${#optional[@]} -eq 0 ]] || all=0

sudo=""
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps.sh: not root and no sudo; install these yourself:" \
      "$( ((all)) && echo "${apt_all[*]}" || echo "${pkgs[*]} ${optional[*]}")" >&2
    exit 1
  fi
fi

apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
if command -v apt-get >/dev/null 2>&1; then
  if ((all)); then
    pkgs=("${apt_all[@]}") optional=("${apt_optional[@]}")
  fi
  if [[ ${#pkgs[@]} -gt 0 ]]; then
    echo "install-deps.sh: apt-get install ${pkgs[*]}"
    apt_get update -qq
    apt_get install -y -qq "${pkgs[@]}"
  elif [[ ${#optional[@]} -gt 0 ]]; then
    # only optional ones: an index that cannot be updated (no network) leaves them out
    apt_get update -qq || echo "install-deps.sh: apt-get update failed; trying the optional packages anyway" >&2
  fi
  for p in "${optional[@]}"; do
    if apt_get install -y -qq "$p" >/dev/null; then
      ((all)) || echo "install-deps.sh: installed optional $p"
    else
      echo "install-deps.sh: optional $p could not be installed: what needs it is skipped, saying why" >&2
    fi
  done
elif command -v dnf >/dev/null 2>&1; then
  # (the Makefile passes Debian's names: those are replaced by the whole Fedora list)
  [[ ${#pkgs[@]} -gt 0 && ! " ${pkgs[*]} " =~ -dev ]] || pkgs=("${dnf_all[@]}")
  echo "install-deps.sh: dnf install ${pkgs[*]}"
  $sudo dnf install -y "${pkgs[@]}"
  echo "install-deps.sh: Open MPI on Fedora/RHEL needs 'module load mpi/openmpi-x86_64' before make" >&2
else
  echo "install-deps.sh: no apt-get or dnf here; install MPI, OpenBLAS and hwloc with your package manager or Spack (spack install openmpi openblas hwloc)" >&2
  exit 1
fi
