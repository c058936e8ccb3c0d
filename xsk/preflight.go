package xsk

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/umem"
)

// PreflightConfig says what the apps would set up: Queues sockets of
// FrameCount frames of FrameSize bytes each. A nil *PreflightConfig
// means one queue, the frame size FrameSizeFor picks and 4096 frames.
type PreflightConfig struct {
	Queues     int
	FrameSize  int // 0: FrameSizeFor the device
	FrameCount int // per queue; 0: 4096
}

// Check is one finding of Preflight: Status is "ok", "info", "warn" (the
// apps run, worse than they could) or "fail" (they would stop); Fix is
// the command that fixes a warn or fail.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// KernelFeature is one row of README's kernel table, as probed.
type KernelFeature struct {
	Name    string `json:"name"`
	Linux   string `json:"linux"`
	Present bool   `json:"present"`
	Probe   string `json:"probe"` // how it was probed
}

// AppChoice is what an app would choose on the device, and why.
type AppChoice struct {
	App        string `json:"app"`
	AttachMode string `json:"attach_mode"`
	BindMode   string `json:"bind_mode"`
	CopyPolicy string `json:"copy_policy"`
	Checksum   string `json:"checksum"`
	Why        string `json:"why"`
}

// PreflightReport is what Preflight found.
type PreflightReport struct {
	Interface    string          `json:"interface"`
	Kernel       string          `json:"kernel"`
	Features     []KernelFeature `json:"kernel_features"`
	Driver       string          `json:"driver"`
	DriverKnown  bool            `json:"driver_in_table"`
	DriverNotes  DriverNotes     `json:"driver_notes"`
	XDPFeatures  string          `json:"xdp_features"`
	XSKFeatures  string          `json:"xsk_features"`
	FeaturesFrom string          `json:"features_from"`
	ZeroCopy     bool            `json:"zero_copy"`
	ZCMaxSegs    uint32          `json:"zero_copy_max_segments"`
	CopyCost     string          `json:"copy_cost,omitempty"`
	RxQueues     int             `json:"rx_queues"`
	TxQueues     int             `json:"tx_queues"`
	Channels     string          `json:"channels"`
	Rings        string          `json:"rings"`
	MTU          int             `json:"mtu"`
	FrameSize    int             `json:"frame_size"`
	FrameWhy     string          `json:"frame_size_why"`
	NAPI         string          `json:"napi"`
	Privileges   string          `json:"privileges"`
	UMEMBytes    uint64          `json:"umem_bytes"`
	Memlock      string          `json:"memlock"`
	XDPProgram   string          `json:"xdp_program"`
	Apps         []AppChoice     `json:"apps"`
	Checks       []Check         `json:"checks"`
}

// Failed reports whether a check failed.
func (r *PreflightReport) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == "fail" {
			return true
		}
	}
	return false
}

// Err returns nil, or an error that lists each failed check with its fix:
// what an app prints instead of an errno.
func (r *PreflightReport) Err() error {
	var b []string
	for _, c := range r.Checks {
		if c.Status == "fail" {
			b = append(b, fmt.Sprintf("%s: %s (fix: %s)", c.Name, c.Detail, c.Fix))
		}
	}
	if len(b) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %s", ErrPreflight, r.Interface, strings.Join(b, "; "))
}

// ErrPreflight is what PreflightReport.Err wraps.
var ErrPreflight = errors.New("xsk: preflight failed")

// copyCost says what copy mode costs, for a device without zero-copy.
const copyCost = "the kernel copies every frame once between the driver's buffers and the UMEM (one memcpy per packet each way, and an skb per TX packet); the generic path's rates, well below zero-copy's"

