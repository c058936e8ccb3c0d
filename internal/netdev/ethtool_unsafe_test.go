package netdev

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What ethtool(8) does for -k, -l and -L, through the same SIOCETHTOOL
// ioctls, so that the tests need no ethtool binary. Feature names come from
// the kernel (ETH_SS_FEATURES), not from bit numbers, which are internal.

const (
	ethtoolGSTRINGS   = 0x1b
	ethtoolGSSETINFO  = 0x37
	ethtoolGFEATURES  = 0x3a
	ethSSFeatures     = 4
	ethGStringLen     = 32
	maxFeatureStrings = 256
)

// featuresActive returns the active state of every named feature of ifname
// ("tx-checksum-ipv4": true, ...), as `ethtool -k` lists them.
func featuresActive(fd int, ifname string) (map[string]bool, error) {
	info := struct {
		cmd, reserved uint32
		mask          uint64
		data          [1]uint32
	}{cmd: ethtoolGSSETINFO, mask: 1 << ethSSFeatures}
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&info)); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	n := int(info.data[0])
	if info.mask == 0 || n == 0 || n > maxFeatureStrings {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %d feature strings (mask %#x)", n, info.mask)
	}
	strs := struct {
		cmd, set, len uint32
		data          [maxFeatureStrings * ethGStringLen]byte
	}{cmd: ethtoolGSTRINGS, set: ethSSFeatures, len: uint32(n)}
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&strs)); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	type block struct{ available, requested, active, neverChanged uint32 }
	feats := struct {
		cmd, size uint32
		blocks    [maxFeatureStrings / 32]block
	}{cmd: ethtoolGFEATURES, size: uint32((n + 31) / 32)}
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&feats)); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GFEATURES: %w", err)
	}
	m := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		name := unix.ByteSliceToString(strs.data[i*ethGStringLen : (i+1)*ethGStringLen])
		m[name] = feats.blocks[i/32].active&(1<<(i%32)) != 0
	}
	return m, nil
}

// ethtoolChannels is struct ethtool_channels, read here by raw ioctl as
// ethtool -l does, independently of the library the package uses.
type ethtoolChannels struct {
	cmd           uint32
	maxRx         uint32
	maxTx         uint32
	maxOther      uint32
	maxCombined   uint32
	rxCount       uint32
	txCount       uint32
	otherCount    uint32
	combinedCount uint32
}

func ethtoolGetChannels(fd int, ifname string) (ethtoolChannels, error) {
	c := ethtoolChannels{cmd: 0x3c} // ETHTOOL_GCHANNELS
	err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&c))
	return c, err
}
