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
)

// TestE2ESystemdNotify runs the binary as systemd would run it under the
// Type=notify unit, with a NOTIFY_SOCKET and WATCHDOG_USEC: it says READY=1
// once it has joined its group (here a group of one with its own embedded
// server), pings the watchdog, and says STOPPING=1 on SIGTERM.
func TestE2ESystemdNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdn") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()

	cmd := exec.Command(binary, "run", "--id", "gw1", "--group", "solo", "--members", "gw1",
		"--embedded-nats", "--nats-listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"),
		"--http-addr", "off", "--heartbeat", "100ms")
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

	// Datagrams arrive in the order the agent sent them.
	var seen []string
	await := func(want string) {
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
				return
			}
		}
	}
	await("READY=1")
	if !strings.Contains(strings.Join(seen, "|"), "STATUS=leader gw1") {
		t.Errorf("READY without the leader in STATUS: %q", seen)
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
