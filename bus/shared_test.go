package bus

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
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

// A drop of a shared connection reaches every bus open on it, none that
// closed, and is logged once, not once per bus.
func TestSharedConnReportsDropToEveryOpenBus(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
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

// The subscriptions of the buses on a shared connection are served by one
// goroutine of the Shared's: every message reaches its subscription's
// handler in the order sent (across subscriptions too), and none reaches
// the handler of a subscription undone.
func TestSharedConnServesSubscriptionsInOrder(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	conn := func() *nats.Conn {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nc, pub := conn(), conn()
	sh := NewShared(nc, slog.New(slog.NewTextHandler(&syncBuffer{}, nil)))
	var mu sync.Mutex
	var got []string
	handler := func(name string) nats.MsgHandler {
		return func(m *nats.Msg) {
			mu.Lock()
			got = append(got, name+":"+string(m.Data))
			mu.Unlock()
		}
	}
	undoA, err := sh.subscribe(nc, "t.a", handler("a"))
	if err != nil {
		t.Fatal(err)
	}
	undoB, err := sh.subscribe(nc, "t.*.b", handler("b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undoB)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 200 {
		subj, name := "t.a", "a"
		if i%3 == 0 {
			subj, name = "t.x.b", "b"
		}
		if err := pub.Publish(subj, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s:%d", name, i))
	}
	handled := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	poll.Until(t, 10*time.Second, "every message handled", func() bool { return len(handled()) >= len(want) })
	if h := handled(); !slices.Equal(h, want) {
		t.Fatalf("handled %v, want %v", h, want)
	}

	undoA()
	for _, subj := range []string{"t.a", "t.x.b"} {
		if err := pub.Publish(subj, []byte("after")); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, "b:after")
	poll.Until(t, 10*time.Second, "the message to the remaining subscription", func() bool { return len(handled()) >= len(want) })
	// Both were sent in order from one connection: b's was handled, so
	// a's, before it, was dropped, not delayed.
	if h := handled(); !slices.Equal(h, want) {
		t.Fatalf("after undoing a: handled %v", h[len(want)-1:])
	}
}
