#!/usr/bin/env bash
# Installs every Debian package rocemu needs and builds it (CMake, Release
# with debug info) into ./build. Safe to run again: it only installs what is
# missing and rebuilds what changed.
#   scripts/setup.sh [--werror] [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build meson pkg-config clang libclang-rt-14-dev
  dpdk dpdk-dev libdpdk-dev
  libibverbs-dev rdma-core ibverbs-utils perftest rdmacm-utils infiniband-diags ucx-utils libucx0 openmpi-bin libfabric-bin
  libopenmpi-dev
  libboost-dev libspdlog-dev libfmt-dev catch2 libyaml-cpp-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  tshark python3 python3-scapy python3-matplotlib python3-yaml python3-prometheus-client
  linux-perf iproute2 procps tmux help2man
)

werror=OFF
install=1
for arg in "$@"; do
  case "$arg" in
    --werror) werror=ON ;;
    --no-install) install=0 ;;
    *) echo "usage: $0 [--werror] [--no-install]" >&2; exit 2 ;;
  esac
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if [ "$install" = 1 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer no.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

echo "== building (build/)"
# A unity build (CMake puts up to 8 source files of a target in one
# translation unit): a clean build takes about half the CPU time, since the
# headers and the inline code they instantiate are compiled once per batch,
# not once per file. For editing, a per-file build compiles less after a
# change: cmake -S . -B build-dev -G Ninja -DCMAKE_UNITY_BUILD=OFF.
# ROCEMU_LTO: the rocemu command is linked with link-time optimisation
# (13 % fewer instructions per simulated packet); the tests are not.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROCEMU_WERROR="$werror" -DCMAKE_UNITY_BUILD=ON \
  -DROCEMU_LTO=ON >/dev/null
ninja -C build
