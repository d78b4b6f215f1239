#!/usr/bin/env bash
# Runs the MPI programs in ld-preload-tests/ (C, and Fortran with mpif.h, `use mpi` and
# `use mpi_f08`) natively and with libmatchshim.so preloaded, under MPICH and Open MPI, and
# compares the results.
#
# Usage: ci/ld-preload-tests.sh [--mpi mpich|openmpi|all] [--engines "list rank ..."]
#            [--takeover "auto always flip:3"] [--native-only] [--only "prog ..."]
#
# Each program prints `ok|FAIL|skip <check>` lines and `verdict: PASS|FAIL` from rank 0; its
# header comment (`/* ranks: 2 3 */`, or `! ranks: 2` in Fortran) gives the rank counts.  A
# shim case (an engine under a MATCHSHIM_TAKEOVER mode, default `auto`) passes when it exits
# 0, prints `verdict: PASS`, its check lines equal the native run's, and its report
# (MATCHSHIM_REPORT) holds every rank with that engine, so no program passes by bypassing the
# shim; under `always` (with MATCHSHIM_COLL=shim unless the caller sets it), the engines must
# also have matched messages, and a program whose
# header says `bursts: N` must show a burst of at least N messages drained at once, and one whose
# header says `no-wildcard-comms: N` must have every rank's report list at least N communicators
# asserting both mpi_assert_no_any_source and mpi_assert_no_any_tag.  A program marked
# `native-known-fail: mpich` checks something that native MPICH gets wrong: natively it is
# only reported, under the shim it must pass on its own.  Each run is killed after
# $LD_PRELOAD_TESTS_TIMEOUT seconds (default 20).
set -euo pipefail

cd "$(dirname "$0")/.."
source ci/common.sh
ROOT=$PWD
SRC=ld-preload-tests

mpis="mpich openmpi"
engines="${LD_PRELOAD_TESTS_ENGINES:-list rank}"
modes="auto"
native_only=0
only=""
# every program takes a second or two natively; a hang should not cost much
run_timeout="${LD_PRELOAD_TESTS_TIMEOUT:-20}"

usage() {
    sed -n '6,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --mpi)
            [ $# -ge 2 ] || usage
            case "$2" in
                all) mpis="mpich openmpi" ;;
                mpich|openmpi) mpis="$2" ;;
                *) echo "unknown MPI: $2" >&2; usage ;;
            esac
            shift 2 ;;
        --engines) [ $# -ge 2 ] || usage; engines="$2"; shift 2 ;;
        --takeover) [ $# -ge 2 ] || usage; modes="$2"; shift 2 ;;
        --native-only) native_only=1; shift ;;
        --only) [ $# -ge 2 ] || usage; only="$2"; shift 2 ;;
        -h|--help) usage ;;
        *) echo "unknown argument: $1" >&2; usage ;;
    esac
done

# Shared-memory transports on one node; no binding and idle ranks yielding, since ranks may
# outnumber cores (common.sh's `launcher`; $CI_LAUNCHER replaces it across hosts).

if [ "$native_only" = 0 ]; then
    for mpi in $mpis; do
        lib=$(shim_lib_for "$mpi")
        if [ ! -f "$lib" ]; then
            echo "ld-preload-tests: shim library for $mpi not found: $lib" >&2
            case "$mpi" in
                mpich) echo "  build it with: cargo build --release" >&2 ;;
                openmpi) echo "  build it with: MPICC=mpicc.openmpi CARGO_TARGET_DIR=target/openmpi cargo build --release" >&2 ;;
            esac
            echo "  or pass --native-only" >&2
            exit 2
        fi
    done
fi

# The source of program $1.
source_of() { ls "$SRC/$1".c "$SRC/$1".f90 2>/dev/null | head -n 1; }

programs=()
for f in "$SRC"/*.c "$SRC"/*.f90; do
    name=$(basename "${f%.*}")
    [ "$name" = demo ] && continue
    if [ -n "$only" ] && ! [[ " $only " == *" $name "* ]]; then
        continue
    fi
    programs+=("$name")
done
if [ ${#programs[@]} -eq 0 ]; then
    echo "ld-preload-tests: no programs selected" >&2
    exit 2
fi

passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Check lines only, sorted, so the comparison ignores stray launcher output.
checks() { grep -E '^(ok|FAIL|skip) ' "$1" | sort || true; }

# The first check of the native run that this run did not print.
first_missing() {
    [ -f "$1" ] || return 0
    local c
    while read -r c; do
        if ! grep -q -E "^(ok|FAIL|skip) $c(:|\$)" "$2"; then
            echo "$c"
            return 0
        fi
    done < <(grep -E '^(ok|FAIL|skip) ' "$1" | sed -E 's/^[a-zA-Z]+ ([^:]*).*/\1/')
}

