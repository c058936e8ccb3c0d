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
# The virtio-net NICs, by the MAC addresses run.sh gave them: 1 and 2 are
# one pair, 3 and 4 the other, 5 has no iommu_platform.
nic() {
	for d in /sys/class/net/*; do
		[ "$(cat "$d/address" 2>/dev/null)" = "52:54:00:00:00:0$1" ] && basename "$d" && return
	done
}
for i in $(seq 1 30); do
	n5=$(nic 5)
	[ -n "$n5" ] && [ -n "$(nic 1)" ] && [ -n "$(nic 4)" ] && break
	sleep 1
done
if [ -n "$(nic 1)" ] && [ -n "$(nic 2)" ] && [ -n "$(nic 3)" ] && [ -n "$(nic 4)" ] && [ -n "$(nic 5)" ]; then
	export XDPKIT_NIC_PAIRS="$(nic 1),$(nic 2) $(nic 3),$(nic 4)" XDPKIT_NIC_NOIOMMU="$(nic 5)"
else
	say "=== SETUP: not all five virtio-net NICs came up: $(ls /sys/class/net | tr '\n' ' ')"
fi
export CI=true XDPKIT_APPS_BIN=/xdpkit/apps HOME=/tmp TMPDIR=/tmp
run=$(cat /xdpkit/run)
count=$(cat /xdpkit/count 2>/dev/null || true)
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
		(cd "$d" && "$t" -test.v -test.count="${count:-1}" -test.timeout=20m -test.run "$run") >$out 2>&1
	else
		(cd "$d" && "$t" -test.v -test.count="${count:-1}" -test.timeout=20m) >$out 2>&1
	fi
	say "=== EXIT $n $?"
done
say "=== DONE"
sync
poweroff -f
