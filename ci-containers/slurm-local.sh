#!/usr/bin/env bash
# A one-node Slurm on this host, for tests/slurm.rs (srun --mpi=pmix / --mpi=pmi2).
#
#   ci-containers/slurm-local.sh up     # munge key, slurm.conf, start munged, slurmctld, slurmd
#   ci-containers/slurm-local.sh down   # stop the three daemons this script started
#   ci-containers/slurm-local.sh status
#
# Needs root and Debian's packages: apt-get install -y slurmd slurmctld slurm-client munge
# (not in install-deps.sh: Slurm is optional; tests/slurm.rs says "skipped" without it).
# Idempotent: "up" on a running cluster only checks it; state lives in $SLURM_LOCAL_DIR
# (default /tmp/rt-slurm). The node is "localhost" with this host's CPU count, shared
# by any number of tasks (OverSubscribe=FORCE), and the step survives a task's death
# (KillOnBadExit=0; see docs/SLURM.md).
set -euo pipefail

dir=${SLURM_LOCAL_DIR:-/tmp/rt-slurm}
conf=/etc/slurm/slurm.conf
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)

say() { echo "slurm-local: $*"; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null || {
    say "slurmctld, slurmd or munged missing: apt-get install -y slurmd slurmctld slurm-client munge" >&2
    exit 1
  }
  mkdir -p "$dir/spool/d" "$dir/spool/ctld" "$dir/log" /run/munge /var/log/munge /var/lib/munge /etc/munge
  chown -R slurm:slurm "$dir/spool/ctld"
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    say "made /etc/munge/munge.key"
  fi
  chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
  chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
  cat > "$conf.new" <<CONF
# Written by runthrough ci-containers/slurm-local.sh: one node, this host.
ClusterName=rtlocal
SlurmctldHost=localhost
SlurmUser=slurm
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=$dir/spool/ctld
SlurmdSpoolDir=$dir/spool/d
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# A task that dies does not end its step: the others run on (runthrough's point).
KillOnBadExit=0
# 0: srun never kills the remaining tasks after the first one exits.
WaitTime=0
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64
CONF
  if ! cmp -s "$conf.new" "$conf"; then
    [ -f "$conf" ] && cp "$conf" "$conf.before-rt"
    mv "$conf.new" "$conf"
    say "wrote $conf"
  else
    rm "$conf.new"
  fi
  if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- munged
    say "started munged"
  fi
  if ! pid_alive "$dir/slurmctld.pid"; then
    slurmctld -i
    say "started slurmctld"
  fi
  if ! pid_alive "$dir/slurmd.pid"; then
    slurmd
    say "started slurmd"
  fi
  for _ in $(seq 60); do
    state=$(sinfo -h -n localhost -o %t 2>/dev/null || true)
    case "$state" in
      idle|mix|alloc) say "node localhost is $state"; return 0 ;;
      down*|drain*) scontrol update nodename=localhost state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  say "node never became idle (sinfo: ${state:-none}); logs in $dir/log" >&2
  exit 1
}

down() {
  for d in slurmd slurmctld; do
    if pid_alive "$dir/$d.pid"; then
      kill "$(cat "$dir/$d.pid")"
      say "stopped $d"
    fi
  done
  if [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; then
    kill "$(cat /run/munge/munged.pid)"
    say "stopped munged"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) sinfo 2>&1 || true ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
