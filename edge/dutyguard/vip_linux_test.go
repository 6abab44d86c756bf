package dutyguard

import (
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-agent/edge-agent/internal/poll"
)

// vipNet is a network namespace of the test's own (unshared on one locked
// thread: the guard and ip, started from that thread, run in it) with a
// veth pair: the guard holds its addresses on va, the test listens on vb.
type vipNet struct {
	t       *testing.T
	va      *net.Interface
	capture int // AF_PACKET socket on vb: every frame va sends
	run     chan func()
}

// newVIPNet unshares a network namespace on a thread of its own. Only root
// (CAP_SYS_ADMIN) can; elsewhere the test skips, saying so, unless CI is
// set: CI runs as root, and a skip there would hide the VIP's tests.
func newVIPNet(t *testing.T) *vipNet {
	t.Helper()
	n := &vipNet{t: t, run: make(chan func())}
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- nil
		for f := range n.run {
			f()
		}
	}()
	if err := <-errc; err != nil {
		close(n.run)
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot create a network namespace (CI runs as root): %v", err)
		}
		t.Skipf("needs a network namespace of its own (root): %v", err)
	}
	t.Cleanup(func() { close(n.run) })
	n.sh("ip link add va type veth peer name vb && ip link set va up && ip link set vb up && ip link set lo up")
	n.in(func() {
		var err error
		if n.va, err = net.InterfaceByName("va"); err != nil {
			t.Fatal(err)
		}
		vb, err := net.InterfaceByName("vb")
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: vb.Index}); err != nil {
			t.Fatal(err)
		}
		n.capture = fd
	})
	t.Cleanup(func() { unix.Close(n.capture) })
	return n
}

// in runs f on the namespace's thread.
func (n *vipNet) in(f func()) {
	done := make(chan struct{})
	n.run <- func() { defer close(done); f() }
	<-done
}

func (n *vipNet) sh(script string) string {
	n.t.Helper()
	var out []byte
	var err error
	n.in(func() { out, err = exec.Command("sh", "-c", script).CombinedOutput() })
	if err != nil {
		n.t.Fatalf("%s: %v: %s", script, err, out)
	}
	return string(out)
}

// arg is the --vip argument for prefix on va.
func (n *vipNet) arg(prefix string) string {
	p := netip.MustParsePrefix(prefix)
	a := p.Addr().AsSlice()
	return "--vip=" + strconv.Itoa(n.va.Index) + "," + hex.EncodeToString(n.va.HardwareAddr) + "," +
		hex.EncodeToString(a) + "," + strconv.Itoa(p.Bits()) + "," + prefix + "@va"
}

// addrs lists va's global addresses.
func (n *vipNet) addrs() string {
	return n.sh("ip -o addr show dev va scope global | awk '{print $4}' | sort | tr '\\n' ' '")
}

// announcements reads the frames captured so far and returns the IPv4
// gratuitous ARPs and the IPv6 neighbour advertisements va sent, as
// "arp ADDR MAC" and "na ADDR MAC".
func (n *vipNet) announcements() []string {
	var out []string
	buf := make([]byte, 2048)
	for {
		k, _, err := unix.Recvfrom(n.capture, buf, 0)
		if err != nil {
			return out
		}
		f := buf[:k]
		if len(f) < 14 || net.HardwareAddr(f[6:12]).String() != n.va.HardwareAddr.String() {
			continue
		}
		switch {
		case f[12] == 0x08 && f[13] == 0x06 && len(f) >= 42: // ARP
			a := f[14:]
			if a[7] == 1 && netip.AddrFrom4([4]byte(a[14:18])) == netip.AddrFrom4([4]byte(a[24:28])) {
				out = append(out, "arp "+netip.AddrFrom4([4]byte(a[14:18])).String()+" "+net.HardwareAddr(a[8:14]).String())
			}
		case f[12] == 0x86 && f[13] == 0xdd && len(f) >= 14+40+32: // IPv6
			ip := f[14:]
			icmp := ip[40:]
			if ip[6] == 58 && icmp[0] == 136 && icmp[4]&0x20 != 0 && ip[7] == 255 {
				out = append(out, "na "+netip.AddrFrom16([16]byte(icmp[8:24])).String()+" "+net.HardwareAddr(icmp[26:32]).String())
			}
		}
	}
}

