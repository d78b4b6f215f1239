#!/usr/bin/env bash
# Every test: the engines' unit and property tests and the command's tests, the shim built for
# MPICH and Open MPI, the ld-preload tests (point-to-point and collectives) natively and under
# the shim with every engine, the collective tests with MATCHSHIM_COLL=native too, and mpi4py's
# suite under the default engine.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$(repo_root)"

cargo test --release
build_shim mpich
build_shim openmpi
ci/ld-preload-tests.sh --mpi all --engines "$(engines | tr '\n' ' ')"
ci/coll-tests.sh --mpi all --engines "col+pnp"
# test_ulfm's testIAgree fails under the shim (see README, Known limits).
MPI4PY_ARGS="-e test_ulfm" ci/mpi4py.sh --mpi mpich --engines "col+pnp"
