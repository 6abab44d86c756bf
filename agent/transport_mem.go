package agent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/election"
)

// MemInboxSize is the inbox capacity of a MemTransport.
const MemInboxSize = 1024

// The subject prefix and group under which MemTransport checks messages.
const (
	memPrefix = "mem"
	memGroup  = "mem"
)

// memTick is the tick of a member whose agent did not say its own (a
// transport used without an agent): a promise (election.Message.Promise)
// is then sent and read in milliseconds.
const memTick = time.Millisecond

// MemNetwork is an in-memory bus for tests: members Join it and get a
// Transport, and the test cuts and heals links between them. Delivery is
// synchronous: when Send returns, the message is in every reachable
// receiver's inbox, or dropped if that inbox was full. Each receiver gets its
// own copy of the message. It is safe for concurrent use.
//
// Send checks a message as the NATS transport would (wire.Encode, then wire.Decode as
// the receiver), except for membership, which the network does not know, so
// that a message the NATS transport would refuse is refused here too.
type MemNetwork struct {
	mu       sync.Mutex
	nodes    map[string]*MemTransport
	cut      map[memLink]bool
	isolated map[string]bool
	down     map[string]bool
	dropped  int
	reports  bool           // ReportDisconnects
	conns    map[string]int // member -> its connection's number, counted up at each reconnection
	// heardAtClose is, for each member whose transport closed, the highest
	// term of another member's heartbeat delivered to it before it closed.
	heardAtClose map[string]uint64
}

type memLink struct{ from, to string }

// NewMemNetwork returns an empty network with every link up.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{
		nodes:    make(map[string]*MemTransport),
		cut:      make(map[memLink]bool),
		isolated: make(map[string]bool),
		down:     make(map[string]bool),
		conns:    make(map[string]int),

		heardAtClose: make(map[string]uint64),
	}
}

// ReportDisconnects makes the network act as a NATS server with the fast
// path does: a member's connection has an identity (ConnID) that its
// heartbeats announce, and Disconnect tells the member its connection
// dropped and tells every other member, as the server's advisory would,
// that this connection closed. Without it the network reports nothing and
// failures are found by missed heartbeats alone.
func (n *MemNetwork) ReportDisconnects() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reports = true
}

// Join attaches member id to the network and returns its transport. Joining
// an id that is already attached closes the old transport first, as a
// restart of that member would.
func (n *MemNetwork) Join(id string) *MemTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.nodes[id]; old != nil {
		old.closeLocked()
	}
	t := &MemTransport{net: n, id: id, inbox: make(chan election.Message, MemInboxSize)}
	t.tick.Store(int64(memTick))
	n.nodes[id] = t
	n.conns[id]++ // a new connection
	return t
}

// Cut drops every message between a and b, both ways, until Heal.
func (n *MemNetwork) Cut(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[memLink{a, b}] = true
	n.cut[memLink{b, a}] = true
}

// CutOneWay drops every message from from to to until Heal; the other
// direction still works.
func (n *MemNetwork) CutOneWay(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[memLink{from, to}] = true
}

// Isolate cuts id off from every other member, both ways, until Heal. Its
// transport still reports Connected: the bus is up, its peers are not
// reachable (a partition, not a disconnection).
func (n *MemNetwork) Isolate(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[id] = true
}

// Disconnect takes id's transport off the bus until Heal: it reports
// Connected false, its Sends fail, and nothing reaches it, as with a NATS
// connection that is down and has no reconnect buffer.
//
// With ReportDisconnects, id's bus learns at once that its connection
// dropped, and every other member's bus that id's connection closed.
func (n *MemNetwork) Disconnect(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down[id] {
		return
	}
	n.down[id] = true
	if !n.reports {
		return
	}
	conn := n.connIDLocked(id)
	for other, t := range n.nodes {
		if t.reports == nil {
			continue
		}
		if other == id {
			t.reports.Disconnected()
		} else {
			t.reports.Offer(Input{Kind: InputMemberGone, Member: id, Conn: conn})
		}
	}
}

// Heal restores every link cut by Cut, CutOneWay, Isolate and Disconnect;
// a member that was disconnected comes back on a new connection.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
	clear(n.isolated)
	for id := range n.down {
		n.conns[id]++
	}
	clear(n.down)
}

// connIDLocked names member id's current connection, as a NATS server's
// id and client id name one.
func (n *MemNetwork) connIDLocked(id string) string {
	return fmt.Sprintf("mem/%s.%d", id, n.conns[id])
}

// Dropped returns how many deliveries were lost to a full inbox so far.
func (n *MemNetwork) Dropped() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped
}

// reachable reports whether a message from from can reach to now.
func (n *MemNetwork) reachable(from, to string) bool {
	return !n.cut[memLink{from, to}] && !n.isolated[from] && !n.isolated[to] && !n.down[from] && !n.down[to]
}

// MemTransport is one member's Transport on a MemNetwork.
type MemTransport struct {
	net     *MemNetwork
	id      string
	inbox   chan election.Message
	closed  bool     // guarded by net.mu
	reports *Mailbox // with ReportDisconnects: the bus's mailbox (guarded by net.mu)
	heard   uint64   // the highest term of another member's heartbeat delivered (guarded by net.mu)
	// tick is the member's election tick, in which it sends and reads
	// promises (memTick until its agent sets it).
	tick atomic.Int64
}

