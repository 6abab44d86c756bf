package dutyguard

import (
	"errors"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// The virtual IP of a duty. The guard holds the addresses for exactly as
// long as its run: it adds them before the command starts (or, with no
// command, as the run itself) and removes them first on every way the run
// ends: the agent's stop, the soft or hard deadline, the agent gone, the
// command's exit. So a frozen or killed agent's VIP goes at the same moments
// as its command would, and a gateway never answers for the address after
// its lease. The agent resolves the interface; the guard only speaks
// netlink and raw link-layer frames (package syscall: see sys_linux.go).
//
// Its command line carries one --vip per address:
//
//	--vip=IFINDEX,MAC,ADDR,PREFIXLEN,TEXT
//
// MAC is the interface's hardware address and ADDR the address, both in
// hex (12, and 8 or 32 digits); TEXT names it in reports (e.g.
// 192.0.2.10/24@eth0). With --vip the command after -- may be empty.
//
// Guard to agent, besides started and done:
//
//	announced N   N gratuitous ARPs / unsolicited neighbour advertisements
//	              were sent (at once, then announceAfter later)

// Announced is the guard's report of announcements sent.
const Announced = "announced"

// announceAfter are the repeats of the announcements after the first, as
// offsets from it: a neighbour that missed the first (a busy switch, a
// host whose ARP entry was being refreshed) hears a later one.
var announceAfter = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

// vip is one address the guard holds.
type vip struct {
	ifindex int
	mac     []byte // 6 bytes
	addr    []byte // 4 or 16 bytes
	plen    int
	text    string
}

func parseVIP(s string) (vip, error) {
	var v vip
	parts := make([]string, 0, 5)
	for len(parts) < 4 {
		i := indexByte(s, ',')
		if i < 0 {
			return v, errors.New("want IFINDEX,MAC,ADDR,PREFIXLEN,TEXT")
		}
		parts, s = append(parts, s[:i]), s[i+1:]
	}
	v.text = s
	var err error
	if v.ifindex, err = strconv.Atoi(parts[0]); err != nil || v.ifindex <= 0 {
		return v, errors.New("bad interface index " + strconv.Quote(parts[0]))
	}
	if v.mac, err = unhex(parts[1]); err != nil || len(v.mac) != 6 {
		return v, errors.New("bad MAC " + strconv.Quote(parts[1]))
	}
	if v.addr, err = unhex(parts[2]); err != nil || (len(v.addr) != 4 && len(v.addr) != 16) {
		return v, errors.New("bad address " + strconv.Quote(parts[2]))
	}
	if v.plen, err = strconv.Atoi(parts[3]); err != nil || v.plen < 0 || v.plen > 8*len(v.addr) {
		return v, errors.New("bad prefix length " + strconv.Quote(parts[3]))
	}
	return v, nil
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func unhex(s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, errors.New("odd length")
	}
	out := make([]byte, len(s)/2)
	for i := range out {
		b, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, err
		}
		out[i] = byte(b)
	}
	return out, nil
}

// Netlink (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h).
const (
	nlmFRequest = 0x1
	nlmFAck     = 0x4
	nlmFReplace = 0x100
	nlmFCreate  = 0x400
	nlmsgError  = 0x2
	rtmNewAddr  = 20
	rtmDelAddr  = 21
	ifaAddress  = 1
	ifaLocal    = 2
	ifaFlags    = 8
	ifaFNoDAD   = 0x02
)

// addrRequest is an RTM_NEWADDR or RTM_DELADDR message for v.
func addrRequest(v vip, typ uint16, flags uint16, seq uint32) []byte {
	family := byte(syscall.AF_INET)
	if len(v.addr) == 16 {
		family = syscall.AF_INET6
	}
	b := make([]byte, 16, 64)
	ne16(b[4:], typ)
	ne16(b[6:], nlmFRequest|nlmFAck|flags)
	ne32(b[8:], seq)
	// struct ifaddrmsg
	var msgFlags byte
	if family == syscall.AF_INET6 {
		msgFlags = ifaFNoDAD // usable at once: a VIP moves, it is not a new host
	}
	b = append(b, family, byte(v.plen), msgFlags, 0, 0, 0, 0, 0)
	ne32(b[16+4:], uint32(v.ifindex))
	b = rtattr(b, ifaLocal, v.addr)
	b = rtattr(b, ifaAddress, v.addr)
	if family == syscall.AF_INET6 {
		f := make([]byte, 4)
		ne32(f, ifaFNoDAD)
		b = rtattr(b, ifaFlags, f)
	}
	ne32(b[0:], uint32(len(b)))
	return b
}

