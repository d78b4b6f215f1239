#!/usr/bin/env bash
# Errors that end the program, as a user sees them.
#
#   ci/fatal-tests.sh [--mpi mpich|openmpi|all]
#
# 1. Each program in ld-preload-tests/fatal/ makes one call with a bad argument under the
#    default error handler.  Natively MPI names the call and the value; under the shim the
#    lines that say so (the failed call, the error) must be the same, so that a user sees which
#    call failed and why, not an error of some call the shim made.
# 2. A bad MATCHSHIM_* value stops a 4-rank job with exactly one line, from one rank.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/common.sh

mpis="mpich openmpi"
case "${1:-}" in
    --mpi) case "${2:-}" in all) ;; mpich|openmpi) mpis=$2 ;; *) sed -n '4p' "$0" >&2; exit 2 ;; esac ;;
    "") ;;
    *) sed -n '4p' "$0" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# Every rank's error report (Open MPI aggregates them otherwise).
launch() {
    local mpi=$1 n=$2 cmd
    shift 2
    mapfile -t cmd < <(launcher "$mpi" "$n" help)
    timeout -k 5 30 "${cmd[@]}" "$@"
}

# The lines of an MPI error report that say which call failed with which value and why, with
# what differs from run to run (addresses, process ids, hosts, abort codes) taken out.
key_lines() {
    { grep -E 'failed|error occurred in|MPI_ERR_|[Ii]nvalid' "$1" || true; } |
        sed -E 's/0x[0-9a-f]+/0x?/g; s/\[[^]]*\]//g; s/^Abort\([0-9]+\)[^:]*: //; s/^ +//' |
        { grep -v -E '^\*\*\* reported by process' || true; } | sort -u
}

# Runs a failing program into file $1 (the rest is the launch) until MPI prints its report:
# Open MPI 4.1.4 loses it in about one run of five (ORTE_ERROR_LOG in show_help.c).
reported_run() {
    local out=$1 try
    shift
    for try in 1 2 3; do
        "$@" >"$out" 2>&1 || true
        [ -n "$(key_lines "$out")" ] && return 0
    done
}

record() {
    if [ "$1" = PASS ]; then
        passed=$((passed + 1))
        echo "PASS $2"
    else
        failed=$((failed + 1))
        echo "FAIL $2"
        sed 's/^/    | /' "$3" | head -20
    fi
}

for mpi in $mpis; do
    lib=$(shim_lib_for "$mpi")
    for src in ld-preload-tests/fatal/*.c; do
        prog=$(basename "$src" .c)
        bin="$tmp/$mpi.$prog"
        "$(mpicc_for "$mpi")" -O1 -o "$bin" "$src"
        # One rank: when several abort at once, both MPIs sometimes lose their own report.
        reported_run "$tmp/native" launch "$mpi" 1 "$bin"
        reported_run "$tmp/shim" launch "$mpi" 1 env LD_PRELOAD="$lib" "$bin"
        key_lines "$tmp/native" >"$tmp/native.keys"
        key_lines "$tmp/shim" >"$tmp/shim.keys"
        missing=$(comm -23 "$tmp/native.keys" "$tmp/shim.keys")
        if [ ! -s "$tmp/native.keys" ]; then
            record FAIL "$mpi $prog: the native run reported no error" "$tmp/native"
        elif [ -n "$missing" ]; then
            echo "$missing" >"$tmp/missing"
            { echo "missing under the shim:"; cat "$tmp/missing"; echo "the shim's output:"; cat "$tmp/shim"; } >"$tmp/why"
            record FAIL "$mpi $prog: the shim's report differs from MPI's" "$tmp/why"
        else
            record PASS "$mpi $prog ($(head -n 1 "$tmp/native.keys"))"
        fi
    done

    bin="$tmp/$mpi.invalid_rank"
    rc=0
    launch "$mpi" 4 env LD_PRELOAD="$lib" MATCHSHIM_ENGINE=bogus "$bin" >"$tmp/config" 2>&1 || rc=$?
    lines=$(grep -c '^matchshim: ' "$tmp/config" || true)
    if [ "$rc" != 0 ] && [ "$lines" = 1 ] && grep -q 'MATCHSHIM_ENGINE="bogus"' "$tmp/config"; then
        record PASS "$mpi a bad MATCHSHIM_ENGINE stops 4 ranks with one line"
    else
        record FAIL "$mpi a bad MATCHSHIM_ENGINE: exit $rc, $lines lines from the shim" "$tmp/config"
    fi
done

echo "fatal-tests: $passed passed, $failed failed"
[ "$failed" = 0 ]