// startGuardIn starts a guard, as startGuardSoft does, on the namespace's
// thread, so that it runs in the namespace.
func (n *vipNet) startGuard(soft, d time.Duration, extra []string, argv ...string) *testGuard {
	var g *testGuard
	n.in(func() { g = startGuardArgs(n.t, soft, d, nil, extra, argv...) })
	return g
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// TestGuardHoldsVIPsForTheRun: the guard adds the addresses before the
// command starts and announces them (a gratuitous ARP for IPv4, an
// unsolicited neighbour advertisement for IPv6, at once and again later),
// and removes them first on each way a run ends.
func TestGuardHoldsVIPsForTheRun(t *testing.T) {
	n := newVIPNet(t)
	v4, v6 := "10.77.0.1/24", "fd00:77::1/64"
	for _, end := range []string{"term", "agent gone", "hard deadline", "soft deadline", "kill", "command exits"} {
		t.Run(end, func(t *testing.T) {
			n.t = t
			soft, hard := time.Duration(0), time.Minute
			switch end {
			case "hard deadline":
				hard = 3 * time.Second
			case "soft deadline":
				soft = 3 * time.Second
			}
			argv := []string{"sleep", "1000"}
			if end == "command exits" {
				argv = []string{"sleep", "1"}
			}
			g := n.startGuard(soft, hard, []string{n.arg(v4), n.arg(v6)}, argv...)
			first := g.line()
			if !strings.HasPrefix(first, Announced+" ") && !strings.HasPrefix(first, Started+" ") {
				t.Fatalf("first report %q", first)
			}
			// The addresses are on va once the command runs.
			if got := n.addrs(); !hasWord(got, v4) || !hasWord(got, v6) {
				t.Fatalf("addresses on va while the duty runs: %q, want %s and %s", got, v4, v6)
			}
			mac := n.va.HardwareAddr.String()
			poll.UntilWhy(t, 5*time.Second, "the announcements", func() (bool, string) {
				seen := strings.Join(n.announcements(), ", ")
				return strings.Contains(seen, "arp 10.77.0.1 "+mac) && strings.Contains(seen, "na fd00:77::1 "+mac), seen
			})
			began := time.Now()
			switch end {
			case "term":
				g.send(Term)
			case "agent gone":
				g.conn.Close()
			case "kill":
				g.send(Kill)
			}
			_ = g.waitExit()
			if got := n.addrs(); got != "" {
				t.Fatalf("after %s (%s): addresses left on va: %q", end, time.Since(began), got)
			}
		})
	}
}

// TestGuardVIPWithoutCommand: with no command the run is the addresses
// held: started 0, every announcement round sent and reported, and a term
// ends it with exit status 0, addresses gone.
func TestGuardVIPWithoutCommand(t *testing.T) {
	n := newVIPNet(t)
	g := n.startGuard(0, time.Minute, []string{n.arg("10.77.0.2/32")})
	started, rounds := false, 0
	for !started || rounds < 1+len(announceAfter) {
		switch l := g.line(); {
		case l == Started+" 0":
			started = true
		case l == Announced+" 1":
			rounds++
		default:
			t.Fatalf("report %q, want %q and %d rounds of %q", l, Started+" 0", 1+len(announceAfter), Announced+" 1")
		}
	}
	if got := n.addrs(); got != "10.77.0.2/32 " {
		t.Fatalf("addresses on va: %q", got)
	}
	if arps := strings.Count(strings.Join(n.announcements(), ","), "arp 10.77.0.2 "); arps != 1+len(announceAfter) {
		t.Errorf("%d gratuitous ARPs captured, want %d", arps, 1+len(announceAfter))
	}
	g.send(Term)
	for l := g.line(); !strings.HasPrefix(l, Done+" "); l = g.line() {
	}
	if err := g.waitExit(); err != nil {
		t.Fatalf("guard exit: %v", err)
	}
	if got := n.addrs(); got != "" {
		t.Fatalf("addresses left on va: %q", got)
	}
}

// TestGuardVIPAddFails: an address that cannot be added (no such
// interface) is an error report, the command never starts, and an address
// added before it is removed again.
func TestGuardVIPAddFails(t *testing.T) {
	n := newVIPNet(t)
	bad := strings.Replace(n.arg("10.77.0.4/24"), "--vip="+strconv.Itoa(n.va.Index)+",", "--vip=999999,", 1)
	g := n.startGuard(0, time.Minute, []string{n.arg("10.77.0.3/24"), bad}, "sleep", "1000")
	l := g.line()
	if !strings.HasPrefix(l, Done+" "+Error+" adding 10.77.0.4/24@va") {
		t.Fatalf("report %q, want an error adding 10.77.0.4/24", l)
	}
	_ = g.waitExit()
	if got := n.addrs(); got != "" {
		t.Fatalf("addresses left on va: %q", got)
	}
}

func TestParseVIP(t *testing.T) {
	good := "3,0a0b0c0d0e0f,0a4d0001,24,10.77.0.1/24@eth0"
	v, err := parseVIP(good)
	if err != nil || v.ifindex != 3 || len(v.mac) != 6 || len(v.addr) != 4 || v.plen != 24 || v.text != "10.77.0.1/24@eth0" {
		t.Fatalf("parseVIP(%q) = %+v, %v", good, v, err)
	}
	for _, bad := range []string{"", "3,0a0b0c0d0e0f,0a4d0001,24", "0,0a0b0c0d0e0f,0a4d0001,24,x", "3,0a0b0c0d0e,0a4d0001,24,x",
		"3,0a0b0c0d0e0f,0a4d00,24,x", "3,0a0b0c0d0e0f,0a4d0001,33,x", "3,zz0b0c0d0e0f,0a4d0001,24,x"} {
		if _, err := parseVIP(bad); err == nil {
			t.Errorf("parseVIP(%q) accepted", bad)
		}
	}
	if _, err := parseGuardArgs([]string{"--deadline=5", "--"}); err == nil {
		t.Error("no command and no VIP accepted")
	}
	if ga, err := parseGuardArgs([]string{"--deadline=5", "--vip=" + good, "--"}); err != nil || ga.path != "" || len(ga.vips) != 1 {
		t.Errorf("VIP without a command: %+v, %v", ga, err)
	}
}
