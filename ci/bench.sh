#!/usr/bin/env bash
# The whole benchmark suite, natively and under the shim with each engine:
#  1. pingpong, bandwidth and longqueue on 2 ranks, through ci/bench-p2p.sh (its own table);
#  2. on N ranks: the hot spot of ci/bench-coll.sh (coll hotspot), halo_mt with 1, 2 and 4
#     threads, and the application mixes app_radix, app_nbody and app_miniamr; then a table of
#     shim/native ratios (best of the rounds), the apps' checksums compared across
#     configurations, and per engine the point-to-point search depth of halo_mt against the
#     thread count (from the shim's report).
#
#   ci/bench.sh [--mpi mpich|openmpi] [--engines "list rank col+pnp"] [--takeover "auto always"]
#               [-n RANKS] [--rounds R] [--quick]
#
# Each engine runs under each takeover mode (MATCHSHIM_TAKEOVER, default auto).  Rounds
# (default 3) rotate the order of the configurations, as ci/bench-p2p.sh does.
# --quick: shorter runs, and one round unless --rounds says otherwise (a minute or two on
# 2 cores).  A shim run counts only if every rank's report names the engine asked for.
# Raw output: target/bench-suite/<mpi>/.  Exit status 1 if a run failed or checksums differ
# (numbers are not judged).  BENCH_TIMEOUT: seconds per run (default 300).
set -uo pipefail
source "$(dirname "$0")/common.sh"
ROOT=$(repo_root)
cd "$ROOT"
MPI=mpich
ENGINES="list rank col+pnp"
MODES=auto
RANKS=4
ROUNDS=
QUICK=0
TIMEOUT=${BENCH_TIMEOUT:-300}

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --mpi) MPI=${2:?}; shift 2 ;;
        --engines) ENGINES=${2:?}; shift 2 ;;
        --takeover) MODES=${2:?}; shift 2 ;;
        -n) RANKS=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --quick) QUICK=1; shift ;;
        -h|--help) usage 0 ;;
        *) echo "bench.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
[ -n "$ROUNDS" ] || { [ "$QUICK" = 1 ] && ROUNDS=1 || ROUNDS=3; }
MPICC=$(mpicc_for "$MPI") || { echo "bench.sh: --mpi must be mpich or openmpi" >&2; exit 2; }
case $ROUNDS$RANKS in *[!0-9]*) echo "bench.sh: --rounds and -n need numbers" >&2; exit 2 ;; esac
[ "$ROUNDS" -ge 1 ] && [ "$RANKS" -ge 2 ] || {
    echo "bench.sh: --rounds >= 1, -n >= 2" >&2
    exit 2
}
# Shared-memory transports only; Open MPI's ranks yield when idle (cores are oversubscribed).
mapfile -t MPIEXEC < <(launcher "$MPI" "$RANKS" shm unbound yield)

FAILED=0
START=$(date +%s)
echo "== point-to-point, 2 ranks (ci/bench-p2p.sh)"
p2p=(--mpi "$MPI" --engines "$ENGINES" --takeover "$MODES" --rounds "$ROUNDS")
[ "$QUICK" = 1 ] && p2p+=(--quick)
build_shim "$MPI" || { echo "bench.sh: building the shim failed" >&2; exit 1; }
ci/bench-p2p.sh "${p2p[@]}" || FAILED=1

LIB=$(shim_lib_for "$MPI")
OUT=$ROOT/target/bench-suite/$MPI
rm -rf "$OUT"; mkdir -p "$OUT/raw"
for b in coll halo_mt app_radix app_nbody app_miniamr; do
    if ! "$MPICC" -O2 -Wall -Wno-stringop-overflow -pthread -o "$OUT/$b" "ci/bench/$b.c" -lm; then
        echo "bench.sh: building $b with $MPICC failed" >&2; exit 1
    fi
done

if [ "$QUICK" = 1 ]; then
    HOT=20 HALO="-i 20 -r 3" RADIX="-n 2048 -i 8 -r 3" NBODY="-b 32 -i 10 -r 3" AMR="-i 12 -r 3"
else
    HOT=50 HALO="-i 100 -r 5" RADIX="" NBODY="" AMR=""
fi
# name|command line (relative to $OUT)
BENCHES=("hotspot|coll hotspot $HOT")
for t in 1 2 4; do BENCHES+=("halo_mt_t$t|halo_mt -t $t $HALO"); done
BENCHES+=("app_radix|app_radix $RADIX" "app_nbody|app_nbody $NBODY" "app_miniamr|app_miniamr $AMR")
# shim:ENGINE under auto, shim:ENGINE@MODE under another takeover mode
CONFIGS=(native)
for e in $ENGINES; do
    for m in $MODES; do
        if [ "$m" = auto ]; then CONFIGS+=("shim:$e"); else CONFIGS+=("shim:$e@$m"); fi
    done
done

