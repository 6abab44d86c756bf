package bus_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/bus"
	"github.com/edge-agent/edge-agent/election"
)

// natsTestWait bounds every wait in these tests; none of them sleeps.
const natsTestWait = 5 * time.Second

// startNATSTestServer runs an embedded nats-server on a free local port until
// the test ends.
func startNATSTestServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(natsTestWait) {
		s.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func connectNATSTest(t *testing.T, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// hookLog records what a transport reports through Hooks.
type hookLog struct {
	mu  sync.Mutex
	bad map[string]int
	msg map[string]int // "<type>/<direction>"
}

func newHookLog() *hookLog {
	return &hookLog{bad: map[string]int{}, msg: map[string]int{}}
}

func (h *hookLog) hooks() agent.Hooks {
	return agent.Hooks{
		OnBad: func(reason string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.bad[reason]++
		},
		OnMessage: func(t election.MsgType, dir string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.msg[t.String()+"/"+dir]++
		},
	}
}

func (h *hookLog) badCounts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.bad {
		out[k] = v
	}
	return out
}

func (h *hookLog) msgCount(t election.MsgType, dir string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msg[t.String()+"/"+dir]
}

var natsTestMembers = []string{"a", "b", "c"}

// newNATSTestTransport joins member self of group g over its own connection.
func newNATSTestTransport(t *testing.T, s *server.Server, self string, inbox int, opts ...nats.Option) (*bus.NATSTransport, *hookLog) {
	t.Helper()
	if opts == nil {
		opts = bus.NATSOptions("test-" + self)
	}
	nc := connectNATSTest(t, s, opts...)
	h := newHookLog()
	tr, err := bus.NewNATSTransport(nc, bus.NATSTransportConfig{
		Group: "g", Self: self, Members: natsTestMembers, Hooks: h.hooks(), InboxSize: inbox,
		// These tests send bursts far above a member's rate; the rate
		// limit has its own test.
		SenderBurst: 1e9,
	})
	if err != nil {
		t.Fatalf("NewNATSTransport(%s): %v", self, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, h
}

func recvMsg(t *testing.T, tr agent.Transport, who string) election.Message {
	t.Helper()
	select {
	case m, ok := <-tr.Inbox():
		if !ok {
			t.Fatalf("%s: inbox closed", who)
		}
		return m
	case <-time.After(natsTestWait):
		t.Fatalf("%s: no message within %s", who, natsTestWait)
	}
	return election.Message{}
}

// waitUntil polls cond until it holds or the test's wait runs out.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(natsTestWait)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func mustSend(t *testing.T, tr agent.Transport, m election.Message) {
	t.Helper()
	if err := tr.Send(m); err != nil {
		t.Fatalf("Send(%+v): %v", m, err)
	}
}

func wantMsg(t *testing.T, who string, got, want election.Message) {
	t.Helper()
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("%s got %+v, want %+v", who, got, want)
	}
}

func TestNATSTransportBroadcast(t *testing.T) {
	s := startNATSTestServer(t)
	a, ha := newNATSTestTransport(t, s, "a", 0)
	b, hb := newNATSTestTransport(t, s, "b", 0)
	c, _ := newNATSTestTransport(t, s, "c", 0)

	hbMsg := election.Message{Type: election.MsgHeartbeat, From: "a", Term: 2, Seq: 7, Alive: []string{"a", "b", "c"}}
	mustSend(t, a, hbMsg)
	wantMsg(t, "b", recvMsg(t, b, "b"), hbMsg)
	wantMsg(t, "c", recvMsg(t, c, "c"), hbMsg)

	// a must not hear itself: the first thing it hears is b's later message.
	marker := election.Message{Type: election.MsgElection, From: "b", Term: 2}
	mustSend(t, b, marker)
	wantMsg(t, "a", recvMsg(t, a, "a"), marker)

	if n := ha.msgCount(election.MsgHeartbeat, "out"); n != 1 {
		t.Errorf("a counted %d heartbeats out, want 1", n)
	}
	if n := hb.msgCount(election.MsgHeartbeat, "in"); n != 1 {
		t.Errorf("b counted %d heartbeats in, want 1", n)
	}
	for who, h := range map[string]*hookLog{"a": ha, "b": hb} {
		if bad := h.badCounts(); len(bad) != 0 {
			t.Errorf("%s dropped %v", who, bad)
		}
	}
}

func TestNATSTransportDirect(t *testing.T) {
	s := startNATSTestServer(t)
	a, _ := newNATSTestTransport(t, s, "a", 0)
	b, _ := newNATSTestTransport(t, s, "b", 0)
	c, hc := newNATSTestTransport(t, s, "c", 0)

	vote := election.Message{Type: election.MsgVote, From: "a", To: "b", Term: 3, Seq: 1, Granted: true}
	mustSend(t, a, vote)
	wantMsg(t, "b", recvMsg(t, b, "b"), vote)

	// c must not get the vote: the first thing it hears is a's later broadcast.
	marker := election.Message{Type: election.MsgCoordinator, From: "a", Term: 4, Seq: 1}
	mustSend(t, a, marker)
	wantMsg(t, "c", recvMsg(t, c, "c"), marker)
	wantMsg(t, "b", recvMsg(t, b, "b"), marker)
	if bad := hc.badCounts(); len(bad) != 0 {
		t.Errorf("c dropped %v", bad)
	}
}

// TestNATSTransportOrder checks that broadcasts and direct messages from one
// sender arrive in the order they were sent.
func TestNATSTransportOrder(t *testing.T) {
	s := startNATSTestServer(t)
	a, _ := newNATSTestTransport(t, s, "a", 0)
	b, _ := newNATSTestTransport(t, s, "b", 0)
	var sent []election.Message
	for i := uint64(1); i <= 200; i++ {
		m := election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: i}
		if i%2 == 0 {
			m = election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 1, Seq: i}
		}
		mustSend(t, a, m)
		sent = append(sent, m)
	}
	for i, want := range sent {
		wantMsg(t, fmt.Sprintf("b message %d", i), recvMsg(t, b, "b"), want)
	}
}

