# The Debian packages that building, the demo and the tests need, and a function that installs
# those missing (as root, or through sudo). Sourced by ci/demo.sh and ci/test.sh.
# shellcheck shell=bash

PACKAGES=(build-essential pkg-config mpich libmpich-dev openmpi-bin libopenmpi-dev
          libclang1-14 libclang-common-14-dev iproute2 python3-venv python3-dev python3-mpi4py)

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        local as=()
        [ "$(id -u)" = 0 ] || as=(sudo)
        echo "== installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        "${as[@]}" apt-get update -qq
        "${as[@]}" apt-get install -y -qq "${missing[@]}"
    fi
    command -v cargo >/dev/null || . "$HOME/.cargo/env"
}