echo "== $RANKS ranks: hot spot, halo_mt, applications"
RESULTS=$OUT/results.txt
: >"$RESULTS"
n=${#CONFIGS[@]}
for ((round = 1; round <= ROUNDS; round++)); do
    for ((k = 0; k < n; k++)); do
        cfg=${CONFIGS[$(((k + round - 1) % n))]}
        for entry in "${BENCHES[@]}"; do
            name=${entry%%|*}
            read -r -a cmd <<<"${entry#*|}"
            log=$OUT/raw/$name.${cfg/:/-}.r$round.log
            log=${log/@/-}
            report=${log%.log}.report.jsonl
            engine=${cfg#shim:}
            mode=auto
            [[ $engine == *@* ]] && mode=${engine#*@} engine=${engine%@*}
            envv=()
            [ "$cfg" != native ] &&
                envv=(LD_PRELOAD="$LIB" MATCHSHIM_ENGINE="$engine" MATCHSHIM_TAKEOVER="$mode"
                      MATCHSHIM_REPORT="$report")
            t0=$(date +%s)
            # The preload goes on the benchmark only, through env: launchers may drop LD_*.
            timeout -k 10 "$TIMEOUT" "${MPIEXEC[@]}" \
                env "${envv[@]}" "$OUT/${cmd[0]}" "${cmd[@]:1}" >"$log" 2>&1
            rc=$?
            # coll.c prints `bench=hotspot … us_per_iter=U`: make it a RESULT line.
            sed -i 's/^bench=hotspot \(.*\) us_per_iter=/RESULT name=hotspot \1 usec=/' "$log"
            why=
            if [ $rc != 0 ] || ! grep -q '^RESULT ' "$log"; then
                why="exit $rc"
            elif [ "$cfg" != native ] && ! shim_ran "$report" "$RANKS" "$engine"; then
                why="no shim report with engine $engine from every rank"
            fi
            if [ -n "$why" ]; then
                echo "round $round $cfg $name: FAILED ($why), log $log"
                grep -v '^RESULT ' "$log" | tail -5 | sed 's/^/    /'
                FAILED=1
            else
                echo "round $round $cfg $name: $(($(date +%s) - t0))s"
                sed -n "s/^RESULT /config=$cfg round=$round bench=$name /p" "$log" >>"$RESULTS"
            fi
        done
    done
done

python3 - "$RESULTS" "$OUT/raw" "$MPI" "$RANKS" "${CONFIGS[@]}" <<'EOF' || FAILED=1
import glob, json, os, sys
from collections import defaultdict

path, raw, mpi, ranks = sys.argv[1:5]
configs = sys.argv[5:]
shims = [c for c in configs if c != "native"]
best, sums, order = defaultdict(dict), defaultdict(dict), []
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    b, c, u = kv["bench"], kv["config"], float(kv["usec"])
    if b not in best:
        order.append(b)
    best[b][c] = min(u, best[b].get(c, u))
    if "checksum" in kv:
        sums[b].setdefault(c, set()).add(kv["checksum"])

print(f"\n{mpi}, {ranks} ranks: usec per iteration (best over rounds of each run's median) "
      "and shim/native")
head = f"{'benchmark':<12} {'native us':>10}" + "".join(
    f" {c + ' us':>14} {'ratio':>6}" for c in shims) + "  checksums"
print(head)
print("-" * len(head))
bad = False
for b in order:
    nat = best[b].get("native")
    line = f"{b:<12} {nat if nat else float('nan'):>10.1f}"
    for c in shims:
        v = best[b].get(c)
        r = f"{v / nat:.2f}x" if v is not None and nat else "-"
        line += f" {v if v is not None else float('nan'):>14.1f} {r:>6}"
    if sums[b]:
        seen = set().union(*sums[b].values())
        ok = len(seen) == 1 and len(sums[b]) == len(configs)
        bad |= len(seen) > 1
        line += "  " + ("same" if ok else "DIFFER" if len(seen) > 1 else "missing runs")
    print(line)

# halo_mt: point-to-point search depth over all rounds and ranks (weighted by searches).
print(f"\nhalo_mt point-to-point search depth per engine (mean over searches / max, all ranks)")
head = f"{'engine':<16} {'threads':>7} {'PRQ searches':>13} {'PRQ mean':>9} {'PRQ max':>8} " \
       f"{'UMQ searches':>13} {'UMQ mean':>9} {'UMQ max':>8}"
print(head)
print("-" * len(head))
for c in shims:
    for t in (1, 2, 4):
        files = glob.glob(os.path.join(
            raw, f"halo_mt_t{t}.{c.replace(':', '-').replace('@', '-')}.r*.report.jsonl"))
        reps = [json.loads(l) for f in files for l in open(f) if l.strip()]
        if not reps:
            continue
        row = f"{c[5:]:<16} {t:>7}"
        for q in ("prq", "umq"):
            s = [r["point_to_point"][q] for r in reps]
            n = sum(x["searches"] for x in s)
            mean = sum(x["searches"] * x["mean_depth"] for x in s) / n if n else 0.0
            row += f" {n:>13} {mean:>9.2f} {max(x['max_depth'] for x in s):>8}"
        print(row)
if bad:
    print("\nchecksums differ between configurations: a run computed something else")
sys.exit(1 if bad else 0)
EOF
echo "total $(($(date +%s) - START))s; raw output in $OUT/raw, results in $RESULTS"
exit $FAILED
