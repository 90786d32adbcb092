#!/bin/sh
# Host discovery for Horovod elastic training inside a Slurm job
# (horovodrun --host-discovery-script workflow/scripts/slurm_hosts.sh --slots N ...).
# Prints one host name per node of the job; horovodrun's --slots gives the slots per host.
# The node list is asked of squeue: inside a Snakemake Slurm job most SLURM_* variables
# (SLURM_JOB_NODELIST among them) are removed before the rule runs, SLURM_JOB_ID is kept.
set -eu
if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "slurm_hosts.sh: SLURM_JOB_ID is not set: run it inside a Slurm job" >&2
    exit 2
fi
nodes=$(squeue -j "$SLURM_JOB_ID" -h -o %N)
if [ -z "$nodes" ]; then
    echo "slurm_hosts.sh: squeue lists no nodes for job $SLURM_JOB_ID" >&2
    exit 1
fi
scontrol show hostnames "$nodes"
