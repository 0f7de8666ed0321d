#!/bin/sh
# Writes the man pages of rocemu from its own help text with help2man:
# rocemu.1 from `rocemu --help`, and rocemu-CMD.1 from `rocemu CMD --help`
# for every command `rocemu --list-commands` names.
#   packaging/make-man.sh ROCEMU_BINARY OUTDIR
set -eu
bin=$1
out=$2
command -v help2man >/dev/null || { echo "make-man.sh: help2man is not installed (apt-get install help2man)" >&2; exit 1; }
mkdir -p "$out"
version=$("$bin" --version | sed 's/^rocemu //')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
help2man -N --no-discard-stderr --version-string="$version" -n "a software RoCEv2 fabric: emulated RDMA NICs and a RoCE switch" \
  -o "$out/rocemu.1" "$bin"
"$bin" --list-commands | while IFS="$(printf '\t')" read -r cmd summary; do
  # help2man names the page after the program it runs: a wrapper per command.
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$bin" "$cmd" >"$tmp/rocemu-$cmd"
  chmod +x "$tmp/rocemu-$cmd"
  help2man -N --no-discard-stderr --version-string="$version" -n "$summary" -o "$out/rocemu-$cmd.1" "$tmp/rocemu-$cmd"
done
