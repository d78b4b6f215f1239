#!/usr/bin/env bash
# Differential fuzzing: random, deadlock-free MPI programs (ci/fuzz/fuzz.c) generated from
# seeds, run natively and under the shim, their outcomes compared (ci/fuzz/driver.py).
#
# Usage: ci/fuzz.sh --mpi mpich|openmpi|all --seeds N [--from S] [--configs CONFIG ...]
#            [--all-configs] [--per-seed K] [--counts] [--no-minimise] [--threads T] [--asserts]
#        ci/fuzz.sh --mpi mpich|openmpi --replay SEED [--config CONFIG] [--units LIST]
#            [--threads T] [--asserts]
#        ci/fuzz.sh --mpi mpich|openmpi|all --regressions
#
# CONFIG is ENGINE/TAKEOVER/COLL (e.g. col+pnp/flip:3/shim) or native; TAKEOVER auto:D is auto
# with MATCHSHIM_TAKEOVER_DEPTH=D. Seed S runs with 2 + S % 3 ranks. By default the seeds are
# spread over one configuration per engine, the takeover modes (auto always flip:1 flip:2 flip:3
# flip:7 auto:1) and MATCHSHIM_COLL (auto shim native) turning with them, col+pnp with the
# defaults; --all-configs spreads them over every combination. A divergence prints the command
# that replays it (minimised to the units that still fail). --regressions replays the seeds in
# ci/fuzz/regressions. --threads T: MPI_THREAD_MULTIPLE, T threads a rank running plans at once
# (docs/testing.md). --asserts: the seeds' communicators make MPI-4 matching assertions
# (mpi_assert_no_any_source, _no_any_tag, _allow_overtaking), which their traffic keeps.
# Builds the shims first if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/common.sh
for mpi in mpich openmpi; do
    [ -f "$(shim_lib_for "$mpi")" ] || build_shim "$mpi" >&2
done
exec python3 ci/fuzz/driver.py "$@"
