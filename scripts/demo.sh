#!/usr/bin/env bash
# The quick start: installs every Debian package rocemu needs, builds it,
# and runs `rocemu demo` -- a fabric (h1 -- sw1 -- h2) with Debian's own
# ib_write_bw and ib_write_lat running through it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/rocemu demo "$@"
