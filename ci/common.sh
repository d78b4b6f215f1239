# Shared by the ci/ scripts: where each MPI's tools and shim build live.
# shellcheck shell=bash

repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

mpicc_for() { case "$1" in mpich) echo mpicc.mpich ;; openmpi) echo mpicc.openmpi ;; *) return 1 ;; esac; }

# The shim built for MPI $1 (one target directory per MPI: bindings differ by ABI).
shim_lib_for() {
    case "$1" in
        mpich) echo "$(repo_root)/target/release/libmatchshim.so" ;;
        openmpi) echo "$(repo_root)/target/openmpi/release/libmatchshim.so" ;;
    esac
}

build_shim() {
    local mpi=$1 root
    root=$(repo_root)
    case "$mpi" in
        mpich) (cd "$root" && MPICC=mpicc.mpich cargo build --release --quiet) ;;
        openmpi) (cd "$root" && MPICC=mpicc.openmpi CARGO_TARGET_DIR=target/openmpi cargo build --release --quiet) ;;
    esac
}

# mpiexec for MPI $1 with N ranks on this (oversubscribed) machine; the rest is the command.
mpirun_for() {
    local mpi=$1 n=$2
    shift 2
    case "$mpi" in
        mpich) mpiexec.mpich -n "$n" "$@" ;;
        openmpi) mpiexec.openmpi --allow-run-as-root --oversubscribe -n "$n" "$@" ;;
    esac
}

engines() { grep -v '^#' "$(repo_root)/ci/engines"; }
