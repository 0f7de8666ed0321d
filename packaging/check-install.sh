#!/bin/sh
# Installs a build into a scratch DESTDIR and checks what landed: the
# binary runs from there and finds its provider, scenarios, docs, a man
# page per command, the completion and the systemd unit; for a CMake build
# also `cpack -G DEB`: dpkg-deb lists the same files, and the program runs
# from the unpacked package.
#   packaging/check-install.sh BUILD_DIR
set -eu
build=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/rocemu-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check-install: $*" >&2; exit 1; }

if [ -f "$build/CMakeCache.txt" ]; then
  kind=cmake
  prefix=/usr
  grep -q '^ROCEMU_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && sanitized=1 || sanitized=0
  DESTDIR="$tmp/root" cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
else
  kind=meson
  option() { meson introspect --buildoptions "$build" | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"; }
  prefix=$(option prefix)
  [ "$(option b_sanitize)" = none ] && sanitized=0 || sanitized=1
  meson install -C "$build" --no-rebuild --destdir "$tmp/root" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "meson install failed"; }
fi

# check_tree ROOT: ROOT is the installed prefix.
check_tree() {
  r=$1
  for f in bin/rocemu lib/rocemu/librocemu-verbs.so share/rocemu/sim-plot.py share/rocemu/scenarios/incast-lossless.yaml \
           share/rocemu/scenarios/topologies/star9.yaml share/doc/rocemu/README.md share/doc/rocemu/switch-README.md \
           share/doc/rocemu/LICENSE share/man/man1/rocemu.1 share/bash-completion/completions/rocemu \
           lib/systemd/system/rocemu.service; do
    [ -e "$r/$f" ] || fail "$kind: $f is not installed under $r"
  done
  "$r/bin/rocemu" --version | grep -q '^rocemu [0-9]' || fail "$kind: rocemu --version"
  "$r/bin/rocemu" help | grep -q 'rocemu doctor' || fail "$kind: rocemu help"
  # A man page per command, each a man page.
  "$r/bin/rocemu" --list-commands | cut -f1 | while read -r cmd; do
    page="$r/share/man/man1/rocemu-$cmd.1"
    [ -f "$page" ] || fail "$kind: no man page for rocemu $cmd"
    grep -q '^\.TH ROCEMU-' "$page" || fail "$kind: $page is not a man page"
  done
  grep -q "^_rocemu()" "$r/share/bash-completion/completions/rocemu" || fail "$kind: the completion script"
  unit="$r/lib/systemd/system/rocemu.service"
  grep -qx "ExecStart=$prefix/bin/rocemu up --daemon" "$unit" || fail "$kind: the unit's ExecStart: $(grep ExecStart "$unit")"
  grep -qx "RuntimeDirectory=rocemu" "$unit" || fail "$kind: the unit's RuntimeDirectory"
  grep -qx "PIDFile=/run/rocemu/rocemu.pid" "$unit" || fail "$kind: the unit's PIDFile"
}
check_tree "$tmp/root$prefix"

# The installed rocemu finds the installed provider: an engine from the
# DESTDIR tree, and ibv_devices on its NIC sees rocemu0. (Not for a
# sanitized build: its provider cannot be preloaded into a program built
# without the sanitizer.)
if [ -x /usr/bin/ibv_devices ] && [ "$sanitized" = 0 ]; then
  r="$tmp/root$prefix"
  export ROCEMU_RUNTIME_DIR="$tmp/run"
  unset ROCEMU_PROVIDER
  "$r/bin/rocemu" up --daemon --no-realtime >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; fail "$kind: the installed rocemu up failed"; }
  pid=$(cat "$tmp/run/rocemu.pid")
  devices=$("$r/bin/rocemu" exec h1 -- /usr/bin/ibv_devices 2>&1) || true
  "$r/bin/rocemu" down >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  echo "$devices" | grep -q rocemu0 || fail "$kind: the installed rocemu exec did not load the installed provider: $devices"
  unset ROCEMU_RUNTIME_DIR
fi

if [ "$kind" = cmake ]; then
  (cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
  deb=$(ls "$tmp"/pkg/rocemu_*.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] || fail "cpack made no .deb"
  dpkg-deb -c "$deb" >"$tmp/contents"
  for f in ./usr/bin/rocemu ./usr/lib/rocemu/librocemu-verbs.so ./usr/share/man/man1/rocemu-doctor.1 \
           ./usr/lib/systemd/system/rocemu.service ./usr/share/rocemu/scenarios/incast-lossless.yaml; do
    grep -q " $f\$" "$tmp/contents" || fail "the package lacks $f"
  done
  dpkg-deb -f "$deb" Depends | grep -q 'libc6' || fail "the package declares no shared-library dependencies"
  dpkg-deb -x "$deb" "$tmp/deb"
  check_tree "$tmp/deb/usr"
fi
echo "check-install: $kind install and$( [ "$kind" = cmake ] && echo " Debian package" || echo "") OK"
