package agent

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// Bus is the agent's one door to the outside: it sends the core's messages
// and delivers every external input to the loop on one channel, in the
// order it learned of them. Package bus has the NATS bus (the only owner of
// the agent's NATS connections); WithTransport makes one of any Transport
// (the in-memory network of the tests).
//
// A bus fills in the wire-only fields of what the loop sends (the sender's
// algorithm, and on a leader's heartbeat the connection its members match
// disconnect reports with), so the loop hands the core's Ready over as it
// is.
type Bus interface {
	// Open starts the bus: from its return until Close, the agent's inputs
	// arrive on the channel, which Close closes. h is what the bus reports
	// to and asks of the agent.
	Open(h BusHooks) (<-chan Input, error)
	// Send stamps m and sends it to m.To, or to every other member when
	// m.To is "". It never buffers for later delivery: a message that
	// cannot go out now is lost, since a late election message is worse
	// than a lost one.
	Send(m election.Message) error
	// Connected reports whether the bus can reach the others now.
	Connected() bool
	// Up reports whether the connections the members may act on, for this
	// member as the leader of term, are up: a leader must not act while a
	// report that its connection closed may be on its way to the others.
	Up(term uint64) bool
	// FastPath reports whether the bus reports members' closed
	// connections or routes (the fast failover path), after which a
	// successor may act a fence after this member's connection closed.
	FastPath() bool
	// Flush waits, at most timeout, until what was sent has left.
	Flush(timeout time.Duration)
	// Close stops delivery and releases what Open set up (not the
	// connections the caller gave the bus).
	Close() error
}

// BusHooks is what a bus reports to, and asks of, the agent. Every func is
// set by the agent; none may block.
type BusHooks struct {
	// OnBad counts an inbound message dropped for reason (see Transport).
	OnBad func(reason string)
	// OnMessage counts a message received ("in") or sent ("out").
	OnMessage func(t election.MsgType, direction string)
	// OnControl counts a control request refused by the bus, with its
	// result (ControlUnsigned, ControlRateLimited, ...).
	OnControl func(verb, result string)
	// Status is the agent's status, for status requests: they are answered
	// from the agent's snapshot, off the loop, so that a stuck loop can be
	// seen.
	Status func() StatusReport
	// WatchFunc hands the leader changes the bus publishes to a function
	// (see Agent.WatchFunc).
	WatchFunc func(func(LeaderChange)) (wait func())
	// OnProtocol reports a change of the site's protocol version, or of
	// the members that hold it down or are refused (ProtocolReporter).
	OnProtocol func(ProtocolView)
	// Wake, when set, is called each time an input reaches the mailbox
	// (Mailbox.OnInput): the agent is driven by a host (Driven), which
	// takes its inputs when woken instead of waiting on the channel.
	Wake func()
}

// BusContext is what a bus is built from.
type BusContext struct {
	// Config is the agent's validated configuration.
	Config Config
	// Log is the agent's logger.
	Log *slog.Logger
	// Routes is the agent's embedded server (WithRouteWatch), or nil.
	Routes RouteWatcher
	// Fast tells whether the fast failover path is on: the bus then
	// reports members' closed connections and routes, and announces this
	// member's connection in its heartbeats.
	Fast bool
	// Version is the agent's build (WithVersion), which the bus announces
	// with its protocol range.
	Version string
}

// BusFactory builds the agent's bus once its configuration is validated.
type BusFactory func(BusContext) (Bus, error)

// WithBus makes the agent carry its election, its control requests and its
// failure reports over the bus f builds (package bus: bus.WithNATS).
func WithBus(f BusFactory) Option {
	return func(a *Agent) error {
		if f == nil {
			return errors.New("agent: WithBus: nil factory")
		}
		a.in.factory = f
		return nil
	}
}

// WithTransport carries the election over t instead of NATS (tests).
func WithTransport(t Transport) Option {
	return WithBus(func(c BusContext) (Bus, error) { return newTransportBus(t, c), nil })
}

// InputKind names what an Input carries.
type InputKind uint8

// The kinds of input.
const (
	// InputMessage: an election message (Msg), decoded and checked.
	InputMessage InputKind = iota + 1
	// InputMemberGone: the bus connection Conn of member Member closed (a
	// server advisory).
	InputMemberGone
	// InputRoutesClosed: routes of this agent's embedded server closed
	// (Closed), Routes are left.
	InputRoutesClosed
	// InputDisconnected: a connection of this agent's own dropped.
	InputDisconnected
	// InputControl: a resign or transfer request (Control) that passed the
	// bus's checks.
	InputControl
	// InputDuplicate: another process announced itself with this member's
	// id; Conn names that process (its instance, see Instance).
	InputDuplicate
)

