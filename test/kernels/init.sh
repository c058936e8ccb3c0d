#!/bin/sh
# PID 1 of make kernels' QEMU guests: mounts what the tests need, loads the
# modules, finds the two virtio-net NICs, runs every test binary with
# CI=true and writes its output to the second serial port, then powers off.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
out=/dev/ttyS1
busybox stty -F $out raw -echo 2>/dev/null
say() { echo "$@" >$out; }
for m in $(cat /modules/order); do
	insmod /modules/$m 2>/dev/null || say "=== MODULE $m failed"
done
ip link set lo up
echo 8 >/proc/sys/vm/nr_hugepages
ulimit -l unlimited 2>/dev/null
# The virtio-net NICs, in PCI order.
nics=
for i in 1 2 3 4 5 6 7 8 9 10; do
	nics=
	for d in /sys/class/net/*; do
		[ "$(basename "$(readlink "$d/device/driver" 2>/dev/null)")" = virtio_net ] && nics="$nics $(basename "$d")"
	done
	set -- $nics
	[ $# -ge 5 ] && break
	sleep 1
done
set -- $nics
[ $# -ge 4 ] && export XDPKIT_NIC_PAIRS="$1,$2 $3,$4"
[ $# -ge 5 ] && export XDPKIT_NIC_NOIOMMU="$5"
export CI=true XDPKIT_APPS_BIN=/xdpkit/apps HOME=/tmp TMPDIR=/tmp
run=$(cat /xdpkit/run)
say "=== KERNEL $(uname -r) nproc $(busybox nproc) nics ${XDPKIT_NIC_PAIRS:-none}, without iommu_platform ${XDPKIT_NIC_NOIOMMU:-none}"
for t in /xdpkit/*.test; do
	n=$(basename "$t" .test)
	case $n in
	apps_main) d=/src/apps ;;
	apps_*) d=/src/apps/$(echo "${n#apps_}" | tr _ /) ;;
	*) d=/src/$(echo "$n" | tr _ /) ;;
	esac
	mkdir -p "$d"
	say "=== PKG $n"
	if [ -n "$run" ]; then
		(cd "$d" && "$t" -test.v -test.count=1 -test.timeout=20m -test.run "$run") >$out 2>&1
	else
		(cd "$d" && "$t" -test.v -test.count=1 -test.timeout=20m) >$out 2>&1
	fi
	say "=== EXIT $n $?"
done
say "=== DONE"
sync
poweroff -f