// Preflight reads what the apps would meet on the interface called
// ifname in the calling thread's network namespace, before they touch
// it: kernel features (probed), the device's driver, XDP and XSK
// features, channels, rings, MTU against the frame size, NAPI settings,
// privileges and locked memory against the UMEM, what xdpgen, xdprecv
// and xdpfwd would choose, and each problem with the command that fixes
// it. It changes nothing. It fails only when the interface cannot be
// read.
func Preflight(ifname string, cfg *PreflightConfig) (*PreflightReport, error) {
	c := PreflightConfig{Queues: 1, FrameCount: 4096}
	if cfg != nil {
		if cfg.Queues > 0 {
			c.Queues = cfg.Queues
		}
		if cfg.FrameCount > 0 {
			c.FrameCount = cfg.FrameCount
		}
		c.FrameSize = cfg.FrameSize
	}
	info, err := Device(ifname)
	if err != nil {
		return nil, err
	}
	r := &PreflightReport{Interface: ifname, Kernel: kernelRelease(), Driver: info.Driver,
		XDPFeatures: info.XDPFeatures.String(), XSKFeatures: info.XSKFeatures.String(), FeaturesFrom: info.FeaturesFrom,
		ZCMaxSegs: info.XDPZeroCopyMaxSegs, RxQueues: info.RxQueues, TxQueues: info.TxQueues, MTU: info.MTU}
	if r.Driver == "" {
		r.Driver = info.Kind
	}
	r.DriverNotes, r.DriverKnown = Driver(info.Driver)
	r.Features = probeFeatures(info)
	add := func(name, status, detail, fix string) {
		r.Checks = append(r.Checks, Check{Name: name, Status: status, Detail: detail, Fix: fix})
	}

	// Kernel.
	for _, f := range r.Features {
		if f.Name == "shared UMEM across queues and devices" && !f.Present {
			add("kernel", "fail", "Linux "+r.Kernel+" lacks shared UMEM (5.10), which xdpfwd and several queues need", "boot Linux 5.10 or later")
		}
	}

	// Zero-copy.
	r.ZeroCopy = info.XDPFeatures&XDPXSKZeroCopy != 0
	switch {
	case r.ZeroCopy:
		add("zero-copy", "ok", fmt.Sprintf("driver %s advertises AF_XDP zero-copy (max %d segments per packet)", r.Driver, info.XDPZeroCopyMaxSegs), "")
	case info.FeaturesFrom != "netdev-genl":
		r.CopyCost = copyCost
		add("zero-copy", "info", "unknown: the kernel does not report XDP features (netdev family, Linux 6.3); the apps try zero-copy and fall back to copy mode; "+copyCost, "")
	default:
		r.CopyCost = copyCost
		add("zero-copy", "warn", fmt.Sprintf("driver %s does not offer AF_XDP zero-copy (xdp-features %s); %s", r.Driver, info.XDPFeatures, copyCost),
			"a NIC whose driver has zero-copy (i40e, ice, ixgbe, mlx5_core; virtio_net with iommu_platform=on where the kernel advertises it)")
	}

	// Queues and channels.
	ch, chErr := netdev.GetChannels(ifname)
	if chErr == nil {
		r.Channels = ch.String()
	} else {
		r.Channels = "unknown (" + chErr.Error() + ")"
	}
	inUse := max(info.RxQueues, info.TxQueues)
	if c.Queues > inUse {
		add("queues", "fail", fmt.Sprintf("%d queues asked, %d in use on %s", c.Queues, inUse, ifname), fmt.Sprintf("ethtool -L %s combined %d", ifname, c.Queues))
	} else {
		add("queues", "ok", fmt.Sprintf("%d queues asked, %d in use", c.Queues, inUse), "")
	}
	if (info.Driver == "virtio_net" || info.Driver == "ena") && chErr == nil && ch.MaxCombined > 0 && 2*ch.Combined > ch.MaxCombined {
		add("XDP TX queues", "warn", fmt.Sprintf("%s needs a spare queue pair per queue for XDP (%d of %d combined in use): native XDP fails with \"too few free TX rings\"", info.Driver, ch.Combined, ch.MaxCombined),
			fmt.Sprintf("ethtool -L %s combined %d", ifname, max(1, ch.MaxCombined/2)))
	}

	// Rings.
	if rg, err := netdev.GetRings(ifname); err == nil {
		r.Rings = rg.String()
		if rg.RX > 0 && rg.RX < 512 && rg.MaxRX >= 1024 {
			add("rings", "warn", fmt.Sprintf("RX ring of %d descriptors drops bursts at high rates", rg.RX), fmt.Sprintf("ethtool -G %s rx %d", ifname, min(rg.MaxRX, 2048)))
		}
	} else {
		r.Rings = "unknown (" + err.Error() + ")"
	}

	// MTU against the frame size.
	r.FrameSize, r.FrameWhy = c.FrameSize, "-frame-size"
	if r.FrameSize == 0 {
		r.FrameSize = FrameSizeFor(info)
		r.FrameWhy = "chosen for the driver and MTU (FrameSizeFor)"
		if r.DriverKnown && r.DriverNotes.PageFrames {
			r.FrameWhy = info.Driver + " needs page-sized frames for zero-copy"
		}
	}
	switch {
	case info.MTU+xdpFrameOverhead > r.FrameSize:
		fix := fmt.Sprintf("ip link set dev %s mtu %d", ifname, r.FrameSize-xdpFrameOverhead)
		if r.FrameSize < FrameSizePage {
			fix = "-frame-size 4096, or " + fix
		}
		add("MTU", "fail", fmt.Sprintf("MTU %d plus %d bytes of headroom and headers does not fit a %d-byte frame (only multi-buffer sockets take it)", info.MTU, xdpFrameOverhead, r.FrameSize), fix)
	case r.DriverKnown && r.DriverNotes.PageFrames && r.FrameSize < FrameSizePage:
		add("frame size", "warn", fmt.Sprintf("%s binds zero-copy only with page-sized frames; with %d the bind falls back to copy mode", info.Driver, r.FrameSize), "-frame-size 4096")
	default:
		add("MTU", "ok", fmt.Sprintf("MTU %d fits a %d-byte frame", info.MTU, r.FrameSize), "")
	}
	if r.DriverKnown && r.DriverNotes.XDPMaxMTU > 0 && info.MTU > r.DriverNotes.XDPMaxMTU {
		add("XDP MTU", "fail", fmt.Sprintf("%s takes a native XDP program only up to MTU %d", info.Driver, r.DriverNotes.XDPMaxMTU),
			fmt.Sprintf("ip link set dev %s mtu %d", ifname, r.DriverNotes.XDPMaxMTU))
	}

	// NAPI.
	r.NAPI = napiSummary(ifname, info.Index)

	// Privileges and locked memory.
	eff := capEff()
	has := func(bit uint) bool { return eff&(1<<bit) != 0 }
	var missing []string
	for _, cp := range []struct {
		name string
		bit  uint
	}{{"CAP_NET_ADMIN", unix.CAP_NET_ADMIN}, {"CAP_NET_RAW", unix.CAP_NET_RAW}, {"CAP_BPF", unix.CAP_BPF}} {
		if !has(cp.bit) && !(cp.name == "CAP_BPF" && has(unix.CAP_SYS_ADMIN)) {
			missing = append(missing, cp.name)
		}
	}
	r.Privileges = fmt.Sprintf("uid %d, effective capabilities %#x", os.Geteuid(), eff)
	if len(missing) > 0 {
		add("privileges", "fail", "missing "+strings.Join(missing, ", "), "run as root, or: setcap cap_net_admin,cap_net_raw,cap_bpf,cap_ipc_lock+ep ./APP")
	} else {
		add("privileges", "ok", "CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF held", "")
	}
	r.UMEMBytes = uint64(c.Queues) * uint64(c.FrameCount) * uint64(r.FrameSize)
	var lim unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
	r.Memlock = fmt.Sprintf("RLIMIT_MEMLOCK %s, CAP_IPC_LOCK %v", limitString(lim.Cur), has(unix.CAP_IPC_LOCK))
	switch {
	case has(unix.CAP_IPC_LOCK) || lim.Cur == unix.RLIM_INFINITY:
		add("locked memory", "ok", fmt.Sprintf("UMEM of %d bytes (%d queues x %d frames x %d bytes); %s", r.UMEMBytes, c.Queues, c.FrameCount, r.FrameSize, r.Memlock), "")
	case r.UMEMBytes > lim.Cur:
		add("locked memory", "fail", fmt.Sprintf("UMEM of %d bytes is above RLIMIT_MEMLOCK %d", r.UMEMBytes, lim.Cur), "ulimit -l unlimited (or LimitMEMLOCK=infinity in a systemd unit, or give the app CAP_IPC_LOCK)")
	default:
		add("locked memory", "ok", fmt.Sprintf("UMEM of %d bytes fits RLIMIT_MEMLOCK %d", r.UMEMBytes, lim.Cur), "")
	}

	// Another XDP program.
	r.XDPProgram = "none"
	if l, err := netlink.LinkByIndex(info.Index); err == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached {
		x := l.Attrs().Xdp
		r.XDPProgram = fmt.Sprintf("program id %d attached (mode %d)", x.ProgId, x.AttachMode)
		add("XDP program", "fail", "another XDP program is attached: xdprecv and xdpfwd cannot attach theirs (use xsk.UseMap with it instead)",
			fmt.Sprintf("ip link set dev %s xdp off (or xdpgeneric off), if it is not needed", ifname))
	}

	r.Apps = appChoices(info, r)
	return r, nil
}