// Input is one external input of the loop.
//
// Msg is a pointer so that a waiting input takes little room: a witness
// process keeps a mailbox per group served, and a slot holding a message by
// value was 304 bytes, most of them empty for every other kind.
type Input struct {
	Kind    InputKind
	Msg     *election.Message // InputMessage
	Member  string
	Conn    string
	Closed  []RoutedServer
	Routes  int
	Control *ControlInput
	// At is when the input reached the mailbox (Offer stamps it): the
	// loop applies an input as of its arrival, however late it runs.
	At time.Time
}

// RoutedServer is a server this agent's embedded server had a route to.
type RoutedServer struct {
	ID   string
	Name string // "" when the server's name is not known
}

// ControlInput is a handover request for the loop. The bus has checked its
// reply subject, size, signature (when the group signs) and rate.
type ControlInput struct {
	Verb   string // wire.VerbResign or wire.VerbTransfer
	Signer string // "member ID" or "operator NAME"; "" when the group does not sign
	Signed bool   // the group signs: the request must name this leadership
	Data   []byte
	// Reply answers the request (signed when the group signs). The loop
	// calls it at most once; it must not block.
	Reply func(payload []byte)
}

// Stamp fills in the wire-only fields of m, as every bus does before it
// sends: the sender's algorithm (receivers refuse a member of another one)
// and, on a heartbeat, the connection that announce (nil: none) names for
// its term. A heartbeat that names no connection says nothing of one
// (NoFence is about the connection named).
func Stamp(m election.Message, algorithm string, announce func(term uint64) string) election.Message {
	if m.Type == election.MsgHeartbeat && announce != nil {
		m.Conn = announce(m.Term)
	}
	if m.Conn == "" {
		m.NoFence = false
	}
	m.Algorithm = algorithm
	return m
}

// Mailbox is a bus's one path to the loop: a bounded channel of inputs,
// and a report of this agent's own disconnection that is never lost (it is
// coalesced: one pending report is enough). It is safe for concurrent use.
//
// A mailbox has no goroutine of its own: a disconnection report goes into
// the channel at once, and only when the channel is full does a goroutine
// wait to deliver it (a witness process keeps a mailbox per group served,
// and an idle goroutine each cost a thousand stacks at a thousand groups).
type Mailbox struct {
	mu     sync.RWMutex
	closed bool
	ch     chan Input
	done   chan struct{}
	fwd    sync.WaitGroup
	// waiting is set while a goroutine waits to deliver a disconnection
	// report: later reports are coalesced into it.
	waiting atomic.Bool
	wake    func() // OnInput
}

// NewMailbox returns a mailbox holding up to size inputs.
func NewMailbox(size int) *Mailbox {
	return &Mailbox{ch: make(chan Input, size), done: make(chan struct{})}
}

// OnInput makes the mailbox call wake (which must not block) after each
// input it queued. Call it before the mailbox is used; nil is none.
func (mb *Mailbox) OnInput(wake func()) { mb.wake = wake }

// woke tells the host, if any, that an input waits.
func (mb *Mailbox) woke() {
	if mb.wake != nil {
		mb.wake()
	}
}

// C is the loop's end of the mailbox; Close closes it.
func (mb *Mailbox) C() <-chan Input { return mb.ch }

// Offer queues in without blocking; it reports false when the mailbox is
// full or closed (the caller counts the drop).
func (mb *Mailbox) Offer(in Input) bool {
	mb.mu.RLock()
	defer mb.mu.RUnlock()
	if mb.closed {
		return false
	}
	if in.At.IsZero() {
		in.At = time.Now()
	}
	select {
	case mb.ch <- in:
		mb.woke()
		return true
	default:
		return false
	}
}

// Disconnected reports that a connection of this agent's dropped. It never
// blocks, and the report reaches the loop even when the mailbox is full.
// The report carries no arrival time: the loop applies it when it runs.
func (mb *Mailbox) Disconnected() {
	mb.mu.RLock()
	defer mb.mu.RUnlock()
	if mb.closed || mb.waiting.Load() {
		return // closed, or a report is already on its way
	}
	select {
	case mb.ch <- Input{Kind: InputDisconnected}:
		mb.woke()
		return
	default:
	}
	if !mb.waiting.CompareAndSwap(false, true) {
		return
	}
	// Added under the read lock: Close, which takes the write lock before
	// it waits for fwd, cannot miss it.
	mb.fwd.Add(1)
	go func() {
		defer mb.fwd.Done()
		defer mb.waiting.Store(false)
		select {
		case mb.ch <- Input{Kind: InputDisconnected}:
			mb.woke()
		case <-mb.done:
		}
	}()
}

