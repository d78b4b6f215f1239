#!/usr/bin/env bash
# The exported symbols of each built shim against crates/shim/calls.list: every call listed is
# exported under its C name (and `_c` name, where the MPI has the large-count calls) and its
# Fortran names for that MPI, each C name also under its profiling name (PMPI_*), and nothing
# else named MPI is. The MPI's own library says which optional calls it has (PMPI_Mrecv_c: large
# counts; PMPI_Isendrecv: MPI-4's others).
#
#   ci/calls-test.sh [--mpi mpich|openmpi|all]
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$(repo_root)"

mpis="mpich openmpi"
case "${1:-}" in
    --mpi) case "${2:-}" in all) ;; mpich|openmpi) mpis=$2 ;; *) sed -n '7p' "$0" >&2; exit 2 ;; esac ;;
    "") ;;
    *) sed -n '7p' "$0" >&2; exit 2 ;;
esac

failed=0
for mpi in $mpis; do
    lib=$(shim_lib_for "$mpi")
    [ -f "$lib" ] || { echo "calls-test: build the shim for $mpi first" >&2; exit 2; }
    libmpi=$(ldd "$lib" | awk '/libmpi(ch)?\.so/ { print $3; exit }')
    [ -n "$libmpi" ] || { echo "calls-test: $lib links no libmpi" >&2; exit 2; }
    if ! python3 - "$mpi" crates/shim/calls.list \
        <(nm -D --defined-only "$lib" | awk '{ print $3 }') \
        <(nm -D --defined-only "$libmpi" | awk '{ print $3 }') <<'PY'
import re, sys
mpi, listing, exported, libmpi = sys.argv[1:]
has = set(open(libmpi).read().split())
large_count, mpi4 = "PMPI_Mrecv_c" in has, "PMPI_Isendrecv" in has
expected = set()
calls, current = [], None
for line in open(listing):
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    if not line[0].isspace():
        current = {"name": line.split("(")[0], "attrs": {}}
        calls.append(current)
    else:
        key, _, value = line.strip().partition(":")
        current["attrs"][key.strip()] = value.strip()
for c in calls:
    a, name = c["attrs"], c["name"]
    if "mpi4" in a and not mpi4:
        continue
    # The shim works under the profiling name; the plain one may pass to a tool after it.
    expected |= {name, "P" + name}
    if "large_count" in a and large_count:
        expected |= {name + "_c", "P" + name + "_c"}
    bindings = a.get("fortran", "").split(" via ")[0].split()
    lower = name.lower()
    if mpi == "openmpi" and "openmpi" in bindings:
        expected |= {lower + "_", lower + "__", lower, name.upper(), lower + "_f08_"}
    if mpi == "mpich" and "mpich-f08" in bindings:
        expected.add(lower + "_f08_")
exported = {s for s in open(exported).read().split() if re.match(r"(?i)p?mpi_", s)}
missing, extra = sorted(expected - exported), sorted(exported - expected)
for s in missing:
    print(f"  listed but not exported: {s}")
for s in extra:
    print(f"  exported but not listed: {s}")
print(f"{mpi}: {len(expected)} listed, {len(exported)} exported MPI symbols"
      f" (large counts: {large_count}, MPI-4: {mpi4})")
sys.exit(1 if missing or extra else 0)
PY
    then
        failed=1
        echo "FAIL $mpi"
    else
        echo "PASS $mpi"
    fi
done
exit "$failed"
