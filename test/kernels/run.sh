#!/usr/bin/env bash
# make kernels: xdpkit's tests on Debian's kernels, each booted in QEMU.
#
# For each kernel of KERNELS (default: "6.1 6.12 6.17 host") it takes the
# newest Debian package of that series (6.1 and 6.12 from the machine's own
# bookworm sources, 6.17 from trixie-backports through a private apt
# configuration under $CACHE that leaves the machine's sources alone),
# builds an initramfs (busybox, iproute2's ip, setpriv, the modules the
# tests need loaded in dependency order, the test binaries built with
# CGO_ENABLED=0), boots it under TCG (no KVM; one host thread for two
# virtual CPUs) and runs every test binary with CI=true. "host" runs the
# same binaries on the running kernel, without QEMU.
#
# The guest gets no network to the host: its four virtio-net NICs
# (iommu_platform=on, so that virtio_net can use the DMA API that AF_XDP
# zero-copy needs) are joined in pairs, each pair only to each other through a QEMU hub.
# The tests find them through XDPKIT_NIC_PAIRS (test/vethns.NewNICPair).
#
# Prints a table: package x kernel, passed/failed/skipped tests. Exit 1 on
# any failure, on a package binary that did not finish, or on a guest that
# did not report back.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"

KERNELS=${KERNELS:-"6.1 6.12 6.17 host"}
CACHE=${KERNELS_CACHE:-/var/cache/xdpkit-kernels}
GUEST_MEM=${GUEST_MEM:-3G}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-2400} # seconds per boot
RUN=${RUN:-}                          # -test.run for every binary (empty: all)
COUNT=${COUNT:-1}                     # -test.count for every binary
GO=${GO:-go}
out=${KERNELS_OUT:-$top/test/kernels/out}
mkdir -p "$CACHE" "$out"

# The library's packages whose tests touch the kernel, and the apps'.
# csum, nt, pkt, internal/pkt and internal/asmtest compute on bytes only;
# they run in make test and are left out here.
LIBPKGS=${LIBPKGS-"umem xsk txpath rxpath mq test/vethns test/conformance internal/caps internal/netdev internal/seccomp internal/xdpprog examples/ownprog examples/udpecho"}
APPPKGS=${APPPKGS-". xdpfwd xdprecv xdpdoctor internal/nexthop"}

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx insmod && file -L /bin/busybox 2>/dev/null | grep -q static || need+=(busybox-static)
command -v xz >/dev/null || need+=(xz-utils)
command -v cpio >/dev/null || need+=(cpio)
command -v setpriv >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
command -v file >/dev/null || need+=(file)
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
busybox=$(command -v busybox)
[ -x /bin/busybox ] && busybox=/bin/busybox

# --- kernel packages -------------------------------------------------------
bpo=$CACHE/apt-trixie-backports
aptb=(-o Dir::Etc::SourceList="$bpo/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	-o Dir::State::Lists="$bpo/lists" -o Dir::Cache="$bpo/cache" -o APT::Get::List-Cleanup=0)
bpo_ready=
apt_bpo() {
	if [ -z "$bpo_ready" ]; then
		mkdir -p "$bpo/lists/partial" "$bpo/cache/archives/partial"
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main" >"$bpo/sources.list"
		# Lists younger than a day are kept.
		if [ -z "$(find "$bpo/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
			apt-get "${aptb[@]}" update -qq
		fi
		bpo_ready=1
	fi
	"$@" "${aptb[@]}"
}
host_ready=
apt_host() {
	if [ -z "$host_ready" ] && ! apt-cache show 'linux-image-6.1.0-*-amd64' >/dev/null 2>&1; then
		apt-get update -qq
	fi
	host_ready=1
	"$@"
}

# pkgname SERIES: the newest linux-image package of SERIES.
pkgname() {
	case $1 in
	6.1) apt_host apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
	6.12) apt_host apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
	6.17) apt_bpo apt-cache search --names-only '^linux-image-6\.17\.[0-9]+\+deb13-amd64$' ;;
	*) echo "unknown kernel series $1" >&2; return 1 ;;
	esac | awk '{print $1}' | sort -V | tail -1
}