func appChoices(info DeviceInfo, r *PreflightReport) []AppChoice {
	bind, bindWhy := "copy", "the driver offers no zero-copy"
	if r.ZeroCopy {
		bind, bindWhy = "zero-copy", "the driver advertises zero-copy"
	} else if info.FeaturesFrom != "netdev-genl" {
		bind, bindWhy = "zero-copy, else copy", "the kernel does not report XDP features"
	}
	attach, attachWhy := "native", "the driver has native XDP"
	if info.FeaturesFrom == "netdev-genl" && info.XDPFeatures&XDPRedirect == 0 {
		attach, attachWhy = "generic", "the driver lacks native XDP_REDIRECT"
	} else if info.FeaturesFrom != "netdev-genl" {
		attach, attachWhy = "native, else generic", "the kernel does not report XDP features"
	}
	sw, swWhy := info.SoftwareChecksum()
	csumGen := "software (csum, fused with the copy)"
	csumWhy := "no TX checksum offload through AF_XDP metadata"
	switch {
	case sw:
		csumWhy = swWhy
	case r.ZeroCopy && info.XSKFeatures&XSKTxChecksum != 0:
		csumGen, csumWhy = "offload (TX metadata)", "the driver offloads checksums of zero-copy frames"
	}
	genAttach, genWhy := "none", "a TX-only socket needs no program on "+r.Driver
	if txProgramNeeded(TXProgramAuto, info.Driver, r.ZeroCopy) {
		genAttach, genWhy = "native pass-everything program", r.Driver+" sends zero-copy frames only with a native XDP program attached ("+r.DriverNotes.Source+")"
	}
	return []AppChoice{
		{App: "xdpgen", AttachMode: genAttach, BindMode: bind, CopyPolicy: "auto", Checksum: csumGen,
			Why: genWhy + "; bind: " + bindWhy + "; checksum: " + csumWhy},
		{App: "xdprecv", AttachMode: attach, BindMode: bind, CopyPolicy: "small packets copied out, large ones lent (rxpath)", Checksum: "not computed (received as is)",
			Why: "attach: " + attachWhy + "; bind: " + bindWhy},
		{App: "xdpfwd", AttachMode: attach, BindMode: bind, CopyPolicy: "frames forwarded in the shared UMEM, no copy", Checksum: "L3: incremental update of the IPv4 header checksum",
			Why: "attach: " + attachWhy + "; bind: " + bindWhy},
	}
}

