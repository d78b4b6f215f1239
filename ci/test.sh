#!/usr/bin/env bash
# Every test: the engines' unit and property tests and the command's tests, the shim built for
# MPICH and Open MPI, the ld-preload tests (point-to-point and collectives) natively and under
# the shim with every engine (MPICH; three on Open MPI), the collective tests with MATCHSHIM_COLL=native too, and mpi4py's
# suite under the default engine on both; and the ld-preload tests and two applications across
# network-namespace hosts (Open MPI over TCP).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$(repo_root)"

# The command's tests run the shim built beside it.
build_shim mpich
cargo test --release
build_shim openmpi
ci/ld-preload-tests.sh --mpi mpich --engines "$(engines | tr '\n' ' ')"
# Every engine is pure Rust and MPI-agnostic; on Open MPI the references and the default suffice.
ci/ld-preload-tests.sh --mpi openmpi --engines "list rank col+pnp"
ci/coll-tests.sh --mpi all --engines "col+pnp"
ci/mpi4py.sh --mpi all --engines "col+pnp"
ci/multihost.sh --mpi openmpi
