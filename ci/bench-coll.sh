#!/usr/bin/env bash
# Collective benchmarks (ci/bench/coll.c) on MPICH:
#  1. latency of Bcast, Allreduce, Gather, Allgather, Alltoall at 8 B, 1 KiB, 64 KiB: natively,
#     under the shim with MATCHSHIM_COLL=native, and under the shim running them itself;
#  2. the FDS-like hot spot (gathers to rank 0 interleaved with point-to-point traffic to it):
#     rank 0's search depth and matching time from the report, engine by engine.
#   ci/bench-coll.sh [-n RANKS] [--hotspot-ranks "8 16"] [--engines "list rank"] [--iters N]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
cd "$root"
ranks=8
hot_ranks="8 16"
engines="list rank"
iters=200
while [ $# -gt 0 ]; do
    case "$1" in
        -n) ranks=$2; shift 2 ;;
        --hotspot-ranks) hot_ranks=$2; shift 2 ;;
        --engines) engines=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        *) sed -n '7p' "$0" >&2; exit 2 ;;
    esac
done
build_shim mpich
lib=$(shim_lib_for mpich)
out=target/bench-coll
mkdir -p "$out"
mpicc.mpich -O2 -Wall -Wno-stringop-overflow -o "$out/coll" ci/bench/coll.c
run() {
    local n=$1 cmd
    shift
    mapfile -t cmd < <(launcher mpich "$n" shm env:MPIR_CVAR_POLLS_BEFORE_YIELD=100)
    timeout -k 5 600 "${cmd[@]}" "$@"
}

echo "== latency, $ranks ranks, us per call (slowest rank's mean)"
run "$ranks" "$out/coll" latency "$iters" > "$out/native.txt"
run "$ranks" env LD_PRELOAD="$lib" MATCHSHIM_COLL=native "$out/coll" latency "$iters" > "$out/coll-native.txt"
run "$ranks" env LD_PRELOAD="$lib" MATCHSHIM_COLL=shim "$out/coll" latency "$iters" > "$out/coll-shim.txt"
python3 - "$out" <<'PY'
import sys
def load(name):
    rows = {}
    for line in open(f"{sys.argv[1]}/{name}.txt"):
        kv = dict(f.split("=", 1) for f in line.split())
        rows[(kv["coll"], int(kv["bytes"]))] = float(kv["us"])
    return rows
native, cnative, cshim = load("native"), load("coll-native"), load("coll-shim")
print(f"{'collective':<10} {'bytes':>6} {'MPI':>10} {'shim+COLL=native':>17} {'shim+COLL=shim':>15} {'shim/native':>11}")
for key in native:
    print(f"{key[0]:<10} {key[1]:>6} {native[key]:>10.1f} {cnative[key]:>17.1f} {cshim[key]:>15.1f} "
          f"{cshim[key] / cnative[key]:>11.2f}")
PY

for n in $hot_ranks; do
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
PY
    done
done
