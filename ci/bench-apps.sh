#!/usr/bin/env bash
# Debian's packaged MPI applications (built on Open MPI) natively and under libmatchshim.so,
# runs alternating in rotating order, same machine, same run: LAMMPS (a Lennard-Jones melt,
# 13,500 atoms, 250 steps) and CP2K (a water molecule's DFT energy). Every run under the shim
# must compute what the native run computed, digit for digit (LAMMPS's thermodynamic table,
# CP2K's SCF iterations and energy), or the script fails. Prints, per application and
# configuration, the median wall time over the rounds, its ratio to native, and from the
# shim's reports the takeovers (summed over ranks and rounds) and the takeovers its timed
# calls asked for that a warm probe declined.
#
#   ci/bench-apps.sh [--ranks N] [--rounds R] [--apps "lammps cp2k"] [--configs "auto always"]
#
# CONFIG: auto (the defaults) or always (MATCHSHIM_TAKEOVER=always: the shim matches every
# message). Needs Debian's lammps and cp2k packages (apt-get install lammps cp2k). Raw output:
# target/bench-apps/.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/ci/common.sh"
RANKS=2
ROUNDS=3
APPS="lammps cp2k"
CONFIGS="auto always"
TIMEOUT=${BENCH_TIMEOUT:-300}

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case $1 in
        --ranks) RANKS=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --apps) APPS=${2:?}; shift 2 ;;
        --configs) CONFIGS=${2:?}; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "bench-apps.sh: unknown argument: $1" >&2; usage 2 >&2 ;;
    esac
done
for app in $APPS; do
    case $app in
        lammps) bin=lmp ;;
        cp2k) bin=cp2k.psmp ;;
        *) echo "bench-apps.sh: unknown application: $app" >&2; exit 2 ;;
    esac
    command -v "$bin" >/dev/null ||
        { echo "bench-apps.sh: $bin is not installed (apt-get install $app)" >&2; exit 2; }
done
LIB=$ROOT/target/openmpi/release/libmatchshim.so
[ -f "$LIB" ] || build_shim openmpi || exit 1

OUT=$ROOT/target/bench-apps
rm -rf "$OUT"; mkdir -p "$OUT"
RESULTS=$OUT/results.txt
: >"$RESULTS"

cat >"$OUT/in.melt" <<'EOF'
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 15 0 15 0 15
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 3.0 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    every 20 delay 0 check no
fix             1 all nve
thermo          50
run             250
EOF
cat >"$OUT/h2o.inp" <<'EOF'
&GLOBAL
  PROJECT h2o
  RUN_TYPE ENERGY
  PRINT_LEVEL LOW
&END GLOBAL
&FORCE_EVAL
  METHOD Quickstep
  &DFT
    BASIS_SET_FILE_NAME BASIS_MOLOPT
    POTENTIAL_FILE_NAME GTH_POTENTIALS
    &MGRID
      CUTOFF 200
      REL_CUTOFF 30
    &END MGRID
    &SCF
      EPS_SCF 1.0E-6
      MAX_SCF 30
    &END SCF
    &XC
      &XC_FUNCTIONAL PBE
      &END XC_FUNCTIONAL
    &END XC
  &END DFT
  &SUBSYS
    &CELL
      ABC 6.0 6.0 6.0
    &END CELL
    &COORD
      O   0.000000    0.000000   -0.065587
      H   0.000000   -0.757136    0.520545
      H   0.000000    0.757136    0.520545
    &END COORD
    &KIND H
      BASIS_SET DZVP-MOLOPT-SR-GTH
      POTENTIAL GTH-PBE-q1
    &END KIND
    &KIND O
      BASIS_SET DZVP-MOLOPT-SR-GTH
      POTENTIAL GTH-PBE-q6
    &END KIND
  &END SUBSYS
&END FORCE_EVAL
EOF

