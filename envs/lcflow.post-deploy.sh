#!/usr/bin/env bash
# Run by Snakemake in envs/lcflow.yaml's environment, once it is made: Horovod built against its torch.
# Snakemake runs a copy of this file, so the repository is found from the lcflow it installed (editable).
set -euo pipefail
root=$("$CONDA_PREFIX/bin/python" -c 'import lcflow, pathlib; print(pathlib.Path(lcflow.__file__).resolve().parents[2])')
"$root/envs/build-horovod.sh" "$CONDA_PREFIX/bin/python"