# A run's output: its standard output, then what it wrote to standard error.
show_output() {
    cat "$1" "$1.err" 2>/dev/null | sed 's/^/    | /' | head -n 60
}

ranks_of() {
    local r
    r=$(sed -n 's/.*ranks:\([ 0-9]*\).*/\1/p' "$(source_of "$1")" | head -n 1)
    echo "${r:-2}"
}

# The burst size program $1's header asks for under `always` (empty if none).
bursts_of() { sed -n 's/.*bursts: *\([0-9]*\).*/\1/p' "$(source_of "$1")" | head -n 1; }

# True if the largest burst in report $1 has at least $2 messages.
burst_seen() {
    local most
    most=$(grep -o '"largest":[0-9]*' "$1" | cut -d: -f2 | sort -n | tail -n 1) || true
    [ "${most:-0}" -ge "$2" ]
}

# The communicators asserting no wildcards that program $1's header asks every rank's report
# to list under `always` (empty if none).
no_wildcard_comms_of() { sed -n 's/.*no-wildcard-comms: *\([0-9]*\).*/\1/p' "$(source_of "$1")" | head -n 1; }

# True if every rank's line of report $1 lists at least $2 communicators asserting both
# mpi_assert_no_any_source and mpi_assert_no_any_tag.
no_wildcard_comms_seen() {
    local line count
    while IFS= read -r line; do
        count=$(grep -o '"assertions":\["mpi_assert_no_any_source","mpi_assert_no_any_tag"' <<<"$line" | wc -l)
        [ "$count" -ge "$2" ] || return 1
    done <"$1"
}

known_native_fail() {
    grep -Eq "native-known-fail:.*\<$2\>" "$(source_of "$1")"
}

# build MPI PROG: compiles the program for MPI, C or Fortran by its suffix.
build() {
    local mpi=$1 prog=$2 src out="target/ld-preload-tests/$1/$2"
    src=$(source_of "$prog")
    case "$src" in
        *.c) "$(mpicc_for "$mpi")" -O2 -Wall -pthread -o "$out" "$src" ;;
        *.f90) (cd "target/ld-preload-tests/$mpi" && "mpif90.$mpi" -O1 -I"$ROOT/$SRC" -o "$prog" "$ROOT/$src") ;;
    esac
}

# run_case MPI ENGINE MODE PROG N -> sets $out and $report; returns the run's exit status.
# Standard error goes to $out.err: the shim's line at MPI_Finalize must not split a check line.
run_case() {
    local mpi=$1 engine=$2 mode=$3 prog=$4 n=$5 bin="$ROOT/target/ld-preload-tests/$1/$4"
    out="$tmp/$mpi.$engine.$mode.$prog.$n.out"
    report="$tmp/$mpi.$engine.$mode.$prog.$n.report"
    rm -f "$report"
    local cmd
    mapfile -t cmd < <(launcher "$mpi" "$n" shm unbound yield)
    if [ "$engine" = native ]; then
        timeout -k 5 "$run_timeout" "${cmd[@]}" "$bin" >"$out" 2>"$out.err"
    else
        # env inside the command line: the launcher cannot drop the variables. The gpu
        # engine's settings pass through from the caller.
        local vars=()
        for v in MATCHSHIM_GPU_BURST MATCHSHIM_GPU_SCAN MATCHSHIM_GPU_LAUNCH MATCHSHIM_NVRTC; do
            [ -n "${!v:-}" ] && vars+=("$v=${!v}")
        done
        # `always` is the shim matching every message, collectives' included; the caller's
        # MATCHSHIM_COLL wins.
        local coll=${MATCHSHIM_COLL:-}
        [ -z "$coll" ] && [ "$mode" = always ] && coll=shim
        [ -n "$coll" ] && vars+=("MATCHSHIM_COLL=$coll")
        timeout -k 5 "$run_timeout" "${cmd[@]}" env LD_PRELOAD="$(shim_lib_for "$mpi")" \
            MATCHSHIM_ENGINE="$engine" MATCHSHIM_TAKEOVER="$mode" MATCHSHIM_REPORT="$report" \
            "${vars[@]}" "$bin" >"$out" 2>"$out.err"
    fi
}

