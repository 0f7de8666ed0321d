#!/bin/sh
# meson install's last step: the man pages, the completion script and the
# systemd unit, from the built program (as packaging/install.cmake does).
#   meson-install.sh ROCEMU_BINARY SOURCE_DIR  (MESON_INSTALL_DESTDIR_PREFIX, MESON_INSTALL_PREFIX set by meson)
set -eu
bin=$1
src=$2
dest=${MESON_INSTALL_DESTDIR_PREFIX:?}
"$src/packaging/make-man.sh" "$bin" "$dest/share/man/man1"
mkdir -p "$dest/share/bash-completion/completions" "$dest/lib/systemd/system"
"$bin" completion bash >"$dest/share/bash-completion/completions/rocemu"
sed "s|@BINDIR@|${MESON_INSTALL_PREFIX:?}/bin|g" "$src/packaging/rocemu.service" >"$dest/lib/systemd/system/rocemu.service"
