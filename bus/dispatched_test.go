package bus

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
	"github.com/edge-agent/edge-agent/internal/poll"
)

// received collects what a dispatched transport delivers, and counts what
// it drops by reason.
type received struct {
	mu   sync.Mutex
	msgs []election.Message
	bad  map[string]int
	// closed is set once Close returned; late counts deliveries after it.
	closed atomic.Bool
	late   atomic.Int32
}

func (r *received) deliver(m election.Message) bool {
	if r.closed.Load() {
		r.late.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	return true
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *received) hooks() agent.Hooks {
	return agent.Hooks{OnBad: func(reason string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.bad[reason]++
	}}
}

// dispatchedMember opens member b of group on nc through d, and a sender a
// of the same group on a connection of its own.
func dispatchedMember(t *testing.T, nc, pub *nats.Conn, d *dispatcher, group string) (*NATSTransport, *NATSTransport, *received) {
	t.Helper()
	r := &received{bad: map[string]int{}}
	members := []string{"a", "b", "c"}
	b, err := NewNATSTransport(nc, NATSTransportConfig{Group: group, Self: "b", Members: members,
		Hooks: r.hooks(), Deliver: r.deliver, dispatch: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	a, err := NewNATSTransport(pub, NATSTransportConfig{Group: group, Self: "a", Members: members})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, b, r
}

// The election transports of many groups on a shared connection take
// their messages off it on the dispatcher's one goroutine, not one each,
// and each gets its own group's messages.
func TestDispatchedTransportsShareOneGoroutine(t *testing.T) {
	nc, pub := subscriberAndPublisher(t)
	d := newDispatcher()
	const groups = 100
	before := runtime.NumGoroutine()
	senders := make([]*NATSTransport, groups)
	got := make([]*received, groups)
	for i := range groups {
		senders[i], _, got[i] = dispatchedMember(t, nc, pub, d, fmt.Sprintf("site%03d", i))
	}
	// Each sender is a transport without a dispatcher: one goroutine each.
	if g := runtime.NumGoroutine() - before - groups; g > 1 {
		t.Errorf("%d dispatched transports added %d goroutines, want 1", groups, g)
	}
	for i, a := range senders {
		if err := a.Send(election.Message{Type: election.MsgHeartbeat, From: "a", Term: uint64(i + 1), Seq: 1}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "every group's heartbeat delivered", func() bool {
		for _, r := range got {
			if r.count() < 1 {
				return false
			}
		}
		return true
	})
	for i, r := range got {
		r.mu.Lock()
		if len(r.msgs) != 1 || r.msgs[0].Term != uint64(i+1) {
			t.Errorf("site%03d got %+v, want its own heartbeat of term %d", i, r.msgs, i+1)
		}
		r.mu.Unlock()
	}
}

// holdDispatcher holds d's goroutine in the handler of a subscription of
// its own until release is called (once), so that messages queue at d.
func holdDispatcher(t *testing.T, nc, pub *nats.Conn, d *dispatcher) (release func()) {
	t.Helper()
	done, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(done) }) }
	_, undo, err := d.subscribe(nc, "hold", func(*nats.Msg) { close(held); <-done }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(); undo() }) // a test that failed held still lets go

	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("hold", nil); err != nil {
		t.Fatal(err)
	}
	<-held
	return release
}

// A dispatched transport's broadcast and direct messages reach it in the
// order they were sent, also when they queued at the dispatcher together
// (one route for both subjects: two would be served in turn).
func TestDispatchedTransportKeepsOrderAcrossSubjects(t *testing.T) {
	nc, pub := subscriberAndPublisher(t)
	d := newDispatcher()
	a, _, r := dispatchedMember(t, nc, pub, d, "site")
	// Hold the dispatcher's goroutine in another subscription's handler
	// until every election message waits in its queue.
	release := holdDispatcher(t, nc, pub, d)
	// Broadcasts (B) and direct messages (D) in runs: B B B D D B D B B D.
	var sent []election.Message
	for i, direct := range []bool{false, false, false, true, true, false, true, false, false, true} {
		m := election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: uint64(i + 1)}
		if direct {
			m = election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 1, Seq: uint64(i + 1)}
		}
		if err := a.Send(m); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
	}
	poll.Until(t, 10*time.Second, "the messages to wait at the dispatcher", func() bool { return len(d.ch) == len(sent) })
	release()
	poll.Until(t, 10*time.Second, "every message delivered", func() bool { return r.count() == len(sent) })
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range r.msgs {
		if m.Seq != sent[i].Seq || m.Type != sent[i].Type {
			t.Fatalf("delivery %d was %s seq %d, want %s seq %d (order %v)", i, m.Type, m.Seq, sent[i].Type, sent[i].Seq, seqs(r.msgs))
		}
	}
}

