#!/usr/bin/env bash
# Point-to-point benchmarks (ci/bench/*.c), natively and under libmatchshim.so, in one go.
#
#   ci/bench-p2p.sh [--mpi mpich|openmpi] [--engines "rank list"] [--takeover "auto always"]
#                   [--rounds R] [--quick] [--benches "pingpong bandwidth longqueue"] [--hog N]
#
# Benchmarks: pingpong (latency of Recv, Irecv+Wait, Improbe+Mrecv and Probe+Recv, 1 B to
# 1 MiB), bandwidth (a window of 64 posted Irecvs, as osu_bw, 1 B to 1 MiB) and longqueue
# (N posted or unexpected messages matched in reverse or in order), on 2 ranks; spread (not
# run unless named: T receives posted per source, newest first, T = 32, 128, 512) on
# SPREAD_RANKS ranks (default 4); persistent (not run unless named: a halo of a persistent
# receive and send, Startall then Waitall, two Waits or a Testall loop, 8 B) on 2 ranks.
# Engines default to ci/engines, takeover modes to auto (MATCHSHIM_TAKEOVER); each engine runs
# under each mode.
# A shim run counts only
# if the shim's report (MATCHSHIM_REPORT) shows both ranks ran it with the engine asked for, so
# a dropped preload cannot pass as "1.00x".  Each round runs every configuration (native, then
# the shim ones) once, in an order that rotates from round to round, so slow phases of a shared
# machine hit all alike.  A benchmark reports medians over its own repetitions; the table
# shows, per configuration, the best of the rounds, and shim/native ratios (of time; for
# bandwidth, of bandwidth).  --quick: 8-byte ping-pong, bandwidth up to 4 KiB and N = 1024.
# On a busy 2-core machine one round's latencies can be several times another's: judge a 5%
# target only with --rounds 5 or more, and say the load.
# Raw output: target/bench/<mpi>/.  Exit status 1 only if a run failed (numbers are not judged).
#
# Environment: PINGPONG_ARGS, BANDWIDTH_ARGS, LONGQUEUE_ARGS, SPREAD_ARGS, PERSISTENT_ARGS
# (override the benchmarks' arguments), SPREAD_RANKS, BENCH_TIMEOUT (seconds per run, default
# 120).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/ci/common.sh"
MPI=mpich
ENGINES=$(grep -v '^#' "$ROOT/ci/engines" 2>/dev/null | tr '\n' ' ')
ENGINES=${ENGINES:-rank list}
MODES=auto
ROUNDS=3
QUICK=0
TIMEOUT=${BENCH_TIMEOUT:-120}
BENCHES="pingpong bandwidth longqueue"
HOGS=0

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --mpi) MPI=${2:?}; shift 2 ;;
        --engines) ENGINES=${2:?}; shift 2 ;;
        --takeover) MODES=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --benches) BENCHES=${2:?}; shift 2 ;;
        --hog) HOGS=${2:?}; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "bench-p2p.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
case $MPI in
    mpich)
        MPICC=mpicc.mpich
        LIB=$ROOT/target/release/libmatchshim.so ;;
    openmpi)
        MPICC=mpicc.openmpi
        LIB=$ROOT/target/openmpi/release/libmatchshim.so ;;
    *) echo "bench-p2p.sh: --mpi must be mpich or openmpi" >&2; exit 2 ;;
esac
mapfile -t MPIEXEC < <(launcher "$MPI" 2)
SPREAD_RANKS=${SPREAD_RANKS:-4}
mapfile -t MPIEXEC_SPREAD < <(launcher "$MPI" "$SPREAD_RANKS")
case $ROUNDS in ''|*[!0-9]*|0) echo "bench-p2p.sh: --rounds needs a positive number" >&2; exit 2 ;; esac

if [ "$QUICK" = 1 ]; then
    PP_ARGS=${PINGPONG_ARGS:--s 8 -r 7}
    BW_ARGS=${BANDWIDTH_ARGS:--m 4096 -r 3}
    LQ_ARGS=${LONGQUEUE_ARGS:--n 1024 -r 3}
    SP_ARGS=${SPREAD_ARGS:--t 128 -r 3}
    PS_ARGS=${PERSISTENT_ARGS:--i 20000 -r 3}
else
    PP_ARGS=${PINGPONG_ARGS:-}
    BW_ARGS=${BANDWIDTH_ARGS:-}
    LQ_ARGS=${LONGQUEUE_ARGS:-}
    SP_ARGS=${SPREAD_ARGS:-}
    PS_ARGS=${PERSISTENT_ARGS:-}
