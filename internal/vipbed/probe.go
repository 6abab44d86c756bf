package vipbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Answer is one answer the probe client received: when (the kernel's
// receive timestamp, wall clock in ns) and from which gateway (1..n; 0 when
// the sender is not a gateway of the bed).
type Answer struct {
	T  int64
	GW int
}

// Responder answers UDP probes on ResponderPort in a gateway's namespace
// with the probe's sequence number and the gateway's index. It listens on
// every address, so it answers for the VIP whenever the VIP is on the
// gateway's interface; a probe to the VIP that reaches a gateway without it
// is dropped by that gateway's kernel (it does not forward).
type Responder struct {
	conn *net.UDPConn
	done chan struct{}
}

// StartResponder starts the responder of gateway h, which answers as index.
func StartResponder(h *Host, index int) (*Responder, error) {
	var conn *net.UDPConn
	err := h.Do(func() error {
		var err error
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: ResponderPort})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("responder of %s: %w", h.ID, err)
	}
	r := &Responder{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 64)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return // closed
			}
			if n < 8 {
				continue
			}
			reply := append(buf[:8:8], byte(index))
			_, _ = conn.WriteToUDP(reply, from)
		}
	}()
	return r, nil
}

// Close stops the responder.
func (r *Responder) Close() error {
	err := r.conn.Close()
	<-r.done
	return err
}

// Prober is the probe client: every Interval it sends a UDP probe to the
// VIP (answered by the responder of whichever gateway the client's kernel
// sends it to, through its ARP cache) and broadcasts an ARP request for the
// VIP from a raw socket (answered by the kernel of every gateway that has
// the VIP on its interface at that moment, whatever the client's cache
// says). Both kinds of answer are recorded with the kernel's receive
// timestamp.
type Prober struct {
	bed      *Bed
	interval time.Duration
	udp      *net.UDPConn
	arp      *os.File
	frame    []byte

	mu        sync.Mutex
	udpAns    []Answer
	arpAns    []Answer
	sentUDP   int
	sentARP   int
	sendErrs  int
	lastError error

	stop     chan struct{}
	wg       sync.WaitGroup
	realtime bool
}

// StartProber starts probing from the bed's client every interval.
func StartProber(bed *Bed, interval time.Duration) (*Prober, error) {
	p := &Prober{bed: bed, interval: interval, stop: make(chan struct{})}
	c := bed.Client
	err := c.Do(func() error {
		var err error
		p.udp, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(c.Addr)})
		if err != nil {
			return err
		}
		if err := setTimestamps(p.udp); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(Dev)
		if err != nil {
			return err
		}
		p.arp, err = openARP(ifi.Index)
		return err
	})
	if err != nil {
		if p.udp != nil {
			p.udp.Close()
		}
		return nil, fmt.Errorf("prober: %w", err)
	}
	p.frame = arpRequest(c.MAC, net.ParseIP(c.Addr).To4(), net.ParseIP(VIP).To4())
	p.wg.Add(3)
	go p.readUDP()
	go p.readARP()
	go p.send()
	return p, nil
}

func setTimestamps(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	return serr
}

// openARP opens an AF_PACKET socket for ARP frames bound to interface
// ifindex, non-blocking under Go's poller (so that Close wakes its reader),
// with kernel receive timestamps.
func openARP(ifindex int) (*os.File, error) { return openPacket(ifindex, unix.ETH_P_ARP) }

// openPacket is openARP for frames of protocol ethType (ETH_P_ALL: every
// frame, those the host sends included, which a socket bound to one
// protocol does not see).
func openPacket(ifindex int, ethType uint16) (*os.File, error) {
	proto := htons(ethType)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind AF_PACKET: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "arp"), nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// arpRequest builds a broadcast Ethernet frame asking who has target.
func arpRequest(mac net.HardwareAddr, sender, target net.IP) []byte {
	f := make([]byte, 42)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_ARP)
	binary.BigEndian.PutUint16(f[14:16], 1)      // Ethernet
	binary.BigEndian.PutUint16(f[16:18], 0x0800) // IPv4
	f[18], f[19] = 6, 4
	binary.BigEndian.PutUint16(f[20:22], 1) // request
	copy(f[22:28], mac)
	copy(f[28:32], sender)
	// f[32:38]: target hardware address, unknown
	copy(f[38:42], target)
	return f
}

// kernelTime returns the SCM_TIMESTAMPNS of oob, or now if there is none.
func kernelTime(oob []byte) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
				sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
				nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
				return sec*1e9 + nsec
			}
		}
	}
	return time.Now().UnixNano()
}