# kernel SERIES: unpacks the package into $CACHE/root/<release> and prints
# the release.
kernel() {
	local name rel dir
	name=$(pkgname "$1")
	[ -n "$name" ] || { echo "no linux-image package for $1" >&2; return 1; }
	rel=${name#linux-image-}
	dir=$CACHE/root/$rel
	if [ ! -f "$dir/.done" ]; then
		rm -rf "$dir" && mkdir -p "$dir"
		(cd "$CACHE" && rm -f "$name"_*.deb &&
			if [ "$1" = 6.17 ]; then apt_bpo apt-get download -qq "$name"; else apt_host apt-get download -qq "$name"; fi) >&2
		dpkg-deb -x "$CACHE/$name"_*.deb "$dir"
		rm -f "$CACHE/$name"_*.deb
		touch "$dir/.done"
	fi
	echo "$rel"
}

# --- test binaries ---------------------------------------------------------
bin=$out/bin
rm -rf "$bin" && mkdir -p "$bin/apps"
echo "kernels: building test binaries" >&2
for p in $LIBPKGS; do
	n=$(echo "$p" | tr / _)
	CGO_ENABLED=0 $GO test -c -o "$bin/$n.test" "./$p"
done
for p in $APPPKGS; do
	n=apps_$(echo "$p" | tr / _ | sed 's/^\.$/main/')
	(cd apps && CGO_ENABLED=0 $GO test -c -o "$bin/$n.test" "./$p")
done
(cd apps && CGO_ENABLED=0 $GO build -o "$bin/apps/" ./xdpgen ./xdpfwd ./xdprecv ./xdpdemo ./xdpndr)
CGO_ENABLED=0 $GO build -o "$bin/apps/without" ./internal/seccomp/without

# pkgdir NAME: the source directory of a test binary (its testdata).
pkgdir() {
	local n=$1
	n=${n%.test}
	case $n in
	apps_main) echo apps ;;
	apps_*) echo "apps/$(echo "${n#apps_}" | tr _ /)" ;;
	*) echo "$n" | tr _ / ;;
	esac
}

# --- initramfs ---------------------------------------------------------------
# modules SERIES_ROOT RELEASE: the module files the tests need, dependencies
# first.
MODULES="veth macvlan ipvlan bridge tun dummy 8021q netkit virtio_pci virtio_net sch_tbf"
modfile() { find "$1" -name "$2.ko" -o -name "$2.ko.xz" -o -name "$2.ko.zst" | head -1; }
modcat() {
	case $1 in
	*.xz) xz -dc "$1" ;;
	*.zst) zstd -qdc "$1" ;;
	*) cat "$1" ;;
	esac
}
declare -A seen
modorder() { # root moddir name (seen: within one call)
	local f deps d
	[ -n "${seen[$3]:-}" ] && return 0
	seen[$3]=1
	f=$(modfile "$2" "$3")
	[ -n "$f" ] || return 0 # built in, or not in this kernel
	deps=$(modcat "$f" | grep -a -o -m1 'depends=[a-z0-9_,-]*' | head -1 | cut -d= -f2 | tr , ' ')
	for d in $deps; do modorder "$1" "$2" "$d"; done
	echo "$f"
}