fi

OUT=$ROOT/target/bench/$MPI
mkdir -p "$OUT"
rm -rf "$OUT/raw"; mkdir -p "$OUT/raw"
for b in $BENCHES; do
    if ! "$MPICC" -O2 -Wall -o "$OUT/$b" "$ROOT/ci/bench/$b.c"; then
        echo "bench-p2p.sh: building $b with $MPICC failed" >&2; exit 1
    fi
done

# shim:ENGINE under auto, shim:ENGINE@MODE under another takeover mode
CONFIGS=(native)
if [ -f "$LIB" ]; then
    for e in $ENGINES; do
        for m in $MODES; do
            if [ "$m" = auto ]; then CONFIGS+=("shim:$e"); else CONFIGS+=("shim:$e@$m"); fi
        done
    done
else
    echo "note: $LIB not built; native runs only"
fi

HOG_PIDS=()
stop_hogs() { [ ${#HOG_PIDS[@]} = 0 ] || kill "${HOG_PIDS[@]}" 2>/dev/null; }
trap stop_hogs EXIT
for ((h = 0; h < HOGS; h++)); do
    (while :; do :; done) &
    HOG_PIDS+=($!)
done
[ "$HOGS" = 0 ] || echo "$HOGS busy loops beside every run"

START=$(date +%s)
FAILED=0
RESULTS=$OUT/results.txt
: >"$RESULTS"
n=${#CONFIGS[@]}
declare -A HUNG   # "config benchmark" pairs that timed out: not run again
for ((round = 1; round <= ROUNDS; round++)); do
    for ((k = 0; k < n; k++)); do
        cfg=${CONFIGS[$(((k + round - 1) % n))]}
        for b in $BENCHES; do
            if [ -n "${HUNG[$cfg $b]:-}" ]; then
                echo "round $round $cfg $b: skipped (timed out in round ${HUNG[$cfg $b]})"
                continue
            fi
            launch=("${MPIEXEC[@]}") ranks=2
            case $b in
                pingpong) args=$PP_ARGS ;;
                bandwidth) args=$BW_ARGS ;;
                persistent) args=$PS_ARGS ;;
                spread) args=$SP_ARGS launch=("${MPIEXEC_SPREAD[@]}") ranks=$SPREAD_RANKS ;;
                *) args=$LQ_ARGS ;;
            esac
            log=$OUT/raw/$b.${cfg/:/-}.r$round.log
            log=${log/@/-}
            report=${log%.log}.report.jsonl
            engine=${cfg#shim:}
            mode=auto
            [[ $engine == *@* ]] && mode=${engine#*@} engine=${engine%@*}
            if [ "$cfg" = native ]; then
                envv=()
            else
                envv=(LD_PRELOAD="$LIB" MATCHSHIM_ENGINE="$engine" MATCHSHIM_TAKEOVER="$mode"
                      MATCHSHIM_REPORT="$report")
            fi
            t0=$(date +%s.%N)
            # The preload goes on the benchmark only, through env: launchers may drop LD_*.
            # shellcheck disable=SC2086
            timeout -k 10 "$TIMEOUT" "${launch[@]}" env "${envv[@]}" "$OUT/$b" $args >"$log" 2>&1
            rc=$?
            secs=$(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$t0")
            # Results printed before a failure (e.g. a later variant hangs) are still kept;
            # a run that exits cleanly without the shim's report is dropped.
            keep=1 why=
            if [ $rc != 0 ] || ! grep -q '^RESULT ' "$log"; then
                why="exit $rc"
                if [ $rc = 124 ] || [ $rc = 137 ]; then
                    why="timed out after ${TIMEOUT}s" HUNG[$cfg $b]=$round
                fi
            elif [ "$cfg" != native ] && ! shim_ran "$report" "$ranks" "$engine"; then
                why="no shim report with engine $engine from all $ranks ranks" keep=0
            fi
            if [ -n "$why" ]; then
                echo "round $round $cfg $b: FAILED ($why, ${secs}s), log $log"
                grep -v '^RESULT ' "$log" | tail -5 | sed 's/^/    /'
                FAILED=1
            else
                echo "round $round $cfg $b: ${secs}s"
            fi
            [ $keep = 1 ] && sed -n "s/^RESULT /config=$cfg round=$round /p" "$log" >>"$RESULTS"
        done
    done
done

python3 - "$RESULTS" "$OUT/ratios.txt" "$MPI" "${CONFIGS[@]}" <<'EOF'
import sys
from collections import defaultdict

path, ratios, mpi = sys.argv[1:4]
configs = sys.argv[4:]
best = defaultdict(dict)       # (name, size, n) -> config -> best usec over rounds
order = []
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    key = (kv["name"], int(kv["size"]), kv.get("n", ""))
    if key not in best:
        order.append(key)
    u = float(kv["usec"])
    c = kv["config"]
    best[key][c] = min(u, best[key].get(c, u))


def ratio(name, nat, v):
    """shim/native: of time, or of bandwidth for the bandwidth benchmark."""
    return nat / v if name == "bandwidth" else v / nat


shims = [c for c in configs if c != "native"]
# Up to 3 shim configurations: usec and ratio each; more: ratios only (usec in ratios.txt).
wide = len(shims) <= 3
head = f"{'benchmark':<30} {'size':>8} {'n':>5} {'native us':>10}"
for c in shims:
    head += f" {c + ' us':>18} {'ratio':>6}" if wide else f" {c:>{max(len(c), 6)}}"
print()
print(f"p2p benchmarks, {mpi}, 2 ranks, spread on more (usec: best over rounds of each run's "
      "median, per message for bandwidth; ratio: shim/native time, and shim/native bandwidth "
      "for bandwidth)")
print(head)
print("-" * len(head))
for key in order:
    name, size, n = key
    row = best[key]
    nat = row.get("native")
    line = f"{name:<30} {size:>8} {n:>5} {nat if nat is not None else float('nan'):>10.3f}"
    for c in shims:
        v = row.get(c)
        r = f"{ratio(name, nat, v):.2f}x" if v is not None and nat else "-"
        if wide:
            line += f" {v if v is not None else float('nan'):>18.3f} {r:>6}"
        else:
            line += f" {r:>{max(len(c), 6)}}"
    print(line)

with open(ratios, "w") as out:
    for (name, size, n), row in ((k, best[k]) for k in order):
        nat = row.get("native")
        for c in shims:
            v = row.get(c)
            if v is not None and nat:
                print(f"RATIO mpi={mpi} config={c} name={name} size={size}"
                      + (f" n={n}" if n else "")
                      + f" native={nat:.4f} shim={v:.4f} ratio={ratio(name, nat, v):.3f}",
                      file=out)

# The short-queue targets, for the configurations under the default takeover mode.
targets = [
    ("pingpong 8 B", lambda k: k[:2] == ("pingpong", 8), "<=", 1.05),
    ("pingpong_irecv 8 B", lambda k: k[:2] == ("pingpong_irecv", 8), "<=", 1.10),
    ("pingpong, every size", lambda k: k[0] == "pingpong", "<=", 1.05),
    ("bandwidth, every size", lambda k: k[0] == "bandwidth", ">=", 0.95),
]
for c in (c for c in shims if "@" not in c):
    for label, pick, sense, limit in targets:
        rs = [ratio(k[0], best[k]["native"], best[k][c]) for k in order
              if pick(k) and best[k].get("native") and best[k].get(c)]
        if not rs:
            continue
        worst = max(rs) if sense == "<=" else min(rs)
        met = worst <= limit if sense == "<=" else worst >= limit
        print(f"target {c} {label}: {worst:.2f}x native ({sense} {limit:.2f}x): "
              + ("met" if met else "MISSED"))
EOF
for b in longqueue spread; do
    [[ " $BENCHES " == *" $b "* ]] || continue
    python3 - "$OUT/raw" "$b" "${CONFIGS[@]}" <<'EOF'
import glob, json, sys

raw, bench, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
for c in (c for c in configs if c != "native"):
    pattern = f"{raw}/{bench}.{c.replace(':', '-').replace('@', '-')}.r*.report.jsonl"
    shim = mpi = takeovers = 0
    for path in glob.glob(pattern):
        for line in open(path):
            for comm in json.loads(line).get("comms", []):
                shim += comm["takeover_matches"]
                mpi += comm["delegated_receives"]
                takeovers += (comm["switches"] + 1) // 2
    if shim + mpi:
        print(f"{bench} {c}: the shim matched {shim} receives, MPI {mpi} "
              f"({100 * shim / (shim + mpi):.1f} % in the shim), about {takeovers} takeovers")
EOF
done
echo "total $(($(date +%s) - START))s; raw output in $OUT/raw, results in $RESULTS and $OUT/ratios.txt"
exit $FAILED
