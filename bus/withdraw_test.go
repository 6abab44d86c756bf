package bus

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// A WITHDRAW (protocol 2) is broadcast once every member of the group speaks
// protocol 2. While one of them may run a build of protocol 1, which would
// drop it as an unknown type, it goes instead as a direct message to each
// member that announced protocol 2, and to no other; the other messages are
// sent as before.
func TestWithdrawSentOnlyAtProtocol2(t *testing.T) {
	s := startPlainServer(t)
	connect := func() *nats.Conn { return connectPlain(t, s) }
	members := []string{"gw1", "gw2", "gw3"}
	proto := newProtocols("gw1", "test", members, time.Hour, func(agent.ProtocolView) {})
	tr, err := NewNATSTransport(connect(), NATSTransportConfig{Group: "g", Self: "gw1", Members: members,
		protocols: proto, SenderBurst: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	watcher := connect()
	got := make(chan *nats.Msg, 16)
	if _, err := watcher.ChanSubscribe(wire.BroadcastSubject(agent.DefaultSubjectPrefix, "g", "gw1"), got); err != nil {
		t.Fatal(err)
	}
	direct := make(chan *nats.Msg, 16)
	if _, err := watcher.ChanSubscribe(wire.DirectSubject(agent.DefaultSubjectPrefix, "g", "gw1", "*"), direct); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	withdraw := election.Message{Type: election.MsgWithdraw, From: "gw1", Term: 4}
	resign := election.Message{Type: election.MsgResign, From: "gw1", Term: 4}
	// next returns the type of the next message published, after a flush of
	// the sender's connection ("" when none was).
	next := func() string {
		t.Helper()
		if err := tr.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := watcher.Flush(); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			in, err := wire.DecodeInbound(m.Data, m.Subject, wire.DecodeContext{Prefix: agent.DefaultSubjectPrefix, Group: "g", Self: "gw2",
				Members: map[string]bool{"gw1": true, "gw2": true, "gw3": true}})
			if err != nil {
				t.Fatalf("decode %s: %v", m.Data, err)
			}
			return in.Msg.Type.String()
		default:
			return ""
		}
	}
	now := time.Now()
	proto.announced(wire.Announcement{From: "gw2", Min: 1, Max: 2}, now)
	// gw3 announced nothing: it may run protocol 1.
	for _, m := range []election.Message{withdraw, resign} {
		if err := tr.Send(m); err != nil {
			t.Fatalf("send %s: %v", m.Type, err)
		}
	}
	if a, b := next(), next(); a != "resign" || b != "" {
		t.Fatalf("site at protocol 1: broadcast %q then %q, want resign only", a, b)
	}
	var to []string
	for len(direct) > 0 {
		m := <-direct
		to = append(to, m.Subject[strings.LastIndex(m.Subject, ".")+1:])
	}
	if len(to) != 1 || to[0] != "gw2" {
		t.Fatalf("site at protocol 1: the withdraw went directly to %v, want [gw2] (gw3 may run protocol 1)", to)
	}
	proto.announced(wire.Announcement{From: "gw3", Min: 1, Max: 2}, now)
	if err := tr.Send(withdraw); err != nil {
		t.Fatal(err)
	}
	if a := next(); a != "withdraw" || len(direct) != 0 {
		t.Fatalf("site at protocol 2: broadcast %q and %d direct messages, want one withdraw broadcast", a, len(direct))
	}
}
