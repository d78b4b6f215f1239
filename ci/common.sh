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

# The one launcher of the ci/ scripts: prints, one word a line, the command that starts N ranks
# of MPI $1 on this (oversubscribed) machine with the settings asked for, each in that MPI's
# own words; the program and its arguments follow it.
#   launcher MPI N [SETTING...]
#   shm             shared-memory transports only (MPICH: UCX on self,sm; Open MPI: ob1 over
#                   self,vader)
#   unbound         no rank bound to a core (Open MPI binds by default; MPICH's hydra does not)
#   yield           Open MPI's idle ranks yield their core (MPICH's: env:MPIR_CVAR_POLLS_...)
#   help            Open MPI prints every rank's help message instead of aggregating them
#   env:NAME=VALUE  in every rank's environment
# $CI_LAUNCHER, when set, is the launcher instead (a command that takes `-n N` and the program,
# words split on blanks): ci/multihost.sh spreads the ranks over hosts with it.
# Use: `mapfile -t cmd < <(launcher mpich 2 shm); timeout 20 "${cmd[@]}" ./program`.
launcher() {
    local mpi=$1 n=$2 setting words=()
    shift 2
    if [ -n "${CI_LAUNCHER:-}" ]; then
        read -ra words <<<"$CI_LAUNCHER"
        printf '%s\n' "${words[@]}" -n "$n"
        return
    fi
    case "$mpi" in
        mpich) words=(mpiexec.mpich -n "$n") ;;
        openmpi) words=(mpiexec.openmpi --allow-run-as-root --oversubscribe -n "$n") ;;
        *) echo "launcher: unknown MPI $mpi" >&2; return 2 ;;
    esac
    for setting in "$@"; do
        case "$mpi:$setting" in
            mpich:shm) words+=(-genv UCX_TLS self,sm) ;;
            openmpi:shm) words+=(--mca pml ob1 --mca btl self,vader) ;;
            openmpi:unbound) words+=(--bind-to none) ;;
            openmpi:yield) words+=(--mca mpi_yield_when_idle 1) ;;
            openmpi:help) words+=(--mca orte_base_help_aggregate 0) ;;
            mpich:unbound | mpich:yield | mpich:help) ;;
            mpich:env:*=*) setting=${setting#env:}; words+=(-genv "${setting%%=*}" "${setting#*=}") ;;
            openmpi:env:*=*) words+=(-x "${setting#env:}") ;;
            *) echo "launcher: unknown setting $setting" >&2; return 2 ;;
        esac
    done
    printf '%s\n' "${words[@]}"
}

engines() { grep -v '^#' "$(repo_root)/ci/engines"; }

# True if the shim report $1 (MATCHSHIM_REPORT) holds a line from each of ranks 0..$2-1, all
# with engine $3: a shim run whose preload was dropped, or whose MPI calls bypassed the shim,
# cannot pass as a native one. With a fourth argument `matched`, the engines also matched
# messages (point-to-point or collective) on some rank. In awk, not Python: the tests call it
# after every run, and an interpreter's start would cost minutes over a CI run. The report's
# lines keep their keys in the schema's order, so the first of a name is the top level's, and
# a line that is not one of them fails the check.
shim_ran() {
    [ -f "$1" ] && awk -v n="$2" -v engine="$3" -v want="${4:-}" '
        # The text after the first `"key":` in s (a number there reads as one).
        function value(s, key,    i) {
            i = index(s, "\"" key "\":")
            return i ? substr(s, i + length(key) + 3) : ""
        }
        # The string that v starts with.
        function text(v) {
            v = substr(v, 2)
            return substr(v, 1, index(v, "\"") - 1)
        }
        {
            if (index($0, "{\"matchshim\":") != 1) { bad = 1; next }
            if (text(value($0, "engine")) != engine) bad = 1
            if (value($0, "size") + 0 == n) seen[value($0, "rank") + 0] = 1
            matched += value(value($0, "point_to_point"), "matches") + value(value($0, "collective"), "matches")
        }
        END {
            if (bad) exit 1
            for (r in seen) if (r + 0 < 0 || r + 0 >= n) exit 1
            for (r = 0; r < n; r++) if (!(r in seen)) exit 1
            exit (want == "matched" && matched == 0)
        }' "$1"
}
