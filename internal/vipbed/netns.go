// Package vipbed is a test bed for a virtual IP that moves with the leader:
// gateway and client network namespaces on one Linux bridge, a UDP
// responder in every gateway, a probe client that sends a UDP probe to the
// VIP and broadcasts an ARP request for it every millisecond and records
// who answered, nftables cuts, and Debian's keepalived as the peer the
// edge-agent VIP duty is measured against. It needs root (ip netns, ip link,
// nft); the tests of this package skip when namespaces are unavailable.
// docs/VIP-TESTBED.md describes the bed and the experiments.
package vipbed

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Subnet is the bed's private IPv4 subnet: it exists only inside the bed's
// namespaces, so beds of runs side by side (or a crashed earlier run's) do
// not meet.
const (
	SubnetPrefix = "10.99.0."
	PrefixLen    = 24
	// VIP is the virtual address the gateways contend for.
	VIP = "10.99.0.100"
	// Dev is the name of every host's interface on the bridge.
	Dev = "eth0"
	// ResponderPort is the UDP port of the gateways' responders.
	ResponderPort = 9999
)

// NS is one network namespace, named under /run/netns.
type NS struct {
	Name string
}

// ip runs `ip -n NS args...`.
func (n NS) ip(args ...string) error {
	_, err := run("ip", append([]string{"-n", n.Name}, args...)...)
	return err
}

// Exec runs a command inside the namespace (ip netns exec) and returns its
// combined output.
func (n NS) Exec(name string, args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Do runs f on an OS thread that has entered the namespace. A socket f
// opens belongs to the namespace for its whole life, whichever goroutine
// later uses it; goroutines that f starts do not run in the namespace. The
// thread returns to its own namespace before it is given back to the Go
// scheduler. It must not simply end instead (a locked goroutine that exits
// takes its thread with it): the bed's processes run with a parent death
// signal, which the kernel sends when the thread that started them ends,
// and the scheduler may have started one on this thread earlier. Only if
// the way back fails is the thread left locked to end with the goroutine.
func (n NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer unix.Close(orig)
		fd, err := unix.Open("/run/netns/"+n.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", n.Name, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", n.Name, err)
			return
		}
		err = f()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Host is a namespace with one interface (Dev) on the bed's bridge.
type Host struct {
	NS
	// ID names the host in the bed: gw1, gw2, ... or client.
	ID string
	// Addr is its address on the bridge (without the prefix length).
	Addr string
	// MAC is its interface's hardware address, set by the bed so that an
	// ARP answer names the gateway it came from.
	MAC net.HardwareAddr
	// Port is the name of the bridge's port that leads to it.
	Port string
}

// HasAddr reports whether addr (an IP, no prefix) is configured on the
// host's interface now.
func (h *Host) HasAddr(addr string) (bool, error) {
	out, err := run("ip", "-n", h.Name, "-o", "-4", "addr", "show", "dev", Dev)
	if err != nil {
		return false, err
	}
	return strings.Contains(out, " "+addr+"/"), nil
}

// DelAddr removes addr/PrefixLen from the host's interface if it is there.
func (h *Host) DelAddr(addr string) error {
	has, err := h.HasAddr(addr)
	if err != nil || !has {
		return err
	}
	return h.ip("addr", "del", fmt.Sprintf("%s/%d", addr, PrefixLen), "dev", Dev)
}

// Bed is a bridge in a namespace of its own with n gateway hosts and a
// client host plugged into it. Nothing of it lives in the caller's
// namespace: the bridge's ports and the hosts' interfaces are in the bed's
// namespaces, whose names carry the creating process's id and a random
// tag, and deleting the namespaces deletes everything.
type Bed struct {
	// Tag is the unique part of the namespace names.
	Tag      string
	Switch   NS
	Gateways []*Host
	Client   *Host

	namespaces []NS
}

// Available reports why network namespaces cannot be used here, or "" when
// they can: the caller is not root, the ip tool is missing, or `ip netns
// add` fails.
func Available() string {
	if os.Geteuid() != 0 {
		return "needs root for ip netns"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "needs the ip tool (iproute2)"
	}
	n := NS{Name: fmt.Sprintf("vipbed-%d-%s-probe", os.Getpid(), randomTag())}
	if _, err := run("ip", "netns", "add", n.Name); err != nil {
		return "ip netns add failed: " + err.Error()
	}
	if _, err := run("ip", "netns", "del", n.Name); err != nil {
		return "ip netns del failed: " + err.Error()
	}
	return ""
}

func randomTag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SweepStale deletes the namespaces of beds whose creating process is gone
// (a test run that was killed, or timed out, before its cleanup ran). Their
// processes died with that run (Pdeathsig), so nothing keeps them alive.
func SweepStale() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "vipbed-")
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); err == nil || err == unix.EPERM {
			continue // its run is still going (or the pid was reused: left alone)
		}
		_, _ = run("ip", "netns", "del", e.Name())
	}
}