initramfs() { # release root -> prints path
	local rel=$1 root=$2 ir=$out/initramfs-$rel img=$out/initramfs-$rel.cpio.gz moddir f lib
	rm -rf "$ir" && mkdir -p "$ir"/{bin,sbin,proc,sys,dev,tmp,run,mnt,modules,xdpkit,lib64,etc}
	cp "$busybox" "$ir/bin/busybox"
	for a in sh mount mkdir insmod cat echo ln ls sleep poweroff sync mountpoint uname env grep tr readlink basename stty nproc true false ping seq; do ln -sf busybox "$ir/bin/$a"; done
	# iproute2's ip and util-linux's setpriv with their libraries.
	for f in "$(command -v ip)" "$(command -v setpriv)"; do
		cp "$f" "$ir/bin/"
		for lib in $(ldd "$f" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do
			mkdir -p "$ir$(dirname "$lib")" && cp -L "$lib" "$ir$lib"
		done
	done
	moddir=$(find "$root" -maxdepth 4 -mindepth 3 -type d -path '*/lib/modules/*' | head -1)
	: >"$ir/modules/order"
	for f in $(for m in $MODULES; do modorder "$root" "$moddir" "$m"; done | awk '!seen[$0]++'); do
		{
			b=$(basename "$f")
			case $b in
			*.xz) xz -dc "$f" >"$ir/modules/${b%.xz}" ;;
			*.zst) zstd -qdc "$f" >"$ir/modules/${b%.zst}" ;;
			*) cp "$f" "$ir/modules/" ;;
			esac
			echo "$b" | sed 's/\.ko.*$/.ko/' >>"$ir/modules/order"
		}
	done
	cp -r "$bin"/* "$ir/xdpkit/"
	for t in "$bin"/*.test; do
		d=$(pkgdir "$(basename "$t")")
		mkdir -p "$ir/src/$d"
		[ -d "$d/testdata" ] && cp -r "$d/testdata" "$ir/src/$d/"
	done
	cp README.md "$ir/src/" # tests that read README's tables
	echo "$RUN" >"$ir/xdpkit/run"
	echo "$COUNT" >"$ir/xdpkit/count"
	cp test/kernels/init.sh "$ir/init"
	chmod +x "$ir/init"
	(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) >"$img"
	rm -rf "$ir"
	echo "$img"
}

# --- runs ---------------------------------------------------------------------
# Each run writes $out/<kernel>.log: "=== PKG name", go test -test.v output,
# "=== EXIT name code" per binary, and "=== DONE" at the end.
boot() { # series release
	local rel=$2 root img log=$out/$1.log
	root=$CACHE/root/$rel
	img=$(initramfs "$rel" "$root")
	echo "kernels: booting $rel" >&2
	local vmlinuz
	vmlinuz=$(ls "$root"/boot/vmlinuz-*)
	# Four virtio-net NICs: 1 and 2 on hub 0, 3 and 4 on hub 1, two pairs
	# joined only to each other (no host network).
	local nics=() i
	for i in 1 2 3 4; do
		nics+=(-netdev "hubport,id=h$i,hubid=$(((i - 1) / 2))"
			-device "virtio-net-pci,netdev=h$i,disable-legacy=on,iommu_platform=on,romfile=,mac=52:54:00:00:00:0$i")
	done
	# A fifth, alone on hub 2, without iommu_platform: virtio_net cannot
	# map a UMEM for DMA there (XDPKIT_NIC_NOIOMMU).
	nics+=(-netdev hubport,id=h5,hubid=2 -device virtio-net-pci,netdev=h5,disable-legacy=on,romfile=,mac=52:54:00:00:00:05)
	# -nic none: no default NIC.
	timeout --foreground "$GUEST_TIMEOUT" qemu-system-x86_64 \
		-accel tcg,thread=single -cpu max -smp 2 -m "$GUEST_MEM" \
		-nographic -no-reboot -nic none \
		-kernel "$vmlinuz" -initrd "$img" \
		-append "console=ttyS0 panic=-1 quiet loglevel=4 xdpkit.kernel=$1" \
		-serial file:"$out/$1.console" -serial file:"$log" -monitor none \
		"${nics[@]}" \
		</dev/null >/dev/null 2>"$out/$1.qemu" || echo "kernels: qemu for $1 exited $?" >&2
	rm -f "$img"
}

runhost() { # (host)
	local log=$out/host.log t d code
	: >"$log"
	for t in "$bin"/*.test; do
		d=$(pkgdir "$(basename "$t")")
		echo "=== PKG $(basename "$t" .test)" >>"$log"
		set +e
		(cd "$d" && CI=true XDPKIT_APPS_BIN="$bin/apps" "$t" -test.v -test.count=1 -test.timeout=20m ${RUN:+-test.run "$RUN"}) >>"$log" 2>&1
		code=$?
		set -e
		echo "=== EXIT $(basename "$t" .test) $code" >>"$log"
	done
	echo "=== DONE" >>"$log"
}

# Guests run JOBS at a time (each takes one host CPU: TCG with one
# thread), the host's run after them.
JOBS=${KERNELS_JOBS:-2}
start=$(date +%s)
timed() {
	local s
	s=$(date +%s)
	"$@"
	echo "kernels: ${*: -1} took $(($(date +%s) - s)) s" >&2
}
# Fetched one after the other, and by one run of this script at a time:
# apt takes a lock of its own and fails rather than wait for it.
exec 9>"$CACHE/.lock"
flock 9
declare -A release
for k in $KERNELS; do
	[ "$k" = host ] || release[$k]=$(kernel "$k")
done
flock -u 9
# No log of an earlier run may stand for this one.
for k in $KERNELS; do rm -f "$out/$k.log" "$out/$k.console" "$out/$k.qemu"; done
declare -A job
running=0
for k in $KERNELS; do
	[ "$k" = host ] && continue
	timed boot "$k" "${release[$k]}" &
	job[$k]=$!
	running=$((running + 1))
	if [ "$running" -ge "$JOBS" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
bootfail=0
for k in "${!job[@]}"; do
	wait "${job[$k]}" || { echo "kernels: the run on $k failed (exit $?)" >&2; bootfail=1; }
done
for k in $KERNELS; do
	[ "$k" = host ] && timed runhost host
done

# --- table --------------------------------------------------------------------
fail=0
printf '\n%-22s' package
for k in $KERNELS; do printf ' %-16s' "$k"; done
printf '\n'
names=$(for t in "$bin"/*.test; do basename "$t" .test; done)
for n in $names; do
	printf '%-22s' "$(pkgdir "$n")"
	for k in $KERNELS; do
		log=$out/$k.log; [ -f "$log" ] && tr -d "\r" <"$log" >"$log.tmp" && mv "$log.tmp" "$log"
		cell=$(awk -v n="$n" '
			$1=="===" && $2=="PKG" {in_=($3==n); next}
			$1=="===" && $2=="EXIT" && $3==n {code=$4; done_=1; in_=0; next}
			in_ && /^--- PASS/ {p++}
			in_ && /^ *--- FAIL/ {f++}
			in_ && /^ *--- SKIP/ {s++}
			in_ && /not applicable: needs / {na++}
			END {
				if (!done_) {print "NOT RUN"; exit}
				bad = (f > 0 || s > na || code != 0)
				printf "%d/%d/%d%s%s", p+0, f+0, na+0, (s > na ? " skip" (s-na) : ""), (code!=0 ? " exit" code : "")
			}' "$log" 2>/dev/null || echo "NO LOG")
		case $cell in *exit*|*skip*|NOT*|NO*) fail=1 ;; */0/*) ;; *) fail=1 ;; esac
		printf ' %-16s' "$cell"
	done
	printf '\n'
done
echo "(cells: passed top-level tests / failed tests / tests not applicable (a kernel feature missing); \"skipN\": N skips that name no missing feature, a failure; logs in $out)"
for k in $KERNELS; do
	f=$(grep -ho 'not applicable: needs [^:]*' "$out/$k.log" 2>/dev/null | sed 's/not applicable: needs //' | sort | uniq -c | awk '{c=$1; $1=""; printf "%s%s x%d", (n++ ? ";" : ""), $0, c}' || true)
	if [ -n "$f" ]; then echo "$k: not applicable:$f"; fi
	# A feature README's kernel table says this kernel has must not be
	# missing: that would be a probe gone wrong.
	while read -r feat; do
		[ -n "$feat" ] || continue
		row=$(grep -F "| $feat" README.md | head -1 || true)
		tested=$(echo "$row" | awk -F'|' '{print $(NF-1)}')
		with=" ${tested%%without:*} "
		case $with in *" all "* | *" $k "* | *" $k;"*)
			echo "kernels: $k: \"$feat\" not applicable, but README's kernel table says $k has it"
			fail=1 ;;
		esac
	done < <(grep -ho 'not applicable: needs [^(]*' "$out/$k.log" 2>/dev/null | sed 's/not applicable: needs //; s/ *$//' | sort -u || true)
	if grep -q '^=== \(MODULE\|SETUP\)' "$out/$k.log" 2>/dev/null; then
		grep '^=== \(MODULE\|SETUP\)' "$out/$k.log" | sed "s/^/kernels: $k: /"
		fail=1
	fi
done
[ "$bootfail" = 0 ] || fail=1
for k in $KERNELS; do
	grep -q '^=== DONE' "$out/$k.log" 2>/dev/null || { echo "kernels: $k did not finish (see $out/$k.log, $out/$k.console)"; fail=1; }
	# go test -v prints what a test logged before its "--- FAIL" line.
	grep -h -B15 -A2 '^ *--- FAIL' "$out/$k.log" 2>/dev/null | head -150 | sed "s/^/$k: /" || true
done
echo "kernels: $(($(date +%s) - start)) s in all"
# The failed tests last, where the end of a CI log shows them.
for k in $KERNELS; do
	awk -v k="$k" '$1=="===" && $2=="PKG" {pkg=$3}
		/^ *--- FAIL: / {sub(/^ *--- FAIL: /, ""); printf "kernels: FAIL on %s: %s %s\n", k, pkg, $1}
		/^panic: / {printf "kernels: PANIC on %s: %s\n", k, pkg}' "$out/$k.log" 2>/dev/null || true
	# A NIC of the guest whose transmit queue stopped (the kernel's
	# watchdog): the tests that send through it fail, and the cause is the
	# emulated device, not the socket under test (docs/kernels.md). The
	# first report per NIC, with the guest's uptime ("eth3: NETDEV
	# WATCHDOG: CPU: 1: ..." on newer kernels, "NETDEV WATCHDOG: eth3
	# (virtio_net): ..." on older ones).
	grep -a 'NETDEV WATCHDOG' "$out/$k.console" 2>/dev/null | tr -d '\r' | sed 's/^.*\(\[ *[0-9.]*\]\)/\1/' |
		awk '{for (i = 2; i <= NF; i++) if ($i == "NETDEV") nic = ($(i + 2) == "CPU:" ? $(i - 1) : $(i + 2))} !seen[nic]++' |
		sed "s/^/kernels: $k: a NIC's transmit queue stopped, tests sending through it fail: /" || true
done
# Every test and subtest of every run, in the plain form CI reads.
for k in $KERNELS; do cat "$out/$k.log" 2>/dev/null || true; done | awk -v bad="$fail" '
	/^ *--- PASS/ {p++} /^ *--- FAIL/ {f++} /^ *--- SKIP/ {s++}
	/^panic: / {f++}
	END {if (bad && !f) f = 1; printf "kernels: %d passed, %d failed, %d skipped\n", p, f, s}'
exit $fail
