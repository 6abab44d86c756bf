package bus

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/poll"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startPlainServer starts a nats-server on loopback, shut down with the test.
func startPlainServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return s
}

// connectPlain connects to s, closed with the test.
func connectPlain(t *testing.T, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// A drop of a shared connection reaches every bus open on it, none that
// closed, and is logged once, not once per bus.
func TestSharedConnReportsDropToEveryOpenBus(t *testing.T) {
	s := startPlainServer(t)
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var logs syncBuffer
	sh := NewShared(nc, slog.New(slog.NewTextHandler(&logs, nil)))
	var open []*agent.Mailbox
	for range 3 {
		mb := agent.NewMailbox(4)
		t.Cleanup(mb.Close)
		sh.add(mb)
		open = append(open, mb)
	}
	closed := agent.NewMailbox(4)
	t.Cleanup(closed.Close)
	sh.add(closed)()
	s.Shutdown()
	for i, mb := range open {
		select {
		case in := <-mb.C():
			if in.Kind != agent.InputDisconnected {
				t.Errorf("bus %d got %+v, want the disconnect", i, in)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("bus %d: no disconnect report within 10 s", i)
		}
	}
	select {
	case in := <-closed.C():
		t.Errorf("a bus that closed got %+v", in)
	default:
	}
	// The handler logs after it reported the drop to the buses.
	poll.Until(t, 10*time.Second, "the drop logged", func() bool { return strings.Contains(logs.String(), "NATS disconnected") })
	if n := strings.Count(logs.String(), "NATS disconnected"); n != 1 {
		t.Errorf("%d log lines for one drop, want 1:\n%s", n, logs.String())
	}
}
