#!/usr/bin/env bash
# install-deps.sh — install what scalelab needs from the distribution's packages.
#
#   scripts/install-deps.sh            everything (required and optional; the tests' optional
#                                      tools too: matplotlib, chromium, Slurm, munge, iproute2;
#                                      SimGrid's SMPI, libsimgrid-dev, where the distribution has it)
#   scripts/install-deps.sh PKG...     just these packages (the Makefile passes what it lacks)
#
# Debian/Ubuntu (apt-get) and Fedora/RHEL (dnf). Needs root (or sudo).
set -euo pipefail

apt_all=(build-essential make openssh-client openmpi-bin libopenmpi-dev libopenblas-dev libhwloc-dev hwloc
         libpapi-dev perl python3 git gnuplot-nox)
# Optional, each on its own so that one the release lacks leaves the rest: plots in
# scripts/report --html (python3-matplotlib), and, for tests that skip without them, a headless
# browser that renders the report (chromium), a real one-node Slurm cluster (slurm-wlm: slurmctld,
# slurmd, srun, sbatch; munge) and hosts in network namespaces with a slowed link (iproute2: ip,
# tc); SimGrid's SMPI for
# make SIMGRID=1 and scripts/simulate (libsimgrid-dev).
apt_optional=(python3-matplotlib python3-pil chromium slurm-wlm munge iproute2 libsimgrid-dev)
dnf_all=(gcc make openmpi-devel openblas-devel hwloc-devel hwloc papi-devel perl-Test-Harness
         python3 git gnuplot)

sudo=""
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps.sh: not root and no sudo; install these yourself: ${*:-${apt_all[*]}}" >&2
    exit 1
  fi
fi

if command -v apt-get >/dev/null 2>&1; then
  pkgs=("$@")
  [[ ${#pkgs[@]} -gt 0 ]] || pkgs=("${apt_all[@]}")
  echo "install-deps.sh: apt-get install ${pkgs[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"
  if [[ $# -eq 0 ]]; then
    for p in "${apt_optional[@]}"; do
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null ||
        echo "install-deps.sh: optional $p could not be installed: what needs it is skipped, saying why" >&2
    done
  fi
elif command -v dnf >/dev/null 2>&1; then
  pkgs=("$@")
  [[ ${#pkgs[@]} -gt 0 && ! " ${pkgs[*]} " =~ -dev ]] || pkgs=("${dnf_all[@]}")
  echo "install-deps.sh: dnf install ${pkgs[*]}"
  $sudo dnf install -y "${pkgs[@]}"
  echo "install-deps.sh: Open MPI on Fedora/RHEL needs 'module load mpi/openmpi-x86_64' before make" >&2
else
  echo "install-deps.sh: no apt-get or dnf here; install MPI, OpenBLAS and hwloc with your package manager or Spack (spack install openmpi openblas hwloc)" >&2
  exit 1
fi