func TestNATSTransportEchoIsDroppedSilently(t *testing.T) {
	s := startNATSTestServer(t)
	a, ha := newNATSTestTransport(t, s, "a", 0, nats.Name("echo")) // echo on
	b, _ := newNATSTestTransport(t, s, "b", 0)

	mustSend(t, a, election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1})
	recvMsg(t, b, "b")
	// The server sent a its own heartbeat before b's reply, and the
	// transport keeps arrival order, so a has handled the echo by now.
	marker := election.Message{Type: election.MsgAck, From: "b", To: "a", Term: 1, Seq: 1}
	mustSend(t, b, marker)
	wantMsg(t, "a", recvMsg(t, a, "a"), marker)
	if bad := ha.badCounts(); len(bad) != 0 {
		t.Errorf("a counted its echo as bad: %v", bad)
	}
	if n := ha.msgCount(election.MsgHeartbeat, "in"); n != 0 {
		t.Errorf("a counted its echo as %d heartbeats in", n)
	}
}

func TestNATSTransportDropsBadMessages(t *testing.T) {
	s := startNATSTestServer(t)
	b, hb := newNATSTestTransport(t, s, "b", 0)
	raw := connectNATSTest(t, s)

	prefix := agent.DefaultSubjectPrefix
	fromA := wire.BroadcastSubject(prefix, "g", "a")
	good := func(m election.Message) []byte { return mustEncode(t, "g", m) }
	hbA := election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1}
	oversize := append(good(hbA), []byte(strings.Repeat(" ", wire.MaxMessageSize))...)

	publish := []struct {
		what    string
		subject string
		data    []byte
	}{
		{"garbage", fromA, []byte("garbage")},
		{"empty payload", fromA, nil},
		{"unknown field", fromA, []byte(`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1,"extra":true}`)},
		{"oversize", fromA, oversize},
		{"unknown version", fromA, []byte(`{"v":9,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1}`)},
		{"unknown type", fromA, []byte(`{"v":1,"group":"g","type":"takeover","from":"a","term":1}`)},
		{"forged sender", fromA, good(election.Message{Type: election.MsgHeartbeat, From: "c", Term: 1, Seq: 1})},
		{"non-member", wire.BroadcastSubject(prefix, "g", "zz"), []byte(`{"v":1,"group":"g","type":"heartbeat","from":"zz","term":1,"seq":1}`)},
		{"wrong group on our subject", fromA, mustEncode(t, "other", hbA)},
		{"seq 0", fromA, []byte(`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1}`)},
		// Never delivered to b: another group's subject, a message for c.
		{"other group", wire.BroadcastSubject(prefix, "other", "a"), mustEncode(t, "other", hbA)},
		{"for c", wire.DirectSubject(prefix, "g", "a", "c"), good(election.Message{Type: election.MsgOK, From: "a", To: "c"})},
		// The marker: b handles messages in order, so everything before it
		// has been handled once b receives it.
		{"marker", fromA, good(hbA)},
	}
	for _, p := range publish {
		if err := raw.Publish(p.subject, p.data); err != nil {
			t.Fatalf("publish %s: %v", p.what, err)
		}
	}
	wantMsg(t, "b", recvMsg(t, b, "b"), hbA)
	want := map[string]int{
		wire.ReasonMalformed:       3,
		wire.ReasonOversize:        1,
		wire.ReasonUnknownVersion:  1,
		wire.ReasonUnknownType:     1,
		wire.ReasonSubjectMismatch: 1,
		wire.ReasonNotMember:       1,
		wire.ReasonWrongGroup:      1,
		wire.ReasonBadField:        1,
	}
	if got := hb.badCounts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("drops by reason:\n got %v\nwant %v", got, want)
	}
	select {
	case m := <-b.Inbox():
		t.Errorf("b accepted %+v after the marker", m)
	default:
	}
}

