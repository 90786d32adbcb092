#!/usr/bin/env bash
# Build Horovod 0.28.1 (the last release) against the installed PyTorch and install it.
#
# As published it does not build against torch >= 2.1, which needs C++17: the sdist's two
# CMAKE_CXX_STANDARD 14 lines are raised to 17. Gloo and, where Open MPI is installed, MPI are
# built in; NCCL too when torch has CUDA and nvcc is present. The wheel is cached per torch
# version, CUDA flavour and the controllers built in (MPI, NCCL), so each machine builds it once
# (about 10 minutes on 2 cores), and again when Open MPI or nvcc appear: a wheel built without MPI is
# never taken for one with it. An installed Horovod that lacks a controller this machine can build
# is replaced.
#
# Usage: envs/build-horovod.sh [PYTHON]   (default: python on PATH)
set -euo pipefail
PY=${1:-python}
VERSION=0.28.1
CACHE=${LCFLOW_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lcflow/wheels}

flavour=$("$PY" -c 'import torch; v = torch.__version__.split("+")[0]; c = torch.version.cuda; print(v + "-" + ("cu" + c.replace(".", "") if c else "cpu"))')
want_mpi=0; command -v mpicxx >/dev/null && want_mpi=1
want_nccl=0; [[ "$flavour" != *-cpu ]] && command -v nvcc >/dev/null && want_nccl=1
controllers=gloo
if [ $want_mpi = 1 ]; then controllers+=-mpi; fi
if [ $want_nccl = 1 ]; then controllers+=-nccl; fi

if built=$("$PY" -c "import horovod.torch as h; print(int(h.mpi_built()), int(h.nccl_built()))" 2>/dev/null); then
  if [ "${built%% *}" -ge $want_mpi ] && [ "${built##* }" -ge $want_nccl ]; then
    echo "horovod ($controllers) already importable in $PY"; exit 0
  fi
  echo "installed horovod lacks a controller this machine has (MPI, NCCL built: $built; wanted: $want_mpi $want_nccl): rebuilding"
fi
dir="$CACHE/horovod-$VERSION-torch$flavour-$controllers"
wheel=$(ls "$dir"/horovod-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)

if [ -z "$wheel" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$PY" -m pip download --quiet --no-deps --no-binary :all: "horovod==$VERSION" -d "$work"
  tar -xzf "$work/horovod-$VERSION.tar.gz" -C "$work"
  src="$work/horovod-$VERSION"
  sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
  grep -q 'CMAKE_CXX_STANDARD 17' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
  export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
  if [ $want_mpi = 1 ]; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
  if [ $want_nccl = 1 ]; then export HOROVOD_GPU_OPERATIONS=NCCL; fi
  # the bundled gloo asks for CMake 2.8.12, which CMake 4 refuses
  export CMAKE_POLICY_VERSION_MINIMUM=3.5
  export MAKEFLAGS="-j$(nproc)"
  "$PY" -m pip install --quiet cloudpickle psutil pyyaml packaging
  mkdir -p "$dir"
  "$PY" -m pip wheel --no-deps --no-build-isolation -w "$work/wheel" "$src"
  mv "$work"/wheel/horovod-*.whl "$dir"/
  wheel=$(ls "$dir"/horovod-"$VERSION"-*.whl | head -n 1)
fi
"$PY" -m pip install --quiet --no-deps --force-reinstall "$wheel"
"$PY" -m pip install --quiet cloudpickle psutil pyyaml packaging
echo "installed $wheel"
