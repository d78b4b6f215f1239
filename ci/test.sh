#!/usr/bin/env bash
# Every test: the engines' unit and property tests, the shim built for MPICH and Open MPI, the
# ld-preload and collective tests natively and under the shim with every engine, and mpi4py's
# suite.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$(repo_root)"

cargo test --release
build_shim mpich
build_shim openmpi
ci/ld-preload-tests.sh --mpi all --engines "$(engines | tr '\n' ' ')"
ci/coll-tests.sh --mpi all --engines "$(engines | tr '\n' ' ')"
ci/mpi4py.sh --mpi all
