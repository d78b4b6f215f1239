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

# Builds the shim and the command for MPI $1, showing cargo's progress.
build_shim() {
    local mpi=$1 root
    root=$(repo_root)
    case "$mpi" in
        mpich) (cd "$root" && MPICC=mpicc.mpich cargo build --release) ;;
        openmpi) (cd "$root" && MPICC=mpicc.openmpi CARGO_TARGET_DIR=target/openmpi cargo build --release) ;;
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

# True if the shim report $1 (MATCHSHIM_REPORT) holds a line from each of ranks 0..$2-1, all
# with engine $3: a shim run whose preload was dropped, or whose MPI calls bypassed the shim,
# cannot pass as a native one. With a fourth argument `matched`, the engines also matched
# messages (point-to-point or collective) on some rank.
shim_ran() {
    python3 - "$@" <<'EOF'
import json, sys
try:
    reps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except (OSError, ValueError):
    sys.exit(1)
n = int(sys.argv[2])
ok = {r.get("rank") for r in reps if r.get("size") == n} == set(range(n))
ok = ok and all(r.get("engine") == sys.argv[3] for r in reps)
if sys.argv[4:] == ["matched"]:
    ok = ok and sum(r["point_to_point"]["matches"] + r["collective"]["matches"] for r in reps) > 0
sys.exit(0 if ok else 1)
EOF
}