// New builds a bed of n gateways (gw1..gwN at SubnetPrefix.1..N, MACs
// 02:99:00:00:00:0N) and a client (SubnetPrefix.200). On error it removes
// what it built. Close removes the whole bed.
func New(n int) (*Bed, error) {
	SweepStale()
	b := &Bed{Tag: fmt.Sprintf("%d-%s", os.Getpid(), randomTag())}
	b.Switch = NS{Name: "vipbed-" + b.Tag + "-sw"}
	if err := b.build(n); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Bed) addNS(n NS) error {
	if _, err := run("ip", "netns", "add", n.Name); err != nil {
		return err
	}
	b.namespaces = append(b.namespaces, n)
	// Loopback up: the agents' HTTP endpoints listen on it.
	return n.ip("link", "set", "lo", "up")
}

func (b *Bed) build(n int) error {
	if err := b.addNS(b.Switch); err != nil {
		return err
	}
	// No multicast snooping: keepalived's adverts go to 224.0.0.18, and
	// without a querier on the bridge snooping would only add states.
	if err := b.Switch.ip("link", "add", "br0", "type", "bridge", "mcast_snooping", "0"); err != nil {
		return err
	}
	if err := b.Switch.ip("link", "set", "br0", "up"); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		h, err := b.addHost(fmt.Sprintf("gw%d", i), fmt.Sprintf("%s%d", SubnetPrefix, i),
			net.HardwareAddr{0x02, 0x99, 0, 0, 0, byte(i)})
		if err != nil {
			return err
		}
		b.Gateways = append(b.Gateways, h)
	}
	h, err := b.addHost("client", SubnetPrefix+"200", net.HardwareAddr{0x02, 0x99, 0, 0, 0, 0xc8})
	if err != nil {
		return err
	}
	b.Client = h
	return nil
}

func (b *Bed) addHost(id, addr string, mac net.HardwareAddr) (*Host, error) {
	h := &Host{NS: NS{Name: "vipbed-" + b.Tag + "-" + id}, ID: id, Addr: addr, MAC: mac, Port: "p-" + id}
	if err := b.addNS(h.NS); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"-n", b.Switch.Name, "link", "add", h.Port, "type", "veth", "peer", "name", Dev, "netns", h.Name},
		{"-n", b.Switch.Name, "link", "set", h.Port, "master", "br0"},
		{"-n", b.Switch.Name, "link", "set", h.Port, "up"},
		{"-n", h.Name, "link", "set", Dev, "address", mac.String()},
		{"-n", h.Name, "addr", "add", fmt.Sprintf("%s/%d", addr, PrefixLen), "dev", Dev},
		{"-n", h.Name, "link", "set", Dev, "up"},
	}
	for _, s := range steps {
		if _, err := run("ip", s...); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Gateway returns the gateway with id, or nil.
func (b *Bed) Gateway(id string) *Host {
	for _, g := range b.Gateways {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// ByMAC returns the gateway whose interface has mac, or nil.
func (b *Bed) ByMAC(mac net.HardwareAddr) *Host {
	for _, g := range b.Gateways {
		if bytes.Equal(g.MAC, mac) {
			return g
		}
	}
	return nil
}

// Holders returns the gateways that have the VIP on their interface now.
func (b *Bed) Holders() ([]string, error) {
	var ids []string
	for _, g := range b.Gateways {
		has, err := g.HasAddr(VIP)
		if err != nil {
			return nil, err
		}
		if has {
			ids = append(ids, g.ID)
		}
	}
	return ids, nil
}

// Close deletes every namespace of the bed, and with them the bridge, the
// links and the addresses. The processes started in them must be stopped
// first (a namespace lives on while a process is in it).
func (b *Bed) Close() error {
	var errs []error
	for i := len(b.namespaces) - 1; i >= 0; i-- {
		if _, err := run("ip", "netns", "del", b.namespaces[i].Name); err != nil {
			errs = append(errs, err)
		}
	}
	b.namespaces = nil
	return errors.Join(errs...)
}

// Cut drops the traffic nft rules describe in host h's namespace: rules is
// the body of an inet table's input and output chains, e.g. "ip saddr
// 10.99.0.2 tcp dport 6222 drop". Heal removes the table.
func (h *Host) Cut(input, output []string) error {
	var b strings.Builder
	b.WriteString("table inet vipbed_cut {\n")
	b.WriteString("  chain in {\n    type filter hook input priority 0; policy accept;\n")
	for _, r := range input {
		b.WriteString("    " + r + "\n")
	}
	b.WriteString("  }\n  chain out {\n    type filter hook output priority 0; policy accept;\n")
	for _, r := range output {
		b.WriteString("    " + r + "\n")
	}
	b.WriteString("  }\n}\n")
	cmd := exec.Command("ip", "netns", "exec", h.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s\n%s", h.ID, err, bytes.TrimSpace(out), b.String())
	}
	return nil
}

// Heal removes the rules of Cut.
func (h *Host) Heal() error {
	_, err := h.Exec("nft", "delete", "table", "inet", "vipbed_cut")
	return err
}

func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
		}
		return out.String(), nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("%s %s: no exit within 30s", name, strings.Join(args, " "))
	}
}
