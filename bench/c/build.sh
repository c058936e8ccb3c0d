#!/bin/sh
# build.sh builds the C references for xdpkit's benchmarks with the
# system's C compiler:
#
#   OUT=/tmp/xdpbench sh bench/c/build.sh              # xdpbench (the default)
#   OUT=/tmp/csumbench sh bench/c/build.sh csumbench
#   OUT=/tmp/ntbench sh bench/c/build.sh ntbench
#   OUT=/tmp/wakebench sh bench/c/build.sh wakebench
#   OUT=/tmp/xsksample sh bench/c/build.sh xsksample
#
# xdpbench (AF_XDP, the kernel's uapi headers, no libbpf) is built with -O2.
# csumbench is built at its best for this CPU, -O3 -march=native: its
# AVX2 and AVX-512 kernels carry target attributes and run only where the
# CPU has them, so the build works on any x86-64 machine. ntbench uses AVX2
# intrinsics and is built with -O2 -mavx2. wakebench (poll(2) on a pipe)
# is built with -O2. xsksample (the AF_XDP sample program shape, on libxdp)
# is built with -O2 and linked with libxdp and libbpf (Debian: libxdp-dev,
# libbpf-dev).
#
# OUT is the binary to write (default: the program's name next to this
# script), CC the compiler (default gcc), EXTRA_CFLAGS more flags (the
# tests add -Werror).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
prog=${1:-xdpbench}
case $prog in
xdpbench) flags="-O2" ;;
csumbench) flags="-O3 -march=native" ;;
ntbench) flags="-O2 -mavx2" ;;
wakebench) flags="-O2" ;;
xsksample)
	flags="-O2"
	libs="-lxdp -lbpf -lpthread"
	;;
*)
	echo "build.sh: unknown program $prog (xdpbench, csumbench, ntbench, wakebench, xsksample)" >&2
	exit 2
	;;
esac
OUT=${OUT:-$here/$prog}
CC=${CC:-gcc}
# shellcheck disable=SC2086 # flags, EXTRA_CFLAGS and libs are lists
exec "$CC" $flags -Wall -Wextra ${EXTRA_CFLAGS:-} -o "$OUT" "$here/$prog.c" ${libs:-}
