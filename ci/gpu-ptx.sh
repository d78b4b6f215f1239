#!/usr/bin/env bash
# The gpu engine's kernels compiled to PTX by CUDA 12's and CUDA 13's NVRTC, no GPU needed.
#
#   ci/gpu-ptx.sh
#
# Each NVRTC comes from PyPI (nvidia-cuda-nvrtc-cu12; nvidia-cuda-nvrtc 13.x) into a venv under
# target/nvrtc/, reused when present. With each: `matchshim gpu --ptx` writes the kernels for
# the first architecture of every generation that NVRTC supports (CUDA 12 from sm_70, CUDA 13
# from sm_80), each file must name every kernel and its target; the core test that compiles the
# kernels for every architecture NVRTC lists from sm_70 runs with that NVRTC found on the
# library path; and `MATCHSHIM_NVRTC` naming the file must work alone. Needs the MPICH build of
# the command (target/release/matchshim). Exit status 0 only if all of that held.
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROOT=$(repo_root)

# version venv package lib-dir-glob
NVRTCS=(
    "12 cu12 nvidia-cuda-nvrtc-cu12 nvidia/cuda_nvrtc/lib"
    "13 cu13 nvidia-cuda-nvrtc>=13,<14 nvidia/cu13/lib"
)

# Empty when the venv is not there yet (compgen fails on no match, which pipefail would pass on).
lib_dir() { compgen -G "$ROOT/target/nvrtc/$1/lib/python3*/site-packages/$2" | head -n 1 || true; }

kernels=$(sed -n '/^pub const KERNELS/,/^];/p' "$ROOT/crates/core/src/matching/gpu/device.rs" |
    grep -o '"ms_[a-z0-9_]*"' | tr -d '"')
[ -n "$kernels" ] || { echo "gpu-ptx.sh: no kernel names found in device.rs" >&2; exit 1; }
failed=0
for spec in "${NVRTCS[@]}"; do
    read -r major venv package glob <<<"$spec"
    lib=$(lib_dir "$venv" "$glob")
    if [ -z "$lib" ] || ! compgen -G "$lib/libnvrtc.so.$major*" >/dev/null; then
        python3 -m venv "$ROOT/target/nvrtc/$venv"
        if ! "$ROOT/target/nvrtc/$venv/bin/pip" install --quiet --disable-pip-version-check "$package"; then
            echo "gpu-ptx.sh: cannot install $package from PyPI (no network to PyPI?)" >&2
            exit 1
        fi
        lib=$(lib_dir "$venv" "$glob")
    fi
    [ -n "$lib" ] || { echo "gpu-ptx.sh: $package installed no $glob" >&2; exit 1; }
    out=$ROOT/target/gpu-ptx/cuda$major
    rm -rf "$out"
    listing=$(LD_LIBRARY_PATH=$lib "$ROOT/target/release/matchshim" gpu --ptx "$out")
    echo "$listing" | grep '^NVRTC'
    echo "$listing" | grep -q "^NVRTC $major\." ||
        { echo "FAIL: CUDA $major's NVRTC was not the one loaded"; failed=1; }
    count=0
    for ptx in "$out"/matchshim_kernels.sm_*.ptx; do
        sm=${ptx##*.sm_}
        sm=${sm%.ptx}
        count=$((count + 1))
        grep -q "^\.target sm_$sm" "$ptx" || { echo "FAIL: $ptx does not target sm_$sm"; failed=1; }
        for kernel in $kernels; do
            for entry in "$kernel" "${kernel}_p"; do
                grep -q "\.entry $entry(" "$ptx" || { echo "FAIL: $ptx lacks $entry"; failed=1; }
            done
        done
    done
    [ "$count" -ge 3 ] || { echo "FAIL: CUDA $major: only $count PTX files"; failed=1; }
    (cd "$ROOT" && LD_LIBRARY_PATH=$lib cargo test --release --quiet -p matchshim-core kernels_compile_to_ptx) ||
        failed=1
    file=$(ls "$lib"/libnvrtc.so."$major"* | head -n 1)
    MATCHSHIM_NVRTC=$file "$ROOT/target/release/matchshim" gpu --ptx "$out/named" --arch 90 >/dev/null ||
        { echo "FAIL: MATCHSHIM_NVRTC=$file"; failed=1; }
    echo "gpu-ptx: CUDA $major: $(echo $kernels | wc -w) kernels (and their graph forms) in PTX for $count architectures ($(basename "$file"))"
done
exit $failed