func rtattr(b []byte, typ uint16, data []byte) []byte {
	h := make([]byte, 4)
	ne16(h[0:], uint16(4+len(data)))
	ne16(h[2:], typ)
	b = append(append(b, h...), data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func ne16(b []byte, v uint16) { *(*uint16)(unsafe.Pointer(&b[0])) = v }
func ne32(b []byte, v uint32) { *(*uint32)(unsafe.Pointer(&b[0])) = v }
func rd32(b []byte) int32     { return *(*int32)(unsafe.Pointer(&b[0])) }

// netlinkAddr sends one address request and waits for the kernel's answer.
func netlinkAddr(v vip, typ uint16, flags uint16) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	const seq = 1
	if err := syscall.Sendto(fd, addrRequest(v, typ, flags, seq), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	var buf [4096]byte
	for {
		n, _, err := syscall.Recvfrom(fd, buf[:], 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		for b := buf[:n]; len(b) >= 16; {
			l := int(uint32(rd32(b[0:])))
			if l < 16 || l > len(b) {
				return errors.New("netlink: short message")
			}
			if *(*uint16)(unsafe.Pointer(&b[4])) == nlmsgError && uint32(rd32(b[8:])) == seq && l >= 20 {
				if e := rd32(b[16:]); e != 0 {
					return syscall.Errno(-e)
				}
				return nil
			}
			b = b[(l+3)&^3:]
		}
	}
}

// addVIPs adds every address; on the first failure it removes those it
// added and returns the error.
func (g *guard) addVIPs() error {
	for i, v := range g.vips {
		if err := netlinkAddr(v, rtmNewAddr, nlmFCreate|nlmFReplace); err != nil {
			g.vipsHeld = i
			g.removeVIPs()
			return errors.New("adding " + v.text + ": " + err.Error())
		}
	}
	g.vipsHeld = len(g.vips)
	return nil
}

// removeVIPs removes the addresses added, once; an address already gone
// (removed by hand, or its interface went down for good) is no error.
func (g *guard) removeVIPs() {
	for _, v := range g.vips[:g.vipsHeld] {
		began := time.Now()
		err := netlinkAddr(v, rtmDelAddr, 0)
		if err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.ENODEV) {
			g.logf("removing the virtual IP %s: %v", v.text, err)
			continue
		}
		g.logf("removed the virtual IP %s (%s)", v.text, time.Since(began).Round(time.Microsecond))
	}
	g.vipsHeld = 0
	g.announce = nil
}

// announceVIPs sends one gratuitous ARP (IPv4) or unsolicited neighbour
// advertisement (IPv6) per address held, reports how many went out, and
// schedules the next round.
func (g *guard) announceVIPs() {
	if g.vipsHeld == 0 {
		return
	}
	sent := 0
	for _, v := range g.vips[:g.vipsHeld] {
		var err error
		if len(v.addr) == 4 {
			err = gratuitousARP(v)
		} else {
			err = unsolicitedNA(v)
		}
		if err != nil {
			g.logf("announcing the virtual IP %s: %v", v.text, err)
			continue
		}
		sent++
	}
	g.report(Announced, strconv.Itoa(sent))
	if g.announced < len(announceAfter) {
		wait := announceAfter[g.announced]
		if g.announced > 0 {
			wait -= announceAfter[g.announced-1]
		}
		g.announced++
		if g.announce == nil {
			g.announce = time.NewTimer(wait)
		} else {
			g.announce.Reset(wait)
		}
		return
	}
	g.announce = nil
}

// announceC is the channel of the next announcement round (nil: none).
func (g *guard) announceC() <-chan time.Time {
	if g.announce == nil {
		return nil
	}
	return g.announce.C
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// gratuitousARP broadcasts an ARP request for v from v itself (RFC 5227's
// announcement): neighbours that have v in their cache point it at this
// interface.
func gratuitousARP(v vip) error {
	const ethPArp = 0x0806
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, int(htons(ethPArp)))
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	p := make([]byte, 0, 28)
	p = append(p, 0, 1, 8, 0, 6, 4, 0, 1) // Ethernet, IPv4, request
	p = append(p, v.mac...)
	p = append(p, v.addr...)
	p = append(p, 0, 0, 0, 0, 0, 0)
	p = append(p, v.addr...)
	to := &syscall.SockaddrLinklayer{Protocol: htons(ethPArp), Ifindex: v.ifindex, Halen: 6}
	copy(to.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	return syscall.Sendto(fd, p, 0, to)
}

// unsolicitedNA sends a neighbour advertisement for v with the override
// flag to all nodes (RFC 4861, 7.2.6). The kernel fills in the checksum of
// an ICMPv6 raw socket.
func unsolicitedNA(v vip) error {
	fd, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.IPPROTO_ICMPV6)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_MULTICAST_HOPS, 255); err != nil {
		return err
	}
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_MULTICAST_IF, v.ifindex); err != nil {
		return err
	}
	from := &syscall.SockaddrInet6{ZoneId: uint32(v.ifindex)}
	copy(from.Addr[:], v.addr)
	if err := syscall.Bind(fd, from); err != nil {
		return err
	}
	p := []byte{136, 0, 0, 0, 0x20, 0, 0, 0} // advertisement, override
	p = append(p, v.addr...)
	p = append(p, 2, 1) // target link-layer address option, 8 bytes
	p = append(p, v.mac...)
	to := &syscall.SockaddrInet6{ZoneId: uint32(v.ifindex)}
	copy(to.Addr[:], []byte{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	return syscall.Sendto(fd, p, 0, to)
}