var _ Transport = (*MemTransport)(nil)

// ID returns the member id the transport was joined as.
func (t *MemTransport) ID() string { return t.id }

// Send delivers m to m.To, or to every other joined member when m.To is "",
// over the links that are up. A message to a member that is not joined, or
// behind a cut link, is lost without error, as on a real bus. m.From must be
// the transport's id. Send fails when the transport is closed or
// disconnected, or when m would be dropped by a receiver for its form.
func (t *MemTransport) Send(m election.Message) error {
	if m.From != t.id {
		return fmt.Errorf("agent: send: from %q is not this member %q", m.From, t.id)
	}
	// Every member of the in-memory network runs this build.
	data, err := wire.EncodeTimed(memGroup, time.Duration(t.tick.Load()), m, 0, 0, wire.ProtocolMax)
	if err != nil {
		return fmt.Errorf("agent: send: %w", err)
	}
	subj := wire.BroadcastSubject(memPrefix, memGroup, m.From)
	if m.To != "" {
		subj = wire.DirectSubject(memPrefix, memGroup, m.From, m.To)
	}
	// Decoding gives a copy that shares nothing with m; its promise in
	// milliseconds, which each receiver reads in its own ticks.
	cp, err := wire.Decode(data, subj, wire.DecodeContext{Prefix: memPrefix, Group: memGroup, Self: m.To, Members: memMembers(m), Tick: time.Millisecond})
	if err != nil {
		return fmt.Errorf("agent: send: %w", err)
	}

	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.closed {
		return errors.New("agent: send: transport closed")
	}
	if n.down[t.id] {
		return errors.New("agent: send: not connected")
	}
	if m.To != "" {
		n.deliverLocked(t.id, n.nodes[m.To], cp)
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(n.nodes)) {
		if id != t.id {
			n.deliverLocked(t.id, n.nodes[id], cloneMessage(cp))
		}
	}
	return nil
}

func (n *MemNetwork) deliverLocked(from string, to *MemTransport, m election.Message) {
	if to == nil || to.closed || !n.reachable(from, to.id) {
		return
	}
	if m.Promise > 0 {
		// Milliseconds, read in the receiver's ticks as wire.Decode does.
		m.Promise = max(1, int(time.Duration(m.Promise)*time.Millisecond/time.Duration(to.tick.Load())))
	}
	select {
	case to.inbox <- m:
		if m.Type == election.MsgHeartbeat {
			to.heard = max(to.heard, m.Term)
		}
	default:
		n.dropped++
	}
}

// heardBeforeClose returns the highest term of another member's heartbeat that
// reached id's transport before it closed (ok false: it has not closed).
func (n *MemNetwork) heardBeforeClose(id string) (term uint64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	term, ok = n.heardAtClose[id]
	return term, ok
}

// setTick makes tick the member's election tick, in which it sends and
// reads promises (its agent's Config.Tick, set by the agent's bus).
func (t *MemTransport) setTick(tick time.Duration) {
	if tick > 0 {
		t.tick.Store(int64(tick))
	}
}

// ConnID names the transport's connection while it is up, with
// ReportDisconnects ("" otherwise): a leader's heartbeats announce it.
func (t *MemTransport) ConnID() string {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if !t.net.reports || t.closed || t.net.down[t.id] {
		return ""
	}
	return t.net.connIDLocked(t.id)
}

// reportTo makes the network's reports about connections reach mb; it
// reports whether the network makes any (ReportDisconnects).
func (t *MemTransport) reportTo(mb *Mailbox) bool {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	t.reports = mb
	return t.net.reports
}

// Inbox returns the delivered messages; it is closed by Close.
func (t *MemTransport) Inbox() <-chan election.Message { return t.inbox }

// Connected reports whether the transport is open and not disconnected.
func (t *MemTransport) Connected() bool {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	return !t.closed && !t.net.down[t.id]
}

// Close detaches the transport from the network and closes Inbox. It is
// idempotent and always returns nil.
func (t *MemTransport) Close() error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	t.closeLocked()
	return nil
}

func (t *MemTransport) closeLocked() {
	if t.closed {
		return
	}
	t.closed = true
	t.net.heardAtClose[t.id] = t.heard
	close(t.inbox)
	if t.net.nodes[t.id] == t {
		delete(t.net.nodes, t.id)
	}
}

// memMembers is every id m names: the network checks messages for their form
// but has no member list to check them against.
func memMembers(m election.Message) map[string]bool {
	ids := map[string]bool{m.From: true, m.To: true, m.Nominee: true, m.Initiator: true}
	for _, id := range m.Alive {
		ids[id] = true
	}
	for _, id := range m.Participants {
		ids[id] = true
	}
	delete(ids, "")
	return ids
}

func cloneMessage(m election.Message) election.Message {
	m.Alive = slices.Clone(m.Alive)
	m.Participants = slices.Clone(m.Participants)
	return m
}
