#!/bin/sh
# build.sh builds xdpbench, the C reference for xdpkit's AF_XDP benchmarks,
# with the system's C compiler and the kernel's uapi headers (no libbpf).
#
#   OUT=/tmp/xdpbench sh bench/c/build.sh
#
# OUT is the binary to write (default: xdpbench next to this script), CC the
# compiler (default gcc), EXTRA_CFLAGS more flags (the tests add -Werror).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$here/xdpbench}
CC=${CC:-gcc}
# shellcheck disable=SC2086 # EXTRA_CFLAGS is a list of flags
exec "$CC" -O2 -Wall -Wextra ${EXTRA_CFLAGS:-} -o "$OUT" "$here/xdpbench.c"