func TestNATSTransportInboxFull(t *testing.T) {
	s := startNATSTestServer(t)
	a, _ := newNATSTestTransport(t, s, "a", 0)
	b, hb := newNATSTestTransport(t, s, "b", 1)
	const n = 5
	for i := uint64(1); i <= n; i++ {
		mustSend(t, a, election.Message{Type: election.MsgAck, From: "a", To: "b", Term: 1, Seq: i})
	}
	waitUntil(t, "4 inbox_full drops", func() bool { return hb.badCounts()[wire.ReasonInboxFull] == n-1 })
	if m := recvMsg(t, b, "b"); m.Seq != 1 {
		t.Errorf("b kept seq %d, want the first, 1", m.Seq)
	}
	if got := hb.msgCount(election.MsgAck, "in"); got != 1 {
		t.Errorf("b counted %d acks in, want 1 (drops are not accepted messages)", got)
	}
}

func TestNATSTransportClose(t *testing.T) {
	s := startNATSTestServer(t)
	nc := connectNATSTest(t, s, bus.NATSOptions("close")...)
	b, err := bus.NewNATSTransport(nc, bus.NATSTransportConfig{Group: "g", Self: "b", Members: natsTestMembers})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Connected() {
		t.Error("Connected() = false on a live connection")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case m, ok := <-b.Inbox():
		if ok {
			t.Fatalf("inbox delivered %+v after Close", m)
		}
	case <-time.After(natsTestWait):
		t.Fatal("inbox not closed by Close")
	}
	if b.Connected() {
		t.Error("Connected() = true after Close")
	}
	if err := b.Send(election.Message{Type: election.MsgElection, From: "b"}); err == nil {
		t.Error("Send after Close succeeded")
	}
	if !nc.IsConnected() {
		t.Error("Close closed the caller's connection")
	}
}

// TestNATSTransportCloseWhileReceiving closes a transport while messages
// pour in; the race detector and the closed inbox must stay quiet.
func TestNATSTransportCloseWhileReceiving(t *testing.T) {
	s := startNATSTestServer(t)
	a, _ := newNATSTestTransport(t, s, "a", 0)
	b, _ := newNATSTestTransport(t, s, "b", 4)
	stop := make(chan struct{})
	done := make(chan struct{})
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
	recvMsg(t, b, "b")
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	close(stop)
	<-done
	for range b.Inbox() {
	}
}

