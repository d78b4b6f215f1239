#!/usr/bin/env bash
# Instructions, not time: one rank of an MPI program under callgrind, natively and under the
# shim, counted from the end of MPI_Init to MPI_Finalize.
#
#   ci/callgrind.sh [--mpi mpich|openmpi] [-n N] [--rank R] [--per CALL] [--lib SO] PROGRAM [ARG...]
#
# Runs PROGRAM on N ranks (default 2) of the MPI (default mpich), rank R (default 1) under
# valgrind's callgrind, once natively and once with the shim preloaded (MATCHSHIM_* variables
# set here apply to it), and prints for that rank: its instructions natively and under the
# shim, the shim's own (every line of libmatchshim.so, inlined code included), and the shim's
# functions with their calls and instructions per call. --per CALL (an MPI function, as
# MPI_Recv) also divides the shim's own and the difference by the program's calls to it.
# --lib SO preloads that build of the shim (another commit's, for a comparison) instead of
# this checkout's.
# Polling loops run as often as timing makes them, so whole-rank counts move from run to run;
# the shim's own per call does not. Not counted: __tls_get_addr (ld.so's) and MPI's code the
# shim calls. Needs valgrind; files under target/callgrind/<mpi>/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/ci/common.sh"

mpi=mpich n=2 rank=1 per=() lib=
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --mpi) mpi=${2:?}; shift 2 ;;
        -n) n=${2:?}; shift 2 ;;
        --rank) rank=${2:?}; shift 2 ;;
        --per) per=("${2:?}"); shift 2 ;;
        --lib) lib=${2:?}; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "callgrind.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || usage 2 >&2
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[ -n "$lib" ] || lib=$(shim_lib_for "$mpi") || true
[ -f "${lib:-}" ] || { echo "callgrind.sh: no shim built for $mpi (${lib:-}); see README" >&2; exit 2; }
out=$ROOT/target/callgrind/$mpi
mkdir -p "$out"
rm -f "$out"/native "$out"/native.* "$out"/shim "$out"/shim.*

# The rank the launcher gives each process, whichever MPI started it.
wrapper=$out/rank-under-callgrind.sh
cat >"$wrapper" <<'EOF'
#!/bin/sh
r=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-}}
[ "$r" = "$CALLGRIND_RANK" ] || exec "$@"
exec valgrind --tool=callgrind --dump-after='*MPI_Init' --dump-after='*MPI_Init_thread' \
    --dump-before='*MPI_Finalize' \
    --callgrind-out-file="$CALLGRIND_OUT" "$@" 2>"$CALLGRIND_OUT.log"
EOF
chmod +x "$wrapper"

run() { # NAME PRELOAD
    local settings=(env:CALLGRIND_RANK="$rank" env:CALLGRIND_OUT="$out/$1")
    [ -z "$2" ] || settings+=(env:LD_PRELOAD="$2")
    mapfile -t cmd < <(launcher "$mpi" "$n" "${settings[@]}")
    timeout 600 "${cmd[@]}" "$wrapper" "${program[@]}" >"$out/$1.stdout" 2>&1 || {
        echo "callgrind.sh: the $1 run failed; see $out/$1.stdout" >&2
        exit 1
    }
}
program=("$@")
run native ""
run shim "$lib"
python3 "$ROOT/ci/callgrind-count.py" "$out/native" "$out/shim" "${per[@]}"
