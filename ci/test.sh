#!/usr/bin/env bash
# Every test: the unit, property and model tests of the engines and the command's tests; the
# exported symbols against the list of intercepted calls; the shim built for MPICH and Open MPI,
# installed into a prefix and run from there; errors as a user sees them; the ld-preload
# programs (C and Fortran) natively and under the shim with every engine on both MPIs while the
# shim matches everything (MATCHSHIM_TAKEOVER=always), the matching programs once more with
# every gpu burst and wildcard search through its kernels' host build, and with the default
# engine while matching goes back and forth between MPI and the shim (auto, flip:3); the
# collective tests in both of those modes, each with the shim running every collective
# (MATCHSHIM_COLL=shim), as it comes (auto) and with MATCHSHIM_COLL=native; the fuzzer's recorded
# regressions, its seeds 1 to 400 on each MPI against native, 100 more with two threads a rank
# at MPI_THREAD_MULTIPLE and 100 on communicators making MPI-4 matching assertions; mpi4py's
# suite on both MPIs under auto and flip:3; the ld-preload tests and two applications across
# network-namespace hosts (Open MPI over TCP); and a counting PMPI tool beside the shim in both
# orders. Installs the Debian packages it needs first (ci/packages.sh).
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/packages.sh"
cd "$(repo_root)"
# Each step says how long it took: the whole run has a budget.
step() {
    local t0=$SECONDS what="$*"
    "$@"
    echo "== ${what:0:70}: $((SECONDS - t0)) s (total $SECONDS s)"
}
step install_packages

# The command's tests run the shim built beside it, and Open MPI's for its launcher.
step build_shim mpich
step build_shim openmpi
step cargo test --release
# The exported symbols of both shims are those crates/shim/calls.list lists.
step ci/calls-test.sh --mpi all
# ci/callgrind.sh's counter reads callgrind's file as callgrind writes it.
step python3 ci/callgrind-count.py --self-test
# The gpu engine's kernels compile to PTX (NVRTC from PyPI; no GPU needed).
step ci/gpu-ptx.sh
# The installed command and both shims, with the source tree out of reach.
step ci/install-test.sh
step ci/fatal-tests.sh --mpi all
step ci/ld-preload-tests.sh --mpi all --engines "$(engines | tr '\n' ' ')" --takeover always
step env MATCHSHIM_GPU_BURST=1 MATCHSHIM_GPU_SCAN=1 ci/ld-preload-tests.sh --mpi all --engines gpu \
    --takeover always --only "p2p_burst p2p_order p2p_probe p2p_cancel p2p_comms p2p_threads f08_p2p"
step ci/ld-preload-tests.sh --mpi all --engines "col+pnp" --takeover "auto flip:3"
step ci/coll-tests.sh --mpi all --engines "col+pnp"
# Beside a PMPI tool, in both orders and under `matchshim run`, C and Fortran.
step ci/stack-tests.sh --mpi all
step env MATCHSHIM_TAKEOVER=flip:3 ci/coll-tests.sh --mpi all --engines "col+pnp"
step ci/fuzz.sh --mpi all --regressions
step ci/fuzz.sh --mpi all --seeds 400
step ci/fuzz.sh --mpi all --seeds 100 --from 100000 --threads 2
step ci/fuzz.sh --mpi all --seeds 100 --from 200000 --asserts
step ci/mpi4py.sh --mpi all --engines "col+pnp" --takeover "auto flip:3"
step ci/multihost.sh --mpi openmpi
