#!/usr/bin/env bash
# The gpu engine's kernels compiled to PTX for sm_70, sm_80 and sm_90 by NVRTC, no GPU needed.
#
#   ci/gpu-ptx.sh
#
# NVRTC comes from PyPI (nvidia-cuda-nvrtc-cu12) into the venv target/nvrtc-venv, reused when
# present. Then `matchshim gpu --ptx` writes the PTX, which must name every kernel and its
# target, and the core test that compiles the kernels runs with NVRTC found. Needs the MPICH
# build of the command (target/release/matchshim). Exit status 0 only if all of that held.
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROOT=$(repo_root)
VENV=$ROOT/target/nvrtc-venv
PACKAGE=nvidia-cuda-nvrtc-cu12

nvrtc_dir() { compgen -G "$VENV/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib" | head -n 1; }

if [ -z "$(nvrtc_dir)" ] || ! compgen -G "$(nvrtc_dir)/libnvrtc.so.12*" >/dev/null; then
    python3 -m venv "$VENV"
    if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check "$PACKAGE"; then
        echo "gpu-ptx.sh: cannot install $PACKAGE from PyPI (no network to PyPI?)" >&2
        exit 1
    fi
fi
LIB=$(nvrtc_dir)
[ -n "$LIB" ] || { echo "gpu-ptx.sh: $PACKAGE installed no nvidia/cuda_nvrtc/lib" >&2; exit 1; }
export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

OUT=$ROOT/target/gpu-ptx
rm -rf "$OUT"
"$ROOT/target/release/matchshim" gpu --ptx "$OUT"
kernels=$(grep -o '"ms_[a-z_]*"' "$ROOT/crates/core/src/matching/gpu/device.rs" | tr -d '"' | sort -u)
failed=0
for sm in 70 80 90; do
    ptx=$OUT/matchshim_kernels.sm_$sm.ptx
    grep -q "^\.target sm_$sm" "$ptx" || { echo "FAIL: $ptx does not target sm_$sm"; failed=1; }
    for kernel in $kernels; do
        grep -q "\.entry $kernel" "$ptx" || { echo "FAIL: $ptx lacks $kernel"; failed=1; }
    done
done
(cd "$ROOT" && cargo test --release --quiet -p matchshim-core kernels_compile_to_ptx)
[ $failed -eq 0 ] && echo "gpu-ptx: $(echo $kernels | wc -w) kernels compiled to PTX for sm_70, sm_80, sm_90 ($(basename "$(ls "$LIB"/libnvrtc.so.12* | head -n 1)"))"
exit $failed
