#!/usr/bin/env bash
# The main job: build the shim, run the demo MPI program natively and under the shim with two
# engines (through the matchshim command), and print each run's matching report.
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

# The matchshim command is built beside the shim.
matchshim="$(dirname "$lib")/matchshim"

echo "== native $mpi, $ranks ranks"
mpirun_for "$mpi" "$ranks" "$out/demo"
for engine in list col+pnp; do
    echo "== under matchshim, engine $engine"
    MATCHSHIM_VERBOSE=1 "$matchshim" run --mpi "$mpi" --lib "$lib" --engine "$engine" \
        --out "$out/$engine" --ranks -n "$ranks" -- "$out/demo"
done
