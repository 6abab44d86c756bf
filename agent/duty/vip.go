package duty

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
)

// VIP is a virtual IP address the leader holds: added to Interface while
// this gateway leads, announced to its neighbours (gratuitous ARP for IPv4,
// an unsolicited neighbour advertisement for IPv6) and removed before the
// lease ends. The duty guard holds it (see edge/dutyguard), so a frozen or
// killed agent's VIP goes when its command would.
type VIP struct {
	// Prefix is the address and the prefix length of its subnet, as
	// `ip addr add` takes it: 192.0.2.10/24, 2001:db8::10/64.
	Prefix netip.Prefix
	// Interface is the network interface the address goes on (eth0).
	Interface string
}

func (v VIP) String() string { return v.Prefix.String() + "@" + v.Interface }

// ParseVIP parses ADDRESS/PREFIXLEN@INTERFACE (192.0.2.10/24@eth0).
func ParseVIP(s string) (VIP, error) {
	addr, iface, ok := strings.Cut(strings.TrimSpace(s), "@")
	if !ok {
		return VIP{}, fmt.Errorf("%q: want ADDRESS/PREFIXLEN@INTERFACE, e.g. 192.0.2.10/24@eth0", s)
	}
	return NewVIP(addr, iface)
}

// NewVIP checks an address with its prefix length and an interface name.
func NewVIP(addr, iface string) (VIP, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(addr))
	if err != nil {
		return VIP{}, fmt.Errorf("address %q: want ADDRESS/PREFIXLEN, e.g. 192.0.2.10/24: %v", addr, err)
	}
	if p.Addr().Zone() != "" || !p.Addr().IsGlobalUnicast() {
		return VIP{}, fmt.Errorf("address %q: a virtual IP must be a unicast address", addr)
	}
	iface = strings.TrimSpace(iface)
	if iface == "" || len(iface) > 15 || strings.ContainsAny(iface, "/ \t") {
		return VIP{}, fmt.Errorf("interface %q: not an interface name", iface)
	}
	return VIP{Prefix: p, Interface: iface}, nil
}

// checkVIPs checks the VIPs of a configuration: Linux only, each address
// once.
func checkVIPs(vips []VIP) error {
	if len(vips) > 0 && runtime.GOOS != "linux" {
		return fmt.Errorf("leader.vip: virtual IPs are held by the duty guard, which needs Linux")
	}
	seen := map[netip.Addr]bool{}
	for _, v := range vips {
		if !v.Prefix.IsValid() || v.Interface == "" {
			return fmt.Errorf("leader.vip: %v: address or interface missing", v)
		}
		if seen[v.Prefix.Addr()] {
			return fmt.Errorf("leader.vip: %s is given twice", v.Prefix.Addr())
		}
		seen[v.Prefix.Addr()] = true
	}
	return nil
}

// CheckInterfaces reports a VIP whose interface does not exist on this
// machine (check-config and the agent's start-up).
func CheckInterfaces(vips []VIP) error {
	for _, v := range vips {
		if _, err := net.InterfaceByName(v.Interface); err != nil {
			return fmt.Errorf("leader.vip: %s: no interface %q on this gateway (ip link lists them)", v, v.Interface)
		}
	}
	return nil
}

// guardVIPArgs returns the guard's --vip arguments for vips, resolving each
// interface now (its index and address can change while the agent runs).
func guardVIPArgs(vips []VIP) ([]string, error) {
	var args []string
	for _, v := range vips {
		ifi, err := net.InterfaceByName(v.Interface)
		if err != nil {
			return nil, fmt.Errorf("virtual IP %s: %v", v, err)
		}
		if len(ifi.HardwareAddr) != 6 {
			return nil, fmt.Errorf("virtual IP %s: interface %s has no Ethernet address", v, v.Interface)
		}
		args = append(args, "--vip="+strconv.Itoa(ifi.Index)+","+hex.EncodeToString(ifi.HardwareAddr)+","+
			hex.EncodeToString(v.Prefix.Addr().AsSlice())+","+strconv.Itoa(v.Prefix.Bits())+","+v.String())
	}
	return args, nil
}