// Close stops the mailbox and closes C. Later offers are refused.
func (mb *Mailbox) Close() {
	mb.mu.Lock()
	if mb.closed {
		mb.mu.Unlock()
		return
	}
	mb.closed = true
	mb.mu.Unlock()
	close(mb.done)
	mb.fwd.Wait()
	close(mb.ch)
	mb.woke() // a host sees the channel closed
}

// transportBus is the bus of a Transport: messages and (with a route
// watcher) route closures, no control requests. On a MemNetwork that
// reports disconnects it has the fast path of a NATS bus: heartbeats
// announce the connection, and the network's reports reach the loop.
type transportBus struct {
	t       Transport
	c       BusContext
	mb      *Mailbox
	mem     *MemTransport // t, when it reports connections
	stop    func()
	wg      sync.WaitGroup
	onBad   func(string)
	onClose sync.Once
	// announced is the connection the heartbeats of a term announced (mem
	// only): as on the NATS bus, a term keeps it, and Up is true only while
	// that very connection is up.
	announced atomic.Pointer[memAnnouncement]
}

type memAnnouncement struct {
	term uint64
	conn string
}

func newTransportBus(t Transport, c BusContext) *transportBus {
	b := &transportBus{t: t, c: c}
	if mt, ok := t.(*MemTransport); ok {
		mt.setTick(c.Config.Tick())
		if c.Fast && mt.reportTo(nil) {
			b.mem = mt
		}
	}
	return b
}

func (b *transportBus) Open(h BusHooks) (<-chan Input, error) {
	if b.t == nil {
		return nil, errors.New("agent: no transport")
	}
	b.mb = NewMailbox(MemInboxSize)
	b.mb.OnInput(h.Wake)
	b.onBad = h.OnBad
	if b.mem != nil {
		b.mem.reportTo(b.mb)
	}
	b.stop = func() {}
	if b.c.Fast && b.c.Routes != nil {
		b.stop = WatchRoutes(b.c.Routes, b.c.Config.Heartbeat, b.mb, h.OnBad)
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for m := range b.t.Inbox() {
			if !b.mb.Offer(Input{Kind: InputMessage, Msg: &m}) && b.onBad != nil {
				b.onBad("inbox_full")
			}
		}
	}()
	return b.mb.C(), nil
}

func (b *transportBus) Send(m election.Message) error {
	var announce func(uint64) string
	if b.mem != nil {
		announce = b.announce
	}
	return b.t.Send(Stamp(m, b.c.Config.Algorithm, announce))
}

func (b *transportBus) announce(term uint64) string {
	if p := b.announced.Load(); p != nil && p.term == term {
		return p.conn
	}
	id := b.mem.ConnID()
	if id == "" {
		b.announced.Store(nil)
		return ""
	}
	b.announced.Store(&memAnnouncement{term: term, conn: id})
	return id
}

func (b *transportBus) Connected() bool { return b.t.Connected() }

func (b *transportBus) Up(term uint64) bool {
	if b.mem == nil {
		return true
	}
	if p := b.announced.Load(); p != nil && p.term == term {
		return b.mem.ConnID() == p.conn
	}
	return b.mem.Connected()
}

func (b *transportBus) FastPath() bool      { return b.c.Fast && (b.c.Routes != nil || b.mem != nil) }
func (b *transportBus) Flush(time.Duration) {}

func (b *transportBus) Close() error {
	var err error
	b.onClose.Do(func() {
		if b.stop != nil {
			b.stop()
		}
		err = b.t.Close()
		b.wg.Wait()
		if b.mb != nil {
			b.mb.Close()
		}
	})
	return err
}

// noBus is the bus of an agent built without one: it can be queried, but
// Run fails at once.
type noBus struct{}

func (noBus) Open(BusHooks) (<-chan Input, error) {
	return nil, errors.New("agent: no bus: use bus.WithNATS or WithTransport")
}
func (noBus) Send(election.Message) error { return errors.New("agent: no bus") }
func (noBus) Connected() bool             { return false }
func (noBus) Up(uint64) bool              { return false }
func (noBus) FastPath() bool              { return false }
func (noBus) Flush(time.Duration)         {}
func (noBus) Close() error                { return nil }
