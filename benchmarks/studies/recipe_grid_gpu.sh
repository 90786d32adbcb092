#!/usr/bin/env bash
# recipe_grid.py's run on a GPU node, in one lease: the fold tables prepared beforehand in TABLES
# (``recipe_grid.py prepare``), the grid in GRID, JOBS fits at a time sharing the GPU, no fit started
# after DEADLINE seconds; GPU use sampled every 30 s. Results and logs go to $OUT. Wheels of packages the
# node lacks (rasterio, for presto's positions) in .whl/.
set -u -o pipefail
OUT=${OUT:-/tmp/recipe_grid}
TABLES=${TABLES:-.gridtables}
GRID=${GRID:-benchmarks/studies/grids/lstm_recipes.json}
JOBS=${JOBS:-12}
DEADLINE=${DEADLINE:-390}
mkdir -p "$OUT"
source "$(dirname "$0")/_carried_wheels.sh"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, numba; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numba', numba.__version__, '$(nproc) cores')"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 30 > "$OUT/gpu_use.csv" &
python3 benchmarks/studies/recipe_grid.py run "$TABLES" --grid "$GRID" --jobs "$JOBS" --deadline "$DEADLINE" \
    --out "$OUT/grid.jsonl" 2> >(grep -v "does not beat the majority" | tail -c 4000 > "$OUT/stderr.log")
kill %1 2>/dev/null
python3 benchmarks/studies/recipe_grid.py summary "$TABLES" "$OUT/grid.jsonl" | tee "$OUT/summary.txt"
cat "$OUT/gpu_use.csv"; tail -5 "$OUT/stderr.log"
