#!/usr/bin/env bash
# Transport benchmark (virtual time): go-back-N vs selective repeat on a
# 100 Gbit/s link with random loss. Builds if needed.
#   scripts/bench-transport.sh [--mib N] [--msg BYTES] [--delay-us D] [--seed S]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tests/bench/transport/rocemu_transport_bench ] || scripts/setup.sh
ninja -C build rocemu_transport_bench >/dev/null
exec build/tests/bench/transport/rocemu_transport_bench "$@"
