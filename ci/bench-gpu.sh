#!/usr/bin/env bash
# End-to-end long-queue runs for the gpu engine: ci/bench/longqueue natively and under the shim
# with `bins` and `gpu`, at several queue lengths (ci/bench-p2p.sh does the runs and the table).
#
#   ci/bench-gpu.sh [--mpi mpich|openmpi] [--rounds R] [--lengths "1024 16384 65536"]
#
# On a machine without an NVIDIA GPU `gpu` runs its CPU tier (its report says which path ran:
# target/bench/<mpi>/raw/*.report.jsonl, field "gpu"). Tables: target/bench-gpu/<mpi>-N<n>.txt.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MPI=mpich
ROUNDS=3
LENGTHS="1024 16384 65536"
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --mpi) MPI=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --lengths) LENGTHS=${2:?}; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "bench-gpu.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
mkdir -p "$ROOT/target/bench-gpu"
failed=0
for n in $LENGTHS; do
    echo "== longqueue -n $n ($MPI)"
    table=$ROOT/target/bench-gpu/$MPI-N$n.txt
    PINGPONG_ARGS="-s 8 -r 3" LONGQUEUE_ARGS="-n $n -r 3" \
        "$ROOT/ci/bench-p2p.sh" --mpi "$MPI" --engines "bins gpu" --rounds "$ROUNDS" >"$table" 2>&1 ||
        failed=1
    grep -E 'longqueue|^\|' "$table" | grep -v '^round' || tail -5 "$table"
done
exit $failed
