#!/usr/bin/env bash
# lcflow into a container image (envs/lcflow.def, envs/Containerfile), as root: the system packages
# (Python, a C++17 compiler, CMake, Open MPI, GDAL's tools; NCCL's headers where the base image has CUDA),
# then a venv with torch, lcflow and Horovod built against that torch with every controller the image
# can build (Gloo, MPI, and NCCL where CUDA's compiler is there). The venv's bin goes first on PATH.
#
# Environment: TORCH (default 2.13.0), TORCH_INDEX (pip index of the torch build, e.g.
# https://download.pytorch.org/whl/cu128 for CUDA 12.8; empty: PyPI's), LCFLOW_PREFIX (default
# /opt/lcflow/venv), LCFLOW_PYTHON (default 3.11, the Python the venv route is tested with: the system's
# python3 where it is that version, else uv's build of it, fetched at build time).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${LCFLOW_PREFIX:-/opt/lcflow/venv}
TORCH=${TORCH:-2.13.0}

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  # libibverbs and its providers, librdmacm: the InfiniBand user space NCCL's IB transport and Open MPI load
  # (without them NCCL falls back to sockets between nodes); ibv_devinfo (ibverbs-utils) to check a node
  packages=(python3 python3-venv python3-dev g++ cmake make openmpi-bin libopenmpi-dev gdal-bin
    libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils)
  apt-get update -qq
  # NCCL's headers, for Horovod's NCCL controller: from NVIDIA's repository, which CUDA's base images carry
  if apt-cache show libnccl-dev >/dev/null 2>&1; then packages+=(libnccl2 libnccl-dev); fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}"
  rm -rf /var/lib/apt/lists/*
fi
export PATH=/usr/local/cuda/bin:$PATH  # nvcc, where the base image has CUDA: Horovod's NCCL controller
PYTHON=${LCFLOW_PYTHON:-3.11}
if [ "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$PYTHON" ]; then
  python3 -m venv "$PREFIX"
else  # Ubuntu 24.04's python3 is 3.12: uv's standalone build of the tested version, kept in the image
  python3 -m venv /tmp/lcflow-uv && /tmp/lcflow-uv/bin/pip install --quiet --no-cache-dir uv
  UV_PYTHON_INSTALL_DIR=/opt/lcflow/python /tmp/lcflow-uv/bin/uv python install "$PYTHON"
  UV_PYTHON_INSTALL_DIR=/opt/lcflow/python /tmp/lcflow-uv/bin/uv venv --seed --python "$PYTHON" "$PREFIX"
  rm -rf /tmp/lcflow-uv
fi
"$PREFIX/bin/pip" install --quiet --no-cache-dir "torch==$TORCH" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
"$PREFIX/bin/pip" install --quiet --no-cache-dir "$SRC"  # the package itself: the workflow stays on the host
LCFLOW_WHEEL_CACHE=${LCFLOW_WHEEL_CACHE:-/tmp/lcflow-wheels} "$SRC/envs/build-horovod.sh" "$PREFIX/bin/python"
"$PREFIX/bin/python" - <<'PY'
import horovod.torch as hvd
import torch
from lcflow.train.parallel.backend_check import problem

import sys

print(f"Python {sys.version.split()[0]}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
      f"horovod built with gloo {hvd.gloo_built()}, "
      f"mpi {hvd.mpi_built()}, nccl {hvd.nccl_built()}")
assert problem("horovod") is None, problem("horovod")
PY
"$PREFIX/bin/lcflow" --help >/dev/null