record() {  # record PASS|FAIL line [output-file] [native-file]
    local verdict=$1 line=$2
    echo "$verdict $line"
    case "$verdict" in
        PASS) passed=$((passed + 1)) ;;
        FAIL)
            failed=$((failed + 1))
            [ -n "${3:-}" ] && show_output "$3"
            if [ -n "${4:-}" ] && [ -f "${4:-}" ]; then
                echo "    check lines differing from native (< native, > this run):"
                diff <(checks "$4") <(checks "$3") | grep -E '^[<>]' | sed 's/^/    /' || true
            fi ;;
    esac
}

# Why a finished run failed ("" if it passed its own checks).
run_problem() {
    local rc=$1 native_out=$2 stuck
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo -n "timed out after ${run_timeout}s"
        stuck=$(first_missing "$native_out" "$out")
        if [ -n "$stuck" ]; then echo -n ", stuck in check '$stuck'"; fi
    elif [ "$rc" != 0 ]; then
        echo -n "exit status $rc"
    elif ! grep -qx 'verdict: PASS' "$out"; then
        echo -n "no 'verdict: PASS'"
    fi
}

start_all=$(now)
for mpi in $mpis; do
    mkdir -p "target/ld-preload-tests/$mpi"
    runnable=()
    for prog in "${programs[@]}"; do
        if build "$mpi" "$prog" >"$tmp/cc.out" 2>&1; then
            runnable+=("$prog")
        else
            record FAIL "$mpi build $prog" "$tmp/cc.out"
        fi
    done

    cases="native"
    if [ "$native_only" = 0 ]; then
        for engine in $engines; do
            for mode in $modes; do
                cases="$cases $engine/$mode"
            done
        done
    fi
    for prog in "${runnable[@]}"; do
        for n in $(ranks_of "$prog"); do
            native_out="$tmp/$mpi.native.-.$prog.$n.out"
            for c in $cases; do
                engine=${c%%/*}
                mode=-
                [ "$engine" != native ] && mode=${c#*/}
                t0=$(now)
                rc=0
                run_case "$mpi" "$engine" "$mode" "$prog" "$n" || rc=$?
                label="$engine"
                [ "$engine" != native ] && label="$engine $mode"
                line="$mpi $label $prog n=$n ($(elapsed "$t0")s)"
                why=$(run_problem "$rc" "$native_out")
                known=0
                known_native_fail "$prog" "$mpi" && known=1
                if [ "$engine" = native ]; then
                    if [ -z "$why" ]; then
                        record PASS "$line"
                    elif [ "$known" = 1 ]; then
                        echo "KNOWN $line: $why (known native failure, not counted)"
                        grep -E '^FAIL ' "$out" | sed 's/^/    | /' || true
                    else
                        record FAIL "$line: $why" "$out"
                    fi
                    continue
                fi
                if [ -z "$why" ] && [ "$known" = 0 ]; then
                    if [ ! -f "$native_out" ]; then
                        why="no native run to compare with"
                    elif [ "$(checks "$native_out")" != "$(checks "$out")" ]; then
                        why="check lines differ from the native run"
                    fi
                fi
                if [ -z "$why" ]; then
                    matched=""
                    # One rank alone, or a program that skipped all, sends nothing to match.
                    [ "$mode" = always ] && [ "$n" -gt 1 ] && grep -q '^ok ' "$out" && matched=matched
                    if ! shim_ran "$report" "$n" "$engine" $matched; then
                        why="the shim's report does not show every rank running $engine"
                        [ -n "$matched" ] && why="$why with messages matched by it"
                    fi
                fi
                want_burst=$(bursts_of "$prog")
                if [ -z "$why" ] && [ "$mode" = always ] && [ -n "$want_burst" ] &&
                    ! burst_seen "$report" "$want_burst"; then
                    why="no burst of $want_burst messages in the shim's report"
                fi
                want_asserting=$(no_wildcard_comms_of "$prog")
                if [ -z "$why" ] && [ "$mode" = always ] && [ -n "$want_asserting" ] &&
                    ! no_wildcard_comms_seen "$report" "$want_asserting"; then
                    why="a rank's report lists fewer than $want_asserting communicators asserting no wildcards"
                fi
                if [ -z "$why" ]; then
                    record PASS "$line"
                else
                    record FAIL "$line: $why" "$out" "$([ "$known" = 0 ] && echo "$native_out")"
                fi
            done
        done
    done
done

echo "total time $(elapsed "$start_all")s"
echo "ld-preload-tests: $passed passed, $failed failed"
[ "$failed" = 0 ]
