#!/usr/bin/env bash
# The main job: build the shim, run the demo MPI program natively and under the shim with two
# engines, and print each run's matching report.
#   ci/demo.sh [--mpi mpich|openmpi] [-n RANKS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
mpi=mpich
ranks=4
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) mpi=$2; shift 2 ;;
        -n) ranks=$2; shift 2 ;;
        *) echo "usage: $0 [--mpi mpich|openmpi] [-n RANKS]" >&2; exit 2 ;;
    esac
done
root=$(repo_root)
build_shim "$mpi"
lib=$(shim_lib_for "$mpi")
out="$root/target/demo/$mpi"
mkdir -p "$out"
"$(mpicc_for "$mpi")" -O2 -Wno-stringop-overflow "$root/ld-preload-tests/demo.c" -o "$out/demo"

echo "== native $mpi, $ranks ranks"
mpirun_for "$mpi" "$ranks" "$out/demo"
for engine in list rank; do
    report="$out/report-$engine.jsonl"
    rm -f "$report"
    echo "== under matchshim, engine $engine"
    mpirun_for "$mpi" "$ranks" env LD_PRELOAD="$lib" MATCHSHIM_ENGINE="$engine" \
        MATCHSHIM_REPORT="$report" MATCHSHIM_VERBOSE=1 "$out/demo"
    python3 - "$report" <<'PY'
import json, sys
rows = sorted((json.loads(line) for line in open(sys.argv[1])), key=lambda r: r["rank"])
print(f"{'rank':>4} {'matches':>8} {'unexp':>6} {'PRQ mean':>9} {'PRQ max':>8} "
      f"{'UMQ mean':>9} {'UMQ max':>8} {'queues':>7} {'match us':>9}")
for r in rows:
    p = r["point_to_point"]
    print(f"{r['rank']:>4} {p['matches']:>8} {p['unexpected']:>6} {p['prq']['mean_depth']:>9.2f} "
          f"{p['prq']['max_depth']:>8} {p['umq']['mean_depth']:>9.2f} {p['umq']['max_depth']:>8} "
          f"{r['queues_max']:>7} {r['match_time_ns'] / 1000:>9.1f}")
PY
done
