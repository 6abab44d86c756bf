package agent_test

import (
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/election"
)

// memPending drains and returns what is waiting in t's inbox; delivery is
// synchronous, so nothing more can be on its way.
func memPending(t *agent.MemTransport) []election.Message {
	var out []election.Message
	for {
		select {
		case m, ok := <-t.Inbox():
			if !ok {
				return out
			}
			out = append(out, m)
		default:
			return out
		}
	}
}

func memJoin(n *agent.MemNetwork, ids ...string) map[string]*agent.MemTransport {
	ts := map[string]*agent.MemTransport{}
	for _, id := range ids {
		ts[id] = n.Join(id)
	}
	return ts
}

func memSend(t *testing.T, tr *agent.MemTransport, m election.Message) {
	t.Helper()
	if err := tr.Send(m); err != nil {
		t.Fatalf("%s: Send(%+v): %v", tr.ID(), m, err)
	}
}

// memHeard returns, for each transport, how many messages it has waiting.
func memHeard(ts map[string]*agent.MemTransport) map[string]int {
	out := map[string]int{}
	for id, tr := range ts {
		out[id] = len(memPending(tr))
	}
	return out
}

func wantHeard(t *testing.T, what string, got, want map[string]int) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: heard %v, want %v", what, got, want)
	}
}

func TestMemTransportBroadcastAndDirect(t *testing.T) {
	n := agent.NewMemNetwork()
	ts := memJoin(n, "a", "b", "c")

	hb := election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Alive: []string{"a", "b"}}
	memSend(t, ts["a"], hb)
	for _, id := range []string{"b", "c"} {
		got := memPending(ts[id])
		if len(got) != 1 || !reflect.DeepEqual(got[0], hb) {
			t.Errorf("%s got %+v, want [%+v]", id, got, hb)
		}
	}
	if got := memPending(ts["a"]); len(got) != 0 {
		t.Errorf("sender heard its own broadcast: %+v", got)
	}

	vote := election.Message{Type: election.MsgVote, From: "c", To: "a", Term: 1, Granted: true}
	memSend(t, ts["c"], vote)
	wantHeard(t, "direct", memHeard(ts), map[string]int{"a": 1, "b": 0, "c": 0})

	// To a member that never joined: lost, not an error.
	memSend(t, ts["a"], election.Message{Type: election.MsgOK, From: "a", To: "d"})
}

func TestMemTransportPartitions(t *testing.T) {
	n := agent.NewMemNetwork()
	ts := memJoin(n, "a", "b", "c")
	broadcast := func(from string) {
		memSend(t, ts[from], election.Message{Type: election.MsgElection, From: from})
	}

	n.Cut("a", "b")
	broadcast("a")
	wantHeard(t, "a after Cut(a,b)", memHeard(ts), map[string]int{"a": 0, "b": 0, "c": 1})
	broadcast("b")
	wantHeard(t, "b after Cut(a,b)", memHeard(ts), map[string]int{"a": 0, "b": 0, "c": 1})

	n.Heal()
	n.CutOneWay("a", "b")
	broadcast("a")
	wantHeard(t, "a after CutOneWay(a,b)", memHeard(ts), map[string]int{"a": 0, "b": 0, "c": 1})
	broadcast("b")
	wantHeard(t, "b after CutOneWay(a,b)", memHeard(ts), map[string]int{"a": 1, "b": 0, "c": 1})

	n.Heal()
	n.Isolate("c")
	broadcast("a")
	wantHeard(t, "a with c isolated", memHeard(ts), map[string]int{"a": 0, "b": 1, "c": 0})
	broadcast("c")
	wantHeard(t, "c isolated", memHeard(ts), map[string]int{"a": 0, "b": 0, "c": 0})
	if !ts["c"].Connected() {
		t.Error("an isolated member reports Connected() = false")
	}

	n.Heal()
	broadcast("c")
	wantHeard(t, "c after Heal", memHeard(ts), map[string]int{"a": 1, "b": 1, "c": 0})
}

func TestMemTransportDisconnect(t *testing.T) {
	n := agent.NewMemNetwork()
	ts := memJoin(n, "a", "b")
	n.Disconnect("a")
	if ts["a"].Connected() {
		t.Error("a disconnected member reports Connected() = true")
	}
	if err := ts["a"].Send(election.Message{Type: election.MsgElection, From: "a"}); err == nil {
		t.Error("Send while disconnected succeeded")
	}
	memSend(t, ts["b"], election.Message{Type: election.MsgElection, From: "b"})
	wantHeard(t, "disconnected", memHeard(ts), map[string]int{"a": 0, "b": 0})
	n.Heal()
	if !ts["a"].Connected() {
		t.Error("Connected() = false after Heal")
	}
	memSend(t, ts["a"], election.Message{Type: election.MsgElection, From: "a"})
	wantHeard(t, "after Heal", memHeard(ts), map[string]int{"a": 0, "b": 1})
}

