#!/usr/bin/env bash
# The Snakemake controller of a long run as a light Slurm job, where the login node does not keep a
# process for days (docs/slurm.md, "Running for days"). From the study's folder, the environment lcflow
# is installed in activated and the site values set:
#   sbatch -A ACCOUNT -p PARTITION -t 1-00:00:00 profiles/slurm/controller.sh --configfile config/my_tiles.yaml
# Its arguments go to snakemake, which submits the workflow's jobs from this job and waits for them.
# Five minutes before its time limit it hands over: Snakemake cancels the jobs it submitted (SIGINT) and
# ends, and the next controller, submitted with the same account, partition, time limit and arguments,
# starts once this one has ended; it plans what is left (training resumes from its last checkpoint).
# The chain ends when a controller's snakemake ends by itself, done or failed; `scancel` of a controller
# cancels the jobs it submitted as well.
#SBATCH --job-name=lcflow-controller
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=4000
#SBATCH --output=lcflow-controller-%j.log
#SBATCH --signal=B:USR1@300
set -euo pipefail
# LCFLOW_SNAKEMAKE: another snakemake command (the tests' tests/slurm/snakemake_prompt.py);
# LCFLOW_PROFILE: the profile folder, relative to the folder sbatch was run in
read -r -a snakemake <<< "${LCFLOW_SNAKEMAKE:-snakemake}"
# this script as submitted (Slurm runs a copy of it)
script=${LCFLOW_CONTROLLER:-$(scontrol show job "$SLURM_JOB_ID" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')}
export LCFLOW_CONTROLLER=$script

# its jobs' names start with this (squeue -o %j): those Snakemake may miss when it cancels are found by it
prefix="lcflow-c${SLURM_JOB_ID}"
interrupted=0

# Snakemake cancels the jobs it tracks; one whose status it was checking at that moment is not in its list
# (snakemake-interface-executor-plugins' check loop takes the list while it asks Slurm): those go too
cancel_left() {
  local left
  left=$(squeue -h -u "$(id -un)" -o "%i %j" | awk -v p="${prefix}_" 'index($2, p) == 1 {print $1}')
  if [ -n "$left" ]; then
    echo "lcflow controller $SLURM_JOB_ID: cancelling its jobs still queued: $(echo $left)"
    # shellcheck disable=SC2086
    scancel $left || true
  fi
}

handover() {
  interrupted=1
  echo "lcflow controller $SLURM_JOB_ID: its time limit is near: the jobs it submitted are cancelled, the next controller follows"
  next=$(sbatch --parsable -A "$SLURM_JOB_ACCOUNT" -p "$SLURM_JOB_PARTITION" \
    -t "$(squeue -h -j "$SLURM_JOB_ID" -o %l)" --dependency="afterany:$SLURM_JOB_ID" "$script" "$@")
  echo "lcflow controller $SLURM_JOB_ID: next controller: job $next"
  kill -INT "$pid"
}

# job control on: a background command of a shell without it ignores SIGINT, which hands over
set -m
"${snakemake[@]}" --profile "${LCFLOW_PROFILE:-profiles/slurm}" --slurm-jobname-prefix "$prefix" "$@" &
pid=$!
trap 'handover "$@"' USR1
# scancel of the controller: its jobs are cancelled too, and no controller follows
trap 'interrupted=1; kill -INT "$pid"' TERM
# wait returns early when the signal arrives: wait again until snakemake has ended
while true; do
  status=0
  wait "$pid" || status=$?
  if ! kill -0 "$pid" 2>/dev/null; then
    [ "$interrupted" = 0 ] || cancel_left
    exit "$status"
  fi
done