# What a run computed, without its timings: LAMMPS's thermodynamic table, CP2K's SCF
# iterations (energy and change) and final energy.
physics() { # APP DIR
    case $1 in
        lammps) sed -n '/^ *Step /,/^Loop time/p' "$2/log.lammps" | grep -v '^Loop time' ;;
        cp2k) grep -E '^ +[0-9]+ (P_Mix|Pulay|Broy|DIIS|OT)' "$2/out" | awk '{print $(NF-1), $NF}'
              grep 'ENERGY|' "$2/out" ;;
    esac
}

mapfile -t launch < <(launcher openmpi "$RANKS")
FAILED=0
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for app in $APPS; do
    for ((round = 1; round <= ROUNDS; round++)); do
        configs=(native $CONFIGS)
        # Rotating order: each configuration runs first in some round.
        for ((k = 0; k < (round - 1) % ${#configs[@]}; k++)); do
            configs=("${configs[@]:1}" "${configs[0]}")
        done
        for cfg in "${configs[@]}"; do
            dir=$OUT/$app.$cfg.r$round
            mkdir -p "$dir"
            envv=(OMP_NUM_THREADS=1)
            [ "$cfg" = native ] ||
                envv+=(LD_PRELOAD="$LIB" MATCHSHIM_REPORT="$dir/report.jsonl" MATCHSHIM_VERBOSE=0
                       MATCHSHIM_TAKEOVER="$cfg")
            case $app in
                lammps) run=(lmp -in "$OUT/in.melt" -screen none) ;;
                cp2k) run=(cp2k.psmp -i "$OUT/h2o.inp" -o out) ;;
            esac
            t0=$(date +%s.%N)
            (cd "$dir" && timeout -k 10 "$TIMEOUT" "${launch[@]}" env "${envv[@]}" "${run[@]}" \
                >run.log 2>&1)
            rc=$?
            wall=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.3f", t1 - t0 }')
            physics "$app" "$dir" >"$dir/physics"
            if [ $rc != 0 ] || [ ! -s "$dir/physics" ]; then
                echo "$app round $round $cfg: FAILED (exit $rc), see $dir"
                FAILED=1
                continue
            fi
            if [ "$cfg" != native ]; then
                if ! shim_ran "$dir/report.jsonl" "$RANKS" col+pnp; then
                    echo "$app round $round $cfg: no shim report from every rank, see $dir"
                    FAILED=1
                    continue
                fi
                native=$OUT/$app.native.r$round/physics
                if [ -s "$native" ] && ! cmp -s "$native" "$dir/physics"; then
                    echo "$app round $round $cfg: computed something else than natively:"
                    diff "$native" "$dir/physics" | head -n 6
                    FAILED=1
                fi
            fi
            echo "$app round $round $cfg: $wall s"
            echo "$app $cfg $wall $dir" >>"$RESULTS"
        done
    done
done

python3 - "$RESULTS" <<'EOF'
import json, math, os, statistics, sys
from collections import defaultdict

walls, takeovers, declined = defaultdict(list), defaultdict(int), defaultdict(int)
for line in open(sys.argv[1]):
    app, cfg, wall, run = line.split()
    walls[(app, cfg)].append(float(wall))
    report = os.path.join(run, "report.jsonl")
    if os.path.exists(report):
        for rank in open(report):
            for comm in json.loads(rank)["comms"]:
                # As the report counts them: one for a communicator held from the start.
                switches = comm["switches"]
                takeovers[(app, cfg)] += (
                    math.ceil(switches / 2) if switches else int(comm["takeover_time_ns"] > 0)
                )
                declined[(app, cfg)] += comm.get("unconfirmed_takeovers", 0)
print(f"\n{'application':<12} {'config':<8} {'wall s':>8} {'/native':>8} {'takeovers':>10} {'declined':>9}")
for app, cfg in walls:
    wall = statistics.median(walls[(app, cfg)])
    native = walls.get((app, "native"))
    ratio = f"{wall / statistics.median(native):.3f}" if native else "-"
    extra = ("", "") if cfg == "native" else (takeovers[(app, cfg)], declined[(app, cfg)])
    print(f"{app:<12} {cfg:<8} {wall:>8.3f} {ratio:>8} {extra[0]:>10} {extra[1]:>9}")
print("(medians over the rounds; takeovers and declined asks summed over ranks and rounds)")
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $FAILED
