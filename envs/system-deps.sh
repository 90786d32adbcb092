#!/usr/bin/env bash
# The Debian packages lcflow's set-up needs: Python's venv, and a C++17 compiler, CMake 3.x and Open MPI
# to build Horovod. Run as root it installs what is missing with apt; otherwise it stops at once with
# the one command to run. Extra package names given as arguments are checked and installed the same way
# (.ci/run adds Slurm and munge for the Slurm tests).
#
# Usage: envs/system-deps.sh [PYTHON] [-- EXTRA-PACKAGE=COMMAND ...]
set -euo pipefail
PY=${1:-python3}
shift || true
[ "${1:-}" = "--" ] && shift

need=()
"$PY" -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
command -v g++ >/dev/null || need+=(g++)
command -v cmake >/dev/null || need+=(cmake)
command -v mpicxx >/dev/null || need+=(openmpi-bin libopenmpi-dev)
for extra in "$@"; do  # package=command that shows it is there
  pkg=${extra%%=*} cmd=${extra#*=}
  command -v "$cmd" >/dev/null || [ -x "$cmd" ] || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${need[*]} with apt-get" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
else
  echo "lcflow needs Debian packages that are missing; run: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
