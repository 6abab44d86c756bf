package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// TestE2ESystemdNotify runs the binary as systemd would run it under the
// Type=notify unit, with a NOTIFY_SOCKET and WATCHDOG_USEC: it says READY=1
// once it has joined its group (here a group of one with its own embedded
// server), pings the watchdog, and says STOPPING=1 on SIGTERM.
func TestE2ESystemdNotify(t *testing.T) {
	dir, path, await := notifySocket(t)
	cmd := exec.Command(binary, "run", "--id", "gw1", "--group", "solo", "--members", "gw1",
		"--embedded-nats", "--nats-listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"),
		"--http-addr", "off", "--heartbeat", "100ms")
	runNotified(t, cmd, path, await, func(seen []string) {
		if !strings.Contains(strings.Join(seen, "|"), "STATUS=leader gw1") {
			t.Errorf("READY without the leader in STATUS: %q", seen)
		}
	})
}

// TestE2ESystemdNotifyWitness: edge-agent witness under the same unit says
// READY=1 once connected, although none of its groups' gateways runs (a
// witness does not wait for its sites), pings the watchdog while its
// groups' loops run, and says STOPPING=1 on SIGTERM.
func TestE2ESystemdNotifyWitness(t *testing.T) {
	ns, err := harness.StartNATS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	dir, path, await := notifySocket(t)
	cmd := exec.Command(binary, "witness", "--id", "wit", "--members", "gw1=1,gw2=2,wit=3", "--witnesses", "wit",
		"--groups", "north,south", "--nats-url", ns.ClientURL(), "--state-dir", filepath.Join(dir, "state"),
		"--http-addr", "off", "--heartbeat", "100ms")
	runNotified(t, cmd, path, await, nil)
}

// notifySocket makes systemd's notification socket in a new directory,
// and returns the directory, the socket's path and a function that waits
// for a datagram containing want, returning every datagram so far.
func notifySocket(t *testing.T) (dir, path string, await func(want string) []string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path = filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	// Datagrams arrive in the order the agent sent them.
	var seen []string
	return dir, path, func(want string) []string {
		t.Helper()
		buf := make([]byte, 4096)
		if err := sock.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		for {
			n, err := sock.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %s: %v; got %q", want, err, seen)
			}
			msg := string(buf[:n])
			seen = append(seen, msg)
			if strings.Contains(msg, want) {
				return seen
			}
		}
	}
}

// runNotified starts cmd with systemd's notification socket path and a
// 2 s watchdog, and checks READY=1 (then ready, if set, on what came so
// far), a watchdog ping, and STOPPING=1 and exit 0 on SIGTERM.
func runNotified(t *testing.T, cmd *exec.Cmd, path string, await func(string) []string, ready func([]string)) {
	t.Helper()
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+path, "WATCHDOG_USEC=2000000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	seen := await("READY=1")
	if ready != nil {
		ready(seen)
	}
	await("WATCHDOG=1")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("STOPPING=1")
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
}