func TestNATSTransportSendErrors(t *testing.T) {
	s := startNATSTestServer(t)
	nc := connectNATSTest(t, s, bus.NATSOptions("send")...)
	h := newHookLog()
	a, err := bus.NewNATSTransport(nc, bus.NATSTransportConfig{Group: "g", Self: "a", Members: natsTestMembers, Hooks: h.hooks()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, c := range []struct {
		name string
		m    election.Message
	}{
		{"someone else's message", election.Message{Type: election.MsgElection, From: "b"}},
		{"to a non-member", election.Message{Type: election.MsgOK, From: "a", To: "zz"}},
		{"alive lists a non-member", election.Message{Type: election.MsgHeartbeat, From: "a", Term: 1, Seq: 1, Alive: []string{"zz"}}},
		{"heartbeat without term", election.Message{Type: election.MsgHeartbeat, From: "a", Seq: 1}},
		{"to itself", election.Message{Type: election.MsgOK, From: "a", To: "a"}},
		{"invalid type", election.Message{From: "a"}},
	} {
		err := a.Send(c.m)
		if err == nil || !strings.HasPrefix(err.Error(), "bus: send: ") {
			t.Errorf("%s: Send = %v, want a \"bus: send: \" error", c.name, err)
		}
	}
	if n := h.msgCount(election.MsgOK, "out"); n != 0 {
		t.Errorf("refused sends counted as %d out", n)
	}

	nc.Close()
	err = a.Send(election.Message{Type: election.MsgElection, From: "a"})
	if !errors.Is(err, nats.ErrConnectionClosed) || !strings.HasPrefix(err.Error(), "bus: send: ") {
		t.Errorf("Send on a closed connection = %v, want a wrapped nats.ErrConnectionClosed", err)
	}
	if a.Connected() {
		t.Error("Connected() = true on a closed connection")
	}
}

// TestNATSTransportNoLateDelivery checks that, with NATSOptions, a send while
// the server is away fails at once instead of being buffered for later.
func TestNATSTransportNoLateDelivery(t *testing.T) {
	s := startNATSTestServer(t)
	a, _ := newNATSTestTransport(t, s, "a", 0)
	if !a.Connected() {
		t.Fatal("not connected")
	}
	s.Shutdown()
	waitUntil(t, "the client to notice the server is gone", func() bool { return !a.Connected() })
	err := a.Send(election.Message{Type: election.MsgElection, From: "a"})
	if !errors.Is(err, nats.ErrReconnectBufExceeded) {
		t.Fatalf("Send while disconnected = %v, want nats.ErrReconnectBufExceeded", err)
	}
}

func TestNewNATSTransportRejectsBadConfig(t *testing.T) {
	s := startNATSTestServer(t)
	nc := connectNATSTest(t, s)
	if _, err := bus.NewNATSTransport(nil, bus.NATSTransportConfig{Group: "g", Self: "a", Members: []string{"a"}}); err == nil {
		t.Error("nil connection accepted")
	}
	for _, c := range []struct {
		name string
		cfg  bus.NATSTransportConfig
	}{
		{"bad prefix", bus.NATSTransportConfig{Prefix: "a.*", Group: "g", Self: "a", Members: []string{"a"}}},
		{"empty prefix token", bus.NATSTransportConfig{Prefix: "a..b", Group: "g", Self: "a", Members: []string{"a"}}},
		{"bad group", bus.NATSTransportConfig{Group: "g.h", Self: "a", Members: []string{"a"}}},
		{"self not a member", bus.NATSTransportConfig{Group: "g", Self: "x", Members: []string{"a"}}},
		{"member twice", bus.NATSTransportConfig{Group: "g", Self: "a", Members: []string{"a", "a"}}},
		{"invalid member", bus.NATSTransportConfig{Group: "g", Self: "a", Members: []string{"a", "b>"}}},
		{"too many members", bus.NATSTransportConfig{Group: "g", Self: wireIDs(1)[0], Members: wireIDs(wire.WireMaxMembers + 1)}},
		{"negative inbox", bus.NATSTransportConfig{Group: "g", Self: "a", Members: []string{"a"}, InboxSize: -1}},
	} {
		if tr, err := bus.NewNATSTransport(nc, c.cfg); err == nil {
			tr.Close()
			t.Errorf("%s: accepted", c.name)
		}
	}
	if n := nc.NumSubscriptions(); n != 0 {
		t.Errorf("rejected configs left %d subscriptions", n)
	}
}

func TestNATSOptions(t *testing.T) {
	o := nats.GetDefaultOptions()
	for _, opt := range bus.NATSOptions("gw1") {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.Name != "gw1" || !o.NoEcho || o.ReconnectBufSize != -1 || o.MaxReconnect != -1 ||
		o.CustomReconnectDelayCB == nil || o.PingInterval != 2*time.Second || o.MaxPingsOut != 2 ||
		!o.RetryOnFailedConnect || o.Timeout != 2*time.Second {
		t.Errorf("NATSOptions set %+v", o)
	}
	// Reconnect delays grow exponentially, with jitter, and start over
	// after a successful connection (attempts back to 1).
	delay := o.CustomReconnectDelayCB
	first := delay(1)
	if first < 50*time.Millisecond || first > 150*time.Millisecond {
		t.Errorf("first reconnect delay %s, want 100ms ±50%%", first)
	}
	var last time.Duration
	for i := 2; i <= 12; i++ {
		last = delay(i)
	}
	if last < 2500*time.Millisecond || last > 7500*time.Millisecond {
		t.Errorf("reconnect delay after 12 attempts %s, want 5s ±50%%", last)
	}
	if again := delay(1); again > 150*time.Millisecond {
		t.Errorf("delay after a reset %s", again)
	}
}

func mustEncode(t testing.TB, group string, m election.Message) []byte {
	t.Helper()
	data, err := wire.Encode(group, m)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", m, err)
	}
	return data
}

// wireIDs returns n distinct member ids.
func wireIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%064d", i)
	}
	return ids
}
