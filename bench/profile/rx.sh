#!/usr/bin/env bash
# Where a measured AF_XDP program spends its CPU in one make bench case:
# runs the case once (6 s) through the harness, records the program with
# perf (cpu-clock, 20 kHz, 3 s from 2 s in) and prints its samples by
# kind: kernel, Go runtime, clock reads (vDSO), the program's own code
# (for xdpkitbench, xdpkit's packages and the bench's handler), and the
# top symbols. Root, perf and the harness's needs (see bench/harness).
#
#	bench/profile/rx.sh xdpkit rxdrop '100 kpps with NAPI'
#	bench/profile/rx.sh c fwd 'fwd 64 B$'
#	bench/profile/rx.sh xdpkit hairpin 'hairpin 1500 B'
#	GOARGS=--runtime-sleep bench/profile/rx.sh xdpkit rxdrop '300 kpps with NAPI'
#	ONCPU=0 bench/profile/rx.sh xdpkit hairpin 'hairpin 1500 B'
#
# ONCPU=N records everything on CPU N instead of the program: CPU 0 runs
# the generator and, on veth, the copy into the measured program's UMEM
# (its Fill ring reads: xp_alloc). Its "program" share is then every
# process's own code on that CPU.
# GOARGS, if set, goes to the harness's -goargs (xdpkitbench's flags; the
# harness runs it with the Poller's defaults; --runtime-sleep makes it
# sleep in the Go runtime's poller also while packets flow).
#
# Samples count on-CPU time; compare the shares, and the totals of two
# runs only as roughly as the host's noise allows.
set -euo pipefail
impl=${1:?impl: c or xdpkit} mode=${2:?mode: rxdrop, fwd, hairpin or l3fwd} match=${3:?case name regexp}
case $impl in c) prog=xdpbench ;; xdpkit) prog=xdpkitbench ;; *) echo "impl: c or xdpkit" >&2; exit 2 ;; esac
case $mode in rxdrop) m=rxdrop ;; fwd | hairpin | l3fwd) m=fwd ;; *) echo "mode: rxdrop, fwd, hairpin or l3fwd" >&2; exit 2 ;; esac
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/xdpkit-profile.XXXXXX)
hp=
# On any exit, also a signal's: stop the harness (it then deletes its
# namespaces) and delete the files.
trap 'exit 130' INT TERM
trap 'set +e; [ -n "$hp" ] && { kill "$hp" 2>/dev/null; wait "$hp" 2>/dev/null; }; rm -rf "$out"' EXIT
(cd "$here/../harness" && go build -o "$out/harness" .)
(cd "$here/../harness" && exec "$out/harness" -only xdp -modes "$mode" -match "$match" -impl "$impl" -runs 1 -seconds 6 -out "$out/res" ${GOARGS:+-goargs "$GOARGS"} >"$out/log" 2>&1) &
hp=$!
# The measured run's program: the warm-up run's has -d 11 (1 s + 10).
pid=
for _ in $(seq 600); do
	pid=$(pgrep -f -- "/$prog -m $m .* -d 16" | head -1 || true)
	[ -n "$pid" ] && break
	kill -0 "$hp" 2>/dev/null || break # the harness ended: no such case
	sleep 0.1
done
if [ -z "$pid" ]; then
	wait "$hp" || true
	echo "no measured $prog run found; the harness said:" >&2
	tail -5 "$out/log" >&2
	exit 1
fi
sleep 2
if [ -n "${ONCPU:-}" ]; then
	perf record -q -F 20000 -e cpu-clock -a -C "$ONCPU" -o "$out/perf.data" -- sleep 3 >/dev/null 2>&1
else
	perf record -q -F 20000 -e cpu-clock -p "$pid" -o "$out/perf.data" -- sleep 3 >/dev/null 2>&1
fi
wait "$hp"
hp=
side=C
[ "$impl" = xdpkit ] && side=xdpkit
grep -E "^\| .*\| $side \| [0-9]" "$out/res/summary.md" | head -2 || true
perf report -i "$out/perf.data" --sort sym --stdio -n 2>/dev/null | grep -v '^#' | grep -v '^$' >"$out/syms"
awk '{n=$2
	if ($0 ~ /\[k\]/) k+=n
	else if ($0 ~ /vdso|nanotime|clock_gettime/) c+=n
	else if ($0 ~ / (runtime\.|internal\/runtime|internal\/poll|time\.|os\.|gogo|syscall\.)/) r+=n
	else u+=n
	t+=n}
	END {if (t == 0) exit 1
	printf "samples %d: kernel %.1f%%, Go runtime %.1f%%, clock reads %.1f%%, program %.1f%%\n", t, 100*k/t, 100*r/t, 100*c/t, 100*u/t}' "$out/syms"
head -${TOP:-25} "$out/syms"
