#!/usr/bin/env bash
# The gpu engine on an NVIDIA GPU: its device tests, then its device benchmark.
#
#   ci/bench-gpu-device.sh                run both here (needs cargo, the driver and NVRTC)
#   ci/bench-gpu-device.sh --pack DIR     build both into DIR, with DIR/run.sh to run them on
#                                         a GPU machine without cargo (same x86-64 Linux,
#                                         glibc 2.36 or newer)
#
# The device tests send random bursts through the device (exact with and without wildcard
# receives, unordered) and one burst of 65536 in random order, every match checked against
# `bins`; the benchmark prints M matches/s and µs per burst of `bins` and `gpu` (stream and
# graph launches) from 256 to 1M queued, exact, unordered and with 10% ANY_SOURCE receives,
# every burst checked against `bins`, then ns per post. Both say "skipped" without a device.
# NVRTC is looked for as libnvrtc.so.13, .12, then libnvrtc.so on the library path, or
# MATCHSHIM_NVRTC names the file (its libnvrtc-builtins must lie beside it). The output also
# goes to OUT (default target/bench-gpu-device) as tests.txt and bench.txt.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The executables cargo built for the core tests and the engines benchmark.
built() {
    (cd "$ROOT" && cargo "$@" --message-format=json 2>/dev/null) |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])' | tail -n 1
}

if [ "${1:-}" = --pack ]; then
    dir=${2:?--pack needs a directory}
    mkdir -p "$dir"
    tests=$(built test --release -p matchshim-core --lib --no-run)
    bench=$(built bench -p matchshim-core --bench engines --no-run)
    [ -x "$tests" ] && [ -x "$bench" ] || { echo "bench-gpu-device.sh: build failed" >&2; exit 1; }
    strip -o "$dir/core-tests" "$tests"
    strip -o "$dir/engines" "$bench"
    cat >"$dir/run.sh" <<'EOF'
#!/usr/bin/env bash
# The gpu engine's device tests and device benchmark (see ci/bench-gpu-device.sh).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$here}
"$here/core-tests" device_ --nocapture --test-threads=1 2>&1 | tee "$out/tests.txt"
tests=${PIPESTATUS[0]}
"$here/engines" gpu_device 2>&1 | tee "$out/bench.txt"
exit $(( tests | PIPESTATUS[0] ))
EOF
    chmod +x "$dir/run.sh"
    du -sh "$dir"
    exit 0
fi

out=${OUT:-$ROOT/target/bench-gpu-device}
mkdir -p "$out"
cd "$ROOT"
status=0
cargo test --release -p matchshim-core --lib device_ -- --nocapture --test-threads=1 2>&1 |
    tee "$out/tests.txt" || status=1
cargo bench -p matchshim-core --bench engines -- gpu_device 2>&1 | tee "$out/bench.txt" || status=1
exit $status
