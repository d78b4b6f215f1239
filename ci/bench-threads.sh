#!/usr/bin/env bash
# Thread scaling of the shim's matching under MPI_THREAD_MULTIPLE: halo_mt on 2 ranks (a 1-D
# ring of two, so each thread posts 2 receives and sends 2 messages per iteration, tags of its
# own) with T threads per rank, natively and under the shim, rounds in rotating order; then,
# under the shim at the largest T, where the cycles go (perf): the engine, the shim's
# per-communicator lock, the rest of the shim, the MPI library, the kernel.
#
#   ci/bench-threads.sh [--mpi mpich|openmpi] [--engine E] [--threads "1 2 4 8"] [--rounds R]
#                       [-i ITERS]
#
# Prints usec per iteration (best over rounds of each run's median), matches per second
# (2 ranks x T threads x 2 messages per iteration) and shim/native. BENCH_TIMEOUT: seconds per
# run (default 120). Raw output: target/bench-threads/<mpi>/.
set -uo pipefail
source "$(dirname "$0")/common.sh"
ROOT=$(repo_root)
cd "$ROOT"
MPI=mpich
ENGINE=col+pnp
THREADS="1 2 4 8"
ROUNDS=3
ITERS=2000
TIMEOUT=${BENCH_TIMEOUT:-120}

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --mpi) MPI=${2:?}; shift 2 ;;
        --engine) ENGINE=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        -i) ITERS=${2:?}; shift 2 ;;
        -h | --help) usage 0 ;;
        *) echo "bench-threads.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
MPICC=$(mpicc_for "$MPI") || { echo "bench-threads.sh: --mpi must be mpich or openmpi" >&2; exit 2; }
case $ROUNDS$ITERS${THREADS// /} in *[!0-9]*) echo "bench-threads.sh: numbers wanted" >&2; exit 2 ;; esac
mapfile -t MPIEXEC < <(launcher "$MPI" 2 shm unbound yield)
build_shim "$MPI" || { echo "bench-threads.sh: building the shim failed" >&2; exit 1; }
LIB=$(shim_lib_for "$MPI")
OUT=$ROOT/target/bench-threads/$MPI
rm -rf "$OUT"
mkdir -p "$OUT"
"$MPICC" -O2 -Wall -Wno-stringop-overflow -pthread -o "$OUT/halo_mt" ci/bench/halo_mt.c || exit 1
echo "load: $(uptime)"

FAILED=0
RESULTS=$OUT/results.txt
: >"$RESULTS"
configs=(native shim)
for ((round = 1; round <= ROUNDS; round++)); do
    for t in $THREADS; do
        for k in 0 1; do
            cfg=${configs[$(((k + round) % 2))]}
            log=$OUT/t$t.$cfg.r$round.log
            envv=()
            [ "$cfg" = shim ] && envv=(LD_PRELOAD="$LIB" MATCHSHIM_ENGINE="$ENGINE"
                                      MATCHSHIM_REPORT="${log%.log}.report.jsonl")
            timeout -k 5 "$TIMEOUT" "${MPIEXEC[@]}" env "${envv[@]}" \
                "$OUT/halo_mt" -t "$t" -d 1 -i "$ITERS" -r 3 >"$log" 2>&1
            if ! grep -q '^RESULT ' "$log" ||
                { [ "$cfg" = shim ] && ! shim_ran "${log%.log}.report.jsonl" 2 "$ENGINE"; }; then
                echo "round $round t=$t $cfg: FAILED, log $log"
                FAILED=1
                continue
            fi
            sed -n "s/^RESULT /config=$cfg /p" "$log" >>"$RESULTS"
        done
    done
done

python3 - "$RESULTS" "$THREADS" <<'EOF'
import sys
best = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    key = (kv["config"], int(kv["threads"]))
    best[key] = min(float(kv["usec"]), best.get(key, float("inf")))
print(f"\n{'T':>3} {'native us':>10} {'shim us':>10} {'shim/native':>12} "
      f"{'native Mmatch/s':>16} {'shim Mmatch/s':>14}")
for t in map(int, sys.argv[2].split()):
    n, s = best.get(("native", t)), best.get(("shim", t))
    rate = lambda us: f"{2 * t * 2 / us:.2f}" if us else "-"
    ratio = f"{s / n:.2f}x" if n and s else "-"
    print(f"{t:>3} {n or float('nan'):>10.2f} {s or float('nan'):>10.2f} {ratio:>12} "
          f"{rate(n):>16} {rate(s):>14}")
EOF

if command -v perf >/dev/null; then
    t=${THREADS##* }
    echo -e "\nwhere the shim's cycles go at T=$t (perf, all processes of one run):"
    perf record -q -g -o "$OUT/perf.data" -- timeout -k 5 "$TIMEOUT" "${MPIEXEC[@]}" \
        env LD_PRELOAD="$LIB" MATCHSHIM_ENGINE="$ENGINE" "$OUT/halo_mt" -t "$t" -d 1 \
        -i "$ITERS" -r 3 >"$OUT/perf.log" 2>&1 || FAILED=1
    perf report -q -i "$OUT/perf.data" --no-children --stdio --sort dso,symbol 2>/dev/null |
        python3 -c '
import re, sys
groups = {"engine (matching)": 0.0, "shim: per-communicator lock waits": 0.0,
          "shim: the rest": 0.0, "MPI library": 0.0, "kernel (scheduling, futex, copies)": 0.0,
          "other": 0.0}
for line in sys.stdin:
    m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
    if not m:
        continue
    share, dso, sym = float(m.group(1)), m.group(2), m.group(3)
    if "libmatchshim" in dso:
        if "matching::" in sym:
            groups["engine (matching)"] += share
        elif "lock_slow" in sym or "parking_lot" in sym:
            groups["shim: per-communicator lock waits"] += share
        else:
            groups["shim: the rest"] += share
    elif "libmpi" in dso or "libuc" in dso or "libopen" in dso or "libpmix" in dso:
        groups["MPI library"] += share
    elif "kernel" in dso:
        groups["kernel (scheduling, futex, copies)"] += share
    else:
        groups["other"] += share
for name, share in groups.items():
    print(f"  {name:<38} {share:5.1f} %")
'
fi
exit $FAILED