// featureProbes are README's kernel table, each with its probe.
var featureProbes = []struct {
	name, linux string
	probe       func(DeviceInfo) (bool, string)
}{
	{"AF_XDP sockets, copy mode", "4.18", func(DeviceInfo) (bool, string) {
		fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return errors.Is(err, unix.EPERM), "socket(AF_XDP): " + err.Error()
		}
		unix.Close(fd)
		return true, "socket(AF_XDP)"
	}},
	{"need_wakeup, ring flags in XDP_MMAP_OFFSETS", "5.4", btfProbe("xsk_set_rx_need_wakeup")},
	{"extended XDP_STATISTICS (ring full, fill empty)", "5.9", func(DeviceInfo) (bool, string) {
		fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return false, "socket(AF_XDP): " + err.Error()
		}
		defer unix.Close(fd)
		_, n, err := getStats(fd)
		if err != nil {
			return false, "getsockopt(XDP_STATISTICS): " + err.Error()
		}
		return n >= statsSize, fmt.Sprintf("getsockopt(XDP_STATISTICS) gave %d bytes", n)
	}},
	{"XDP attached as a bpf_link", "5.9", btfProbe("bpf_xdp_link_attach")},
	{"shared UMEM across queues and devices", "5.10", btfProbe("xp_create_and_assign_umem")},
	{"SO_PREFER_BUSY_POLL, SO_BUSY_POLL_BUDGET", "5.11", func(DeviceInfo) (bool, string) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return false, err.Error()
		}
		defer unix.Close(fd)
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 0)
		return err == nil, "setsockopt(SO_PREFER_BUSY_POLL) on a UDP socket"
	}},
	{"XDP programs with BPF_F_XDP_HAS_FRAGS", "5.18", btfProbe("bpf_xdp_get_buff_len")},
	{"RX metadata kfuncs (hash, timestamp)", "6.3", btfProbe("bpf_xdp_metadata_rx_timestamp")},
	{"netdev genetlink family (XDP features)", "6.3", func(i DeviceInfo) (bool, string) {
		return i.FeaturesFrom == "netdev-genl", "the device's facts came from " + i.FeaturesFrom
	}},
	{"AF_XDP multi-buffer (XDP_USE_SG)", "6.6", btfProbe("xdp_zc_max_segs")},
	{"TX metadata: checksum offload, XDP_UMEM_TX_SW_CSUM", "6.8", btfProbe("xsk_tx_metadata")},
	{"XDP_UMEM_TX_METADATA_LEN flag", "6.11", func(DeviceInfo) (bool, string) {
		u, err := umem.New(&umem.Config{FrameSize: 4096, FrameCount: 4, TxMetadataLen: umem.TxMetadataSize})
		if err != nil {
			return false, "umem.New with TX metadata: " + err.Error()
		}
		u.Close()
		return true, "umem.New with TX metadata"
	}},
	{"NAPI deferral per NAPI instance (napi-set)", "6.13", btfProbe("netdev_nl_napi_set_doit")},
	{"XDP_MAX_TX_SKB_BUDGET", "6.17", btfProbe("max_tx_budget")},
}