func (p *Prober) send() {
	defer p.wg.Done()
	// The sender keeps the pace on a loaded machine: its own thread, at a
	// real-time priority when the kernel allows (root), so that the
	// kernel runs it as soon as its timer fires. The thread goes back to
	// the normal policy before it is given back to the scheduler (it must
	// not end: see NS.Do); if it cannot, it stays locked and ends with the
	// goroutine, and no other goroutine inherits the priority.
	runtime.LockOSThread()
	rt := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0) == nil
	defer func() {
		if !rt || unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0) == nil {
			runtime.UnlockOSThread()
		}
	}()
	p.mu.Lock()
	p.realtime = rt
	p.mu.Unlock()
	dst := &net.UDPAddr{IP: net.ParseIP(VIP), Port: ResponderPort}
	buf := make([]byte, 8)
	// Slots every interval from the start; after each send the next slot
	// is the first one still ahead, so a late wake-up skips slots rather
	// than sending a burst. The sleep is clock_nanosleep to an absolute
	// time: Go's timers wake up to a millisecond late.
	var start unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &start)
	base := start.Nano()
	var seq uint64
	slot := int64(0)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		var now unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
		slot = max(slot+1, (now.Nano()-base)/int64(p.interval)+1)
		at := unix.NsecToTimespec(base + slot*int64(p.interval))
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &at, nil) == unix.EINTR {
		}
		seq++
		binary.BigEndian.PutUint64(buf, seq)
		_, uerr := p.udp.WriteToUDP(buf, dst)
		_, aerr := p.arp.Write(p.frame)
		p.mu.Lock()
		if uerr == nil {
			p.sentUDP++
		}
		if aerr == nil {
			p.sentARP++
		}
		if err := errors.Join(uerr, aerr); err != nil {
			// A probe to a VIP nobody answers ARP for fails once the
			// client's kernel gives up resolving it: counted, not fatal.
			p.sendErrs++
			p.lastError = err
		}
		p.mu.Unlock()
	}
}

func (p *Prober) readUDP() {
	defer p.wg.Done()
	buf, oob := make([]byte, 64), make([]byte, 128)
	for {
		n, oobn, _, _, err := p.udp.ReadMsgUDP(buf, oob)
		if err != nil {
			select {
			case <-p.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error of an earlier probe, for one
		}
		if n < 9 {
			continue
		}
		a := Answer{T: kernelTime(oob[:oobn]), GW: int(buf[8])}
		p.mu.Lock()
		p.udpAns = append(p.udpAns, a)
		p.mu.Unlock()
	}
}

func (p *Prober) readARP() {
	defer p.wg.Done()
	rc, err := p.arp.SyscallConn()
	if err != nil {
		return
	}
	vip := net.ParseIP(VIP).To4()
	buf, oob := make([]byte, 128), make([]byte, 128)
	for {
		var n, oobn int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, 0)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			return // closed
		}
		if rerr != nil || n < 42 {
			continue
		}
		f := buf[:n]
		if binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_ARP || binary.BigEndian.Uint16(f[20:22]) != 2 ||
			!net.IP(f[28:32]).Equal(vip) {
			continue // not an answer about the VIP
		}
		a := Answer{T: kernelTime(oob[:oobn])}
		if g := p.bed.ByMAC(net.HardwareAddr(f[22:28])); g != nil {
			a.GW = p.bed.index(g)
		}
		p.mu.Lock()
		p.arpAns = append(p.arpAns, a)
		p.mu.Unlock()
	}
}

// index returns the 1-based index of gateway g.
func (b *Bed) index(g *Host) int {
	for i, x := range b.Gateways {
		if x == g {
			return i + 1
		}
	}
	return 0
}

// Index returns the 1-based index of the gateway with id (0 if none): the
// GW of its answers.
func (b *Bed) Index(id string) int {
	if g := b.Gateway(id); g != nil {
		return b.index(g)
	}
	return 0
}

// UDP returns the UDP answers received in [from, to] (wall clock ns).
func (p *Prober) UDP(from, to int64) []Answer { return p.window(&p.udpAns, from, to) }

// ARP returns the ARP answers received in [from, to] (wall clock ns).
func (p *Prober) ARP(from, to int64) []Answer { return p.window(&p.arpAns, from, to) }

