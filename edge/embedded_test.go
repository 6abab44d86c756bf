package edge

import (
	"bytes"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/internal/poll"
)

func startTestServer(t *testing.T, cfg EmbeddedConfig) *EmbeddedServer {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s, err := StartEmbedded(cfg)
	if err != nil {
		t.Fatalf("StartEmbedded(%+v): %v", cfg, err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func TestEmbeddedRoundTrip(t *testing.T) {
	s := startTestServer(t, EmbeddedConfig{ServerName: "gw1"})

	url := s.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":0") {
		t.Fatalf("ClientURL() = %q, want nats://127.0.0.1:<real port>", url)
	}
	if got := s.Server().Name(); got != "gw1" {
		t.Errorf("server name = %q, want gw1", got)
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("edge.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("edge.test", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("NextMsg: %v", err)
	}
	if string(msg.Data) != "hello" {
		t.Fatalf("got %q, want hello", msg.Data)
	}
	if n := s.NumClients(); n != 1 {
		t.Errorf("NumClients() = %d, want 1", n)
	}
	nc.Close()
	poll.Until(t, 5*time.Second, "the client to be gone", func() bool { return s.NumClients() == 0 })
}

func TestEmbeddedShutdownIdempotent(t *testing.T) {
	s, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(s.Shutdown)
	}
	wg.Wait()
	s.Shutdown()

	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("client connection not closed by Shutdown")
	}
	if s.Server().Running() {
		t.Fatal("server still running after Shutdown")
	}
}

func TestEmbeddedShutdownLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		s, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		s.Shutdown()
		nc.Close()
	}
	poll.Until(t, 5*time.Second, "server goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestEmbeddedWildcardHostGivesLoopbackURL(t *testing.T) {
	s := startTestServer(t, EmbeddedConfig{Listen: "0.0.0.0:0"})
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("ClientURL() = %q, want a loopback URL", s.ClientURL())
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

func TestEmbeddedBadListen(t *testing.T) {
	for _, listen := range []string{
		"",
		"127.0.0.1",
		"127.0.0.1:http-ish",
		"127.0.0.1:-1",
		"127.0.0.1:65536",
		"[::1:4222",
	} {
		s, err := StartEmbedded(EmbeddedConfig{Listen: listen})
		if err == nil {
			s.Shutdown()
			t.Errorf("StartEmbedded(Listen: %q) succeeded, want an error", listen)
			continue
		}
		if !strings.Contains(err.Error(), "nats_listen") {
			t.Errorf("StartEmbedded(Listen: %q) error %q does not name nats_listen", listen, err)
		}
	}
}

func TestEmbeddedPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	listen := l.Addr().String()

	start := time.Now()
	s, err := StartEmbedded(EmbeddedConfig{Listen: listen})
	if err == nil {
		s.Shutdown()
		t.Fatalf("StartEmbedded on busy %s succeeded", listen)
	}
	if !strings.Contains(err.Error(), listen) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error %q should name %s and the cause", err, listen)
	}
	// The failure is known as soon as the listen fails; it must not wait
	// out the readiness timeout.
	if d := time.Since(start); d > readyTimeout/2 {
		t.Errorf("port-in-use error took %s", d)
	}
}

func TestEmbeddedLogsThroughSlog(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	h := slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelInfo})
	s := startTestServer(t, EmbeddedConfig{ServerName: "gw-log", Logger: slog.New(h)})
	s.Shutdown()

	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{"component=nats-server", "Server is ready", "Listening for client connections"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "level=DEBUG") {
		t.Errorf("debug lines logged at Info level:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestParseListen(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int
	}{
		{"127.0.0.1:4222", "127.0.0.1", 4222},
		{":4222", "0.0.0.0", 4222},
		{"[::1]:0", "::1", 0},
		{"gw1.local:4222", "gw1.local", 4222},
	} {
		h, p, err := parseListen(tc.in)
		if err != nil || h != tc.host || p != tc.port {
			t.Errorf("parseListen(%q) = %q, %d, %v; want %q, %d", tc.in, h, p, err, tc.host, tc.port)
		}
	}
}

// TestEmbeddedSystemAccount: with System set, a client without credentials
// lands in the application account, and the system user reads its
// disconnect advisory, with the client's name and the reason the agents'
// fast path acts on. System refuses to mix with other authentication.
func TestEmbeddedSystemAccount(t *testing.T) {
	sysUser := SystemUser{User: "sys", Password: "secret"}
	s := startTestServer(t, EmbeddedConfig{System: &sysUser})
	sys, err := nats.Connect(s.ClientURL(), nats.UserInfo(sysUser.User, sysUser.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	advisories := make(chan *nats.Msg, 16)
	if _, err := sys.ChanSubscribe("$SYS.ACCOUNT.*.DISCONNECT", advisories); err != nil {
		t.Fatal(err)
	}
	if err := sys.Flush(); err != nil {
		t.Fatal(err)
	}
	app, err := nats.Connect(s.ClientURL(), nats.Name("edge-agent/site/gw1"))
	if err != nil {
		t.Fatalf("a client without credentials: %v", err)
	}
	app.Close()
	select {
	case m := <-advisories:
		if !strings.Contains(string(m.Data), `"edge-agent/site/gw1"`) || !strings.Contains(string(m.Data), "Client Closed") {
			t.Fatalf("advisory %s lacks the client's name or its reason", m.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no disconnect advisory within 5 s")
	}
	if _, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0", System: &sysUser, Auth: ClientAuth{Token: "t"}}); err == nil {
		t.Fatal("System with a client token: want an error")
	}
	if _, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:0", System: &SystemUser{User: "sys"}}); err == nil {
		t.Fatal("System without a password: want an error")
	}
}
