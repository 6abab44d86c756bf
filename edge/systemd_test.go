package edge

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeHealth is a Health whose answers the test sets.
type fakeHealth struct{ healthy, ready atomic.Bool }

func (f *fakeHealth) Healthy() bool  { return f.healthy.Load() }
func (f *fakeHealth) Ready() bool    { return f.ready.Load() }
func (f *fakeHealth) Leader() string { return "gw2" }
func (f *fakeHealth) Term() uint64   { return 7 }

// notifySocket listens on a fake NOTIFY_SOCKET, as systemd does, and points
// the environment at it.
func notifySocket(t *testing.T, watchdog time.Duration) *net.UnixConn {
	t.Helper()
	// A short path: unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	if watchdog > 0 {
		t.Setenv("WATCHDOG_USEC", strconv.FormatInt(watchdog.Microseconds(), 10))
	} else {
		t.Setenv("WATCHDOG_USEC", "")
	}
	t.Setenv("WATCHDOG_PID", "")
	return c
}

// pending returns the datagrams already in the socket, without waiting
// (MSG_DONTWAIT): SdNotify has sent them by the time it returns.
func pending(t *testing.T, c *net.UnixConn) []string {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	buf := make([]byte, 4096)
	for {
		var n int
		var rerr error
		if err := rc.Control(func(fd uintptr) {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
		}); err != nil {
			t.Fatal(err)
		}
		if errors.Is(rerr, syscall.EAGAIN) {
			return out
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
		out = append(out, string(buf[:n]))
	}
}

// next waits, up to a deadline, for a datagram containing want.
func next(t *testing.T, c *net.UnixConn, want string) string {
	t.Helper()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := c.SetReadDeadline(deadline); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("no datagram with %q: %v", want, err)
		}
		if msg := string(buf[:n]); strings.Contains(msg, want) {
			return msg
		}
	}
}

func TestSystemdNotifierReadyAndWatchdog(t *testing.T) {
	sock := notifySocket(t, 3*time.Second)
	n, err := NewSystemdNotifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !n.Enabled() || n.Watchdog() != 3*time.Second {
		t.Fatalf("Enabled, Watchdog = %v, %s; want true, 3s", n.Enabled(), n.Watchdog())
	}
	var h fakeHealth
	t0 := time.Now()

	// A loop that does not run yet: no READY, no WATCHDOG.
	n.Tick(&h, t0)
	got := strings.Join(pending(t, sock), "|")
	if strings.Contains(got, "READY=1") || strings.Contains(got, "WATCHDOG=1") {
		t.Fatalf("unhealthy, not ready: sent %q", got)
	}
	if !strings.Contains(got, "STATUS=election loop not running") {
		t.Errorf("status: %q", got)
	}

	// Healthy but not joined: pings, no READY.
	h.healthy.Store(true)
	n.Tick(&h, t0.Add(10*time.Millisecond))
	got = strings.Join(pending(t, sock), "|")
	if !strings.Contains(got, "WATCHDOG=1") || strings.Contains(got, "READY=1") {
		t.Fatalf("healthy, not ready: sent %q; want WATCHDOG=1 only", got)
	}
	// Pings are spaced by a third of the timeout.
	n.Tick(&h, t0.Add(500*time.Millisecond))
	if got := pending(t, sock); len(got) != 0 {
		t.Fatalf("ping 490ms after the last one, with a 3s watchdog: %q", got)
	}

	// Joined: READY once, with the leader in STATUS.
	h.ready.Store(true)
	n.Tick(&h, t0.Add(1010*time.Millisecond))
	got = strings.Join(pending(t, sock), "|")
	if !strings.Contains(got, "READY=1") || !strings.Contains(got, "WATCHDOG=1") || !strings.Contains(got, "STATUS=leader gw2, term 7") {
		t.Fatalf("ready: sent %q; want READY=1, WATCHDOG=1 and the leader", got)
	}
	n.Tick(&h, t0.Add(2100*time.Millisecond))
	if got := strings.Join(pending(t, sock), "|"); strings.Contains(got, "READY=1") || !strings.Contains(got, "WATCHDOG=1") {
		t.Fatalf("later tick: sent %q; want WATCHDOG=1 and no second READY", got)
	}

	// A stuck loop: the pings stop, so systemd's watchdog fires.
	h.healthy.Store(false)
	for i := range 5 {
		n.Tick(&h, t0.Add(time.Duration(3+i)*time.Second))
	}
	if got := strings.Join(pending(t, sock), "|"); strings.Contains(got, "WATCHDOG=1") {
		t.Fatalf("stuck loop still pinged: %q", got)
	}
}

func TestSystemdNotifierRunStopping(t *testing.T) {
	sock := notifySocket(t, 200*time.Millisecond)
	n, err := NewSystemdNotifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	n.Poll = 5 * time.Millisecond
	var h fakeHealth
	h.healthy.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx, &h) }()

	next(t, sock, "WATCHDOG=1")
	h.ready.Store(true)
	next(t, sock, "READY=1")
	next(t, sock, "WATCHDOG=1") // pings go on after READY
	cancel()
	next(t, sock, "STOPPING=1")
	<-done
}

func TestSystemdNotifierOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "")
	n, err := NewSystemdNotifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.Enabled() {
		t.Fatal("enabled without NOTIFY_SOCKET")
	}
	// Run returns at once, whatever the context.
	n.Run(context.Background(), &fakeHealth{})
}
