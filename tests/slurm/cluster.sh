#!/usr/bin/env bash
# A real Slurm on this host for the tests: munge, slurmctld and two virtual nodes (slurmd -N n1, n2).
#
#   tests/slurm/cluster.sh start DIR   write DIR/slurm.conf, start the daemons, wait until both nodes are idle
#   tests/slurm/cluster.sh stop DIR    stop the daemons started for DIR
#
# Clients find the cluster with SLURM_CONF=DIR/slurm.conf. Ports are picked free, so another Slurm on
# the machine is left alone. Needs root (slurmd runs jobs as their user) and the Debian packages
# slurm-wlm and munge. Every path a daemon writes is under DIR, per node where it must be (%n).
set -euo pipefail

cmd=${1:?usage: cluster.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: cluster.sh start|stop DIR}")
cpus=${LCFLOW_SLURM_CPUS:-8}   # per virtual node; slurmd takes it from slurm.conf (config_overrides)
mem=${LCFLOW_SLURM_MEM_MB:-16000}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return  # a munged already answers
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && { echo munge > "$dir/started-munge"; return; }
        sleep 0.1
    done
    echo "cluster.sh: munged did not come up" >&2
    exit 1
}

start() {
    mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/tmp/n1" "$dir/tmp/n2"
    local ctld n1 n2
    ctld=$(free_port); n1=$(free_port); n2=$(free_port)
    cat > "$dir/slurm.conf" <<CONF
ClusterName=lcflowtest
SlurmctldHost=localhost
SlurmctldPort=$ctld
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
# per node: srun --mpi=pmix puts its client directory (spmix_appdir_<job>.<step>) under TmpFS, and two
# virtual nodes of one host would otherwise both create it in /tmp and fail
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=300
SchedulerType=sched/backfill
# configless: the Slurm executor's job step removes SLURM_CONF before a rule's own srun, which then
# finds the configuration through the slurmd's cache (/run/slurm/conf)
SlurmctldParameters=enable_configless
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n2 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$dir/slurm.conf"
    start_munge
    /usr/sbin/slurmctld -f "$SLURM_CONF"
    /usr/sbin/slurmd --conf-server "localhost:$ctld" -N n1
    /usr/sbin/slurmd --conf-server "localhost:$ctld" -N n2
    for _ in $(seq 300); do
        if [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" = 2 ]; then
            echo "cluster.sh: Slurm up at $SLURM_CONF (nodes n1, n2 idle)"
            return
        fi
        sleep 0.2
    done
    echo "cluster.sh: nodes not idle after 60 s:" >&2
    sinfo -N >&2 || true
    tail -20 "$dir"/log/*.log >&2 || true
    exit 1
}

stop() {
    local pidfile pids=()
    for pidfile in "$dir"/slurmd-n1.pid "$dir"/slurmd-n2.pid "$dir"/slurmctld.pid; do
        [ -s "$pidfile" ] && pids+=("$(cat "$pidfile")")
    done
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "${pids[@]}" 2>/dev/null || break
        sleep 0.1
    done
    [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[@]}" 2>/dev/null || true
    case "$(readlink /run/slurm/conf 2>/dev/null)" in "$dir"/*) rm -f /run/slurm/conf ;; esac
    if [ -e "$dir/started-munge" ]; then
        pkill -u munge munged 2>/dev/null || true
        rm -f "$dir/started-munge"
    fi
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
