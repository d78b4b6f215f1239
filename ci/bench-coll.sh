#!/usr/bin/env bash
# Collective benchmarks (ci/bench/coll.c), natively and under the shim, alternating, same run:
#  1. latency of Bcast, Allreduce, Reduce, Gather, Scatter, Allgather, Alltoall at 8 B, 1 KiB,
#     64 KiB, and of Barrier: natively, under the shim as it comes (MATCHSHIM_COLL=auto) and
#     with the shim running every collective (MATCHSHIM_COLL=shim); medians over the rounds;
#  2. Comm_split + Comm_dup + a barrier + both freed, the same three ways, and 1020 splits kept
#     alive while a receive waits on a freed duplicate, then freed (per split, per free);
#  3. the FDS-like hot spot (gathers to rank 0 interleaved with point-to-point traffic to it):
#     time per iteration natively and under the three collective modes, then rank 0's search
#     depth and matching time from the report, engine by engine (default collective mode).
#   ci/bench-coll.sh [--mpi mpich|openmpi] [-n RANKS] [--rounds R] [--hotspot-ranks "8 16"]
#                    [--engines "list rank"] [--iters N] [--only latency|comms|hotspot]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
cd "$root"
mpi=mpich
ranks=8
rounds=3
hot_ranks="8 16"
engines="list rank"
iters=200
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) mpi=$2; shift 2 ;;
        -n) ranks=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --hotspot-ranks) hot_ranks=$2; shift 2 ;;
        --engines) engines=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        *) sed -n '10,11p' "$0" >&2; exit 2 ;;
    esac
done
build_shim "$mpi"
lib=$(shim_lib_for "$mpi")
out=target/bench-coll/$mpi
mkdir -p "$out"
"$(mpicc_for "$mpi")" -O2 -Wall -Wno-stringop-overflow -o "$out/coll" ci/bench/coll.c
run() {
    local n=$1 cmd
    shift
    mapfile -t cmd < <(launcher "$mpi" "$n" shm unbound yield env:MPIR_CVAR_POLLS_BEFORE_YIELD=100)
    timeout -k 5 600 "${cmd[@]}" "$@"
}
# One run of the benchmark in a mode: native, or the shim with MATCHSHIM_COLL=<mode>.
run_mode() {
    local mode=$1 n=$2
    shift 2
    case "$mode" in
        native) run "$n" "$out/coll" "$@" ;;
        *) run "$n" env LD_PRELOAD="$lib" MATCHSHIM_COLL="$mode" "$out/coll" "$@" ;;
    esac
}
# Medians of `us` per measurement over rounds, a column per mode, with ratios to native.
table() {
    python3 - "$out" "$1" "$rounds" <<'PY'
import statistics, sys
out, bench, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
modes = ["native", "auto", "shim"]
rows = {}
for mode in modes:
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{bench}-{mode}-{r}.txt"):
            kv = dict(f.split("=", 1) for f in line.split())
            key = (kv.get("coll", bench), int(kv.get("bytes", 0)))
            us = float(kv.get("us", kv.get("us_per_iter", 0)))
            rows.setdefault(key, {}).setdefault(mode, []).append(us)
print(f"{'call':<10} {'bytes':>6} {'native':>9} {'auto':>9} {'shim':>9} {'auto/nat':>9} {'shim/nat':>9}")
for key, m in rows.items():
    med = {k: statistics.median(v) for k, v in m.items()}
    print(f"{key[0]:<10} {key[1]:>6} {med['native']:>9.2f} {med['auto']:>9.2f} {med['shim']:>9.2f} "
          f"{med['auto'] / med['native']:>9.2f} {med['shim'] / med['native']:>9.2f}")
PY
}
# R rounds of native, auto, shim in turn.
alternate() {
    local bench=$1 n=$2
    shift 2
    for r in $(seq "$rounds"); do
        for mode in native auto shim; do
            run_mode "$mode" "$n" "$@" > "$out/$bench-$mode-$r.txt"
        done
    done
}

echo "== $mpi, load: $(uptime | sed 's/.*load average: //')"
if [ -z "$only" ] || [ "$only" = latency ]; then
    echo "== latency, $ranks ranks, us per call (slowest rank's mean; median of $rounds rounds)"
    alternate latency "$ranks" latency "$iters"
    table latency
fi
if [ -z "$only" ] || [ "$only" = comms ]; then
    echo "== Comm_split + Comm_dup + barrier + 2 Comm_free, $ranks ranks, us per iteration"
    alternate comms "$ranks" comms "$iters"
    table comms
    echo "== 1020 Comm_splits held while a receive waits, then freed, $ranks ranks, us per call"
    alternate held "$ranks" held 1020
    table held
fi
[ -z "$only" ] || [ "$only" = hotspot ] || exit 0
for n in $hot_ranks; do
    echo "== hot spot, $n ranks, us per iteration"
    alternate hotspot "$n" hotspot 50
    table hotspot
    echo "== hot spot, $n ranks: rank 0's matching (mean/max elements inspected per search)"
    printf '%-7s %-14s %10s %10s %10s %12s %10s\n' engine traffic "PRQ mean" "UMQ mean" "UMQ max" "match ms" "us/iter"
    for engine in $engines; do
        report="$out/hotspot-$n-$engine.jsonl"
        rm -f "$report"
        line=$(run "$n" env LD_PRELOAD="$lib" MATCHSHIM_ENGINE="$engine" MATCHSHIM_REPORT="$report" \
            "$out/coll" hotspot 50)
        python3 - "$report" "$engine" "$line" <<'PY'
import json, sys
r0 = next(r for r in map(json.loads, open(sys.argv[1])) if r["rank"] == 0)
us = dict(f.split("=", 1) for f in sys.argv[3].split())["us_per_iter"]
for t in ("point_to_point", "collective"):
    x = r0[t]
    print(f"{sys.argv[2]:<7} {t:<14} {x['prq']['mean_depth']:>10.2f} {x['umq']['mean_depth']:>10.2f} "
          f"{x['umq']['max_depth']:>10} {x['match_time_ns'] / 1e6:>12.3f} {us:>10}")
ran = {k: (c["calls"], c.get("mpi_calls", 0)) for k, c in r0.get("collectives", {}).items()}
print(f"{sys.argv[2]:<7} calls (shim, MPI): {ran}")
PY
    done
done
