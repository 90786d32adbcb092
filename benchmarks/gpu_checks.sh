#!/usr/bin/env bash
# The GPU checks of one session on a GPU node, in one go, each step under its own time limit so that one
# that hangs leaves the others their time:
#   1. the machine and the libraries lcflow imports;
#   2. the tests whose code paths differ on CUDA (presto's encoder and training, checkpoints, amp, ranks
#      per GPU);
#   3. benchmarks/gpu.py: training samples/s in fp32 and bf16, the torch backend's collectives on NCCL,
#      lcflow predict's px/s on a cube of SIDE px (default 2048), the GPU map against the CPU's, the network
#      alone (MODELS, default presto,lstm);
#   4. two torch ranks on this node's GPUs (on a one-GPU node: what two ranks sharing it do);
#   5. with FOREST=1 only: a seed-size forest's map with its trees as tensors on the GPU (predict_engine:
#      tensors) beside the compiled traversal on the node's cores (about 6 minutes, most of it the fit:
#      with steps 1-4 it passes a device call's 10 minutes, so run it as a call of its own).
# Logs and figures go to $OUT (default /tmp/gpu_checks). Wheels of packages the node lacks, if any, in .whl/.
set -u -o pipefail
OUT=${OUT:-/tmp/gpu_checks}
MODELS=${MODELS:-presto,lstm}
SIDE=${SIDE:-2048}
mkdir -p "$OUT"
source "$(dirname "$0")/_carried_wheels.sh"
export PYTHONPATH=$PWD/workflow${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

echo "## 1. machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
timeout 60 python3 -c "
import numba, rasterio, torch
from lcflow.maps import predict
from lcflow.train import training
print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'NCCL', torch.cuda.nccl.version(),
      'rasterio', rasterio.__version__, 'GDAL', rasterio.__gdal_version__, 'numba', numba.__version__)
" || exit 1

echo "## 2. tests on CUDA"
timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/train/test_presto.py tests/train/test_deep.py \
    tests/train/test_rendezvous.py -k "not two_ranks" 2>&1 | tee "$OUT/tests.log" | tail -15

echo "## 3. benchmarks/gpu.py"
timeout 300 python3 benchmarks/gpu.py --models "$MODELS" --collectives --side "$SIDE" --blocks 512 --skip-one-thread \
    --json "$OUT/gpu.json" 2>&1 | tee "$OUT/gpu.log"

echo "## 4. two torch ranks on $(nvidia-smi -L | wc -l) GPU(s)"
BIN=$(python3 -c 'import pathlib, sys; print(pathlib.Path(sys.executable).parent)')
if [ ! -e "$BIN/lcflow" ]; then  # the tests start ranks of lcflow's console script, beside python
    printf '#!%s\nimport sys\nfrom lcflow.cli import main\nsys.exit(main())\n' "$BIN/python3" > "$BIN/lcflow"
    chmod +x "$BIN/lcflow"
fi
timeout 80 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/train/test_presto.py -k two_ranks 2>&1 \
    | tee "$OUT/two_ranks.log" | tail -40

if [ -n "${FOREST:-}" ]; then
    echo "## 5. a seed-size forest's map with its trees as tensors on the GPU, beside the compiled traversal on the CPUs"
    timeout 420 python3 benchmarks/forest_size.py --side 560 --years 2018,2019,2020 --rows 1365000 --leaf 30 --trees 30 \
        --per-class --tensors --compare-block 0 --json "$OUT/forest_tensors.json" 2>&1 | tee "$OUT/forest_tensors.log" | tail -8
fi