func TestMemTransportCopiesMessages(t *testing.T) {
	n := agent.NewMemNetwork()
	ts := memJoin(n, "a", "b", "c")
	alive := []string{"a", "b", "c"}
	memSend(t, ts["a"], election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Alive: alive})
	alive[0] = "x"
	b, c := memPending(ts["b"])[0], memPending(ts["c"])[0]
	if b.Alive[0] != "a" {
		t.Fatalf("receiver shares the sender's slice: %v", b.Alive)
	}
	b.Alive[1] = "y"
	if c.Alive[1] != "b" {
		t.Fatalf("receivers share a slice: %v", c.Alive)
	}
}

func TestMemTransportInboxFull(t *testing.T) {
	n := agent.NewMemNetwork()
	ts := memJoin(n, "a", "b")
	for i := uint64(1); i <= agent.MemInboxSize+3; i++ {
		memSend(t, ts["a"], election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 1, Seq: i})
	}
	got := memPending(ts["b"])
	if len(got) != agent.MemInboxSize || got[0].Seq != 1 || got[len(got)-1].Seq != agent.MemInboxSize {
		t.Fatalf("b kept %d messages, want the first %d", len(got), agent.MemInboxSize)
	}
	if d := n.Dropped(); d != 3 {
		t.Errorf("Dropped() = %d, want 3", d)
	}
}

func TestMemTransportSendChecksMessages(t *testing.T) {
	n := agent.NewMemNetwork()
	ts := memJoin(n, "a", "b")
	for _, m := range []election.Message{
		{Type: election.MsgElection, From: "b"},                       // someone else's
		{Type: election.MsgHeartbeat, From: "a", Term: 1},             // seq 0
		{Type: election.MsgOK, From: "a", To: "b", Granted: true},     // granted on ok
		{Type: election.MsgOK, From: "a", To: "a"},                    // to itself
		{Type: election.MsgInvalid, From: "a"},                        // no type
		{Type: election.MsgElection, From: "a", Alive: []string{"b"}}, // alive on election
	} {
		err := ts["a"].Send(m)
		if err == nil || !strings.HasPrefix(err.Error(), "agent: send: ") {
			t.Errorf("Send(%+v) = %v, want an \"agent: send: \" error", m, err)
		}
	}
	wantHeard(t, "refused sends", memHeard(ts), map[string]int{"a": 0, "b": 0})
}

func TestMemTransportCloseAndRejoin(t *testing.T) {
	n := agent.NewMemNetwork()
	ts := memJoin(n, "a", "b")
	b := ts["b"]
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-b.Inbox(); ok {
		t.Fatal("inbox open after Close")
	}
	if b.Connected() {
		t.Error("Connected() = true after Close")
	}
	if err := b.Send(election.Message{Type: election.MsgElection, From: "b"}); err == nil {
		t.Error("Send after Close succeeded")
	}
	memSend(t, ts["a"], election.Message{Type: election.MsgElection, From: "a"}) // to nobody

	b2 := n.Join("b")
	memSend(t, ts["a"], election.Message{Type: election.MsgElection, From: "a"})
	if got := memPending(b2); len(got) != 1 {
		t.Fatalf("rejoined b heard %d messages, want 1", len(got))
	}

	// Joining a live id again replaces (and closes) the old transport.
	b3 := n.Join("b")
	if _, ok := <-b2.Inbox(); ok {
		t.Fatal("replaced transport's inbox still open")
	}
	memSend(t, ts["a"], election.Message{Type: election.MsgElection, From: "a"})
	if got := memPending(b3); len(got) != 1 {
		t.Fatalf("new b heard %d messages, want 1", len(got))
	}
}

// TestMemTransportConcurrent sends, partitions and closes from several
// goroutines at once, for the race detector.
func TestMemTransportConcurrent(t *testing.T) {
	n := agent.NewMemNetwork()
	ids := []string{"a", "b", "c", "d"}
	ts := memJoin(n, ids...)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for seq := uint64(1); seq <= 200; seq++ {
				_ = ts[id].Send(election.Message{Type: election.MsgHeartbeat, From: id, Term: 1, Seq: seq})
			}
		}()
		go func() {
			defer wg.Done()
			for range ts[id].Inbox() {
			}
		}()
	}
	for i := range 50 {
		n.Cut(ids[i%4], ids[(i+1)%4])
		n.Isolate(ids[i%4])
		n.Heal()
	}
	for _, id := range slices.Backward(ids) {
		ts[id].Close()
	}
	wg.Wait()
}