func (p *Prober) window(s *[]Answer, from, to int64) []Answer {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Answers are appended in the order they were received, so their kernel
	// timestamps rise but for a step of the wall clock: start the scan a
	// second early rather than walk every answer of the run on each poll.
	all := *s
	i := sort.Search(len(all), func(i int) bool { return all[i].T >= from-int64(time.Second) })
	var out []Answer
	for _, a := range all[i:] {
		if a.T >= from && a.T <= to {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// Sent returns how many UDP probes and ARP requests were sent, and how many
// sends failed (with the last error).
func (p *Prober) Sent() (udp, arp, errs int, last error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sentUDP, p.sentARP, p.sendErrs, p.lastError
}

// Realtime reports whether the sender runs at a real-time priority.
func (p *Prober) Realtime() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.realtime
}

// Close stops the prober.
func (p *Prober) Close() error {
	close(p.stop)
	err := errors.Join(p.udp.Close(), p.arp.Close())
	p.wg.Wait()
	return err
}

// FirstFrom returns the first answer at or after t from a gateway other than
// not (and not unknown).
func FirstFrom(ans []Answer, t int64, not int) (Answer, bool) {
	for _, a := range ans {
		if a.T >= t && a.GW != 0 && a.GW != not {
			return a, true
		}
	}
	return Answer{}, false
}

// LastFrom returns the last answer of gateway gw.
func LastFrom(ans []Answer, gw int) (Answer, bool) {
	for i := len(ans) - 1; i >= 0; i-- {
		if ans[i].GW == gw {
			return ans[i], true
		}
	}
	return Answer{}, false
}

// TwoHolderMillis returns the milliseconds (wall clock ms since the epoch)
// in which answers came from two or more distinct gateways, and which.
func TwoHolderMillis(ans []Answer) map[int64][]int {
	by := map[int64]map[int]bool{}
	for _, a := range ans {
		ms := a.T / 1e6
		if by[ms] == nil {
			by[ms] = map[int]bool{}
		}
		by[ms][a.GW] = true
	}
	out := map[int64][]int{}
	for ms, gws := range by {
		if len(gws) < 2 {
			continue
		}
		var l []int
		for g := range gws {
			l = append(l, g)
		}
		sort.Ints(l)
		out[ms] = l
	}
	return out
}

// OnlyFrom reports whether every answer is from gateway gw and there is at
// least one.
func OnlyFrom(ans []Answer, gw int) bool {
	if len(ans) == 0 {
		return false
	}
	for _, a := range ans {
		if a.GW != gw {
			return false
		}
	}
	return true
}

// Tap records the ARP answers for the VIP that a gateway sends, with the
// kernel's timestamp of the send, taken on the gateway's own interface. It
// dates when the gateway had the VIP without the delays of the way to the
// client: on a loaded machine the softirq work that carries a frame across
// the bridge can wait for a CPU, and the client's receive time is then
// later than the moment the gateway's kernel answered, which it did only
// while the address was on its interface.
type Tap struct {
	f    *os.File
	done chan struct{}

	mu   sync.Mutex
	sent []int64
}

// StartTap starts recording gateway h's ARP answers for the VIP.
func StartTap(h *Host) (*Tap, error) {
	var f *os.File
	err := h.Do(func() error {
		ifi, err := net.InterfaceByName(Dev)
		if err != nil {
			return err
		}
		f, err = openPacket(ifi.Index, unix.ETH_P_ALL)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tap of %s: %w", h.ID, err)
	}
	t := &Tap{f: f, done: make(chan struct{})}
	go t.read()
	return t, nil
}

func (t *Tap) read() {
	defer close(t.done)
	rc, err := t.f.SyscallConn()
	if err != nil {
		return
	}
	vip := net.ParseIP(VIP).To4()
	buf, oob := make([]byte, 128), make([]byte, 128)
	for {
		var n, oobn int
		var from unix.Sockaddr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, oobn, _, from, rerr = unix.Recvmsg(int(fd), buf, oob, 0)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			return // closed
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if rerr != nil || n < 42 || !ok || ll.Pkttype != unix.PACKET_OUTGOING {
			continue
		}
		f := buf[:n]
		if binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_ARP || binary.BigEndian.Uint16(f[20:22]) != 2 ||
			!net.IP(f[28:32]).Equal(vip) {
			continue
		}
		ts := kernelTime(oob[:oobn])
		t.mu.Lock()
		t.sent = append(t.sent, ts)
		t.mu.Unlock()
	}
}

// Last returns the time of the last answer sent in [from, to], if any.
func (t *Tap) Last(from, to int64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.sent) - 1; i >= 0; i-- {
		if s := t.sent[i]; s >= from && s <= to {
			return s, true
		}
	}
	return 0, false
}

// Close stops the tap.
func (t *Tap) Close() error {
	err := t.f.Close()
	<-t.done
	return err
}