func probeFeatures(info DeviceInfo) []KernelFeature {
	out := make([]KernelFeature, len(featureProbes))
	for i, p := range featureProbes {
		ok, how := p.probe(info)
		out[i] = KernelFeature{Name: p.name, Linux: p.linux, Present: ok, Probe: how}
	}
	return out
}

var vmlinuxBTF struct {
	once sync.Once
	b    []byte
	err  error
}

// btfProbe looks for a name that came with the feature in the kernel's
// BTF (a function, field or type), which is the running kernel's own
// account of what it has.
func btfProbe(name string) func(DeviceInfo) (bool, string) {
	return func(DeviceInfo) (bool, string) {
		vmlinuxBTF.once.Do(func() { vmlinuxBTF.b, vmlinuxBTF.err = os.ReadFile("/sys/kernel/btf/vmlinux") })
		if vmlinuxBTF.err != nil {
			return false, "no kernel BTF: " + vmlinuxBTF.err.Error()
		}
		return bytes.Contains(vmlinuxBTF.b, append(append([]byte{0}, name...), 0)), "kernel BTF has " + name
	}
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// capEff reads the effective capabilities of the process.
func capEff() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n
		}
	}
	return 0
}

func limitString(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

// napiSummary says how the device's NAPI instances are set, from the
// netdev family, else from sysfs.
func napiSummary(ifname string, ifindex int) string {
	if ns, err := netdev.NAPIs(ifindex); err == nil {
		if len(ns) == 0 {
			return "no NAPI instance (the device polls none until XDP or GRO needs one)"
		}
		n := ns[0]
		return fmt.Sprintf("%d NAPI instances; the first: defer-hard-irqs %d, gro-flush-timeout %v, threaded %v", len(ns), n.DeferHardIRQs, n.GROFlushTimeout, n.PID != 0)
	}
	read := func(f string) string {
		b, err := os.ReadFile("/sys/class/net/" + ifname + "/" + f)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("device-wide (sysfs): napi_defer_hard_irqs %s, gro_flush_timeout %s ns", read("napi_defer_hard_irqs"), read("gro_flush_timeout"))
}