func seqs(ms []election.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

// A dispatched transport drops a flooding sender over its rate, counted,
// before the message takes a place in the dispatcher's queue: another
// member of the flooded group, and another group on the same dispatcher,
// still get through.
func TestDispatchedTransportLimitsAFlood(t *testing.T) {
	nc, pub := subscriberAndPublisher(t)
	d := newDispatcher()
	flooder, _, flooded := dispatchedMember(t, nc, pub, d, "flooded")
	other, _, quiet := dispatchedMember(t, nc, pub, d, "quiet")
	honest, err := NewNATSTransport(pub, NATSTransportConfig{Group: "flooded", Self: "c", Members: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = honest.Close() })
	// Hold the dispatcher until the flood and the honest message wait in
	// its queue together: the share of the flooded group's route holds
	// 64, and only admission by sender keeps the flood out of it.
	release := holdDispatcher(t, nc, pub, d)
	const n = 1000
	for i := range n {
		_ = flooder.Send(election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 1, Seq: uint64(i + 1)})
	}
	if err := honest.Send(election.Message{Type: election.MsgAck, From: "c", To: "b", Term: 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := other.Send(election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "everything to wait at the dispatcher", func() bool { return len(d.ch) == n+2 })
	release()
	poll.Until(t, 10*time.Second, "the quiet group's heartbeat", func() bool { return quiet.count() == 1 })
	poll.UntilWhy(t, 10*time.Second, "the honest member's message in the flooded group", func() (bool, string) {
		flooded.mu.Lock()
		defer flooded.mu.Unlock()
		for _, m := range flooded.msgs {
			if m.From == "c" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d delivered, dropped %v", len(flooded.msgs), flooded.bad)
	})
	poll.UntilWhy(t, 10*time.Second, "every flood message delivered or dropped", func() (bool, string) {
		flooded.mu.Lock()
		defer flooded.mu.Unlock()
		total := len(flooded.msgs)
		for _, c := range flooded.bad {
			total += c
		}
		return total == n+1, fmt.Sprintf("%d delivered, dropped %v", len(flooded.msgs), flooded.bad)
	})
	_, burst := SenderRate(0, 3)
	flooded.mu.Lock()
	defer flooded.mu.Unlock()
	if len(flooded.msgs) > int(burst)+20 || flooded.bad[wire.ReasonRateLimited] == 0 || flooded.bad[wire.ReasonInboxFull] != 0 {
		t.Errorf("a flood of %d: %d delivered (burst %.0f), dropped %v", n, len(flooded.msgs), burst, flooded.bad)
	}
}

// Close of a dispatched transport waits for a delivery under way; none
// follows it, while messages keep coming.
func TestDispatchedTransportCloseWhileReceiving(t *testing.T) {
	nc, pub := subscriberAndPublisher(t)
	d := newDispatcher()
	a, b, r := dispatchedMember(t, nc, pub, d, "site")
	// Another group keeps the dispatcher running after b's routes go.
	dispatchedMember(t, nc, pub, d, "other")
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for seq := uint64(1); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = a.Send(election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 1, Seq: seq})
		}
	}()
	poll.Until(t, 10*time.Second, "a first delivery", func() bool { return r.count() > 0 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	r.closed.Store(true)
	// Let traffic for the closed transport reach the dispatcher: messages
	// published after Close returned are flushed through the server and
	// back before the check.
	n := r.count()
	for range 100 {
		_ = a.Send(election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 1, Seq: 1})
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	if late := r.late.Load(); late != 0 || r.count() != n {
		t.Errorf("%d deliveries after Close returned", late)
	}
}
