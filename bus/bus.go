package bus

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
	"github.com/edge-agent/edge-agent/election"
)

// Bus is the NATS bus of one agent (agent.Bus): the only owner of its NATS
// connections. It carries the election over the election connection,
// answers and forwards control requests on it, publishes leader changes,
// and reports to the agent's loop, on one path (agent.Mailbox), every input
// it learns of: election messages, members' closed connections (the
// server's disconnect advisories, on the system-account connection),
// closed routes of the agent's embedded server, and drops of the agent's
// own connections. The caller keeps owning the connections: Close does not
// close them.
type Bus struct {
	c      agent.BusContext
	nc     *nats.Conn    // election and control traffic
	sys    *nats.Conn    // the server's system account: disconnect advisories
	pres   presence      // the presence connection (Presence)
	signer *sign.Signing // with signing_seed: signs election and control messages

	mu    sync.Mutex // guards t, mb, undo, closed, proto
	t     *NATSTransport
	proto *protocols
	mb    *agent.Mailbox
	undo  undoStack

	inbox  int     // the mailbox's capacity (InboxSize)
	shared *Shared // SharedConn: the connection is shared, and watched by it

	closed bool
}

var _ agent.Bus = (*Bus)(nil)

// Option configures a Bus.
type Option func(*Bus) error

// WithNATS makes the agent's bus a NATS bus over nc, the agent's election
// connection (see NATSOptions), with opts.
func WithNATS(nc *nats.Conn, opts ...Option) agent.Option {
	return agent.WithBus(func(c agent.BusContext) (agent.Bus, error) { return New(nc, c, opts...) })
}

// InboxSize sets how many inputs wait for the agent's loop before more are
// dropped and counted (inbox_full); DefaultInboxSize without it. A witness
// process serving many groups (package witness) gives each a small one: a
// witness receives a few messages per heartbeat period.
func InboxSize(n int) Option {
	return func(b *Bus) error {
		if n < 1 {
			return fmt.Errorf("bus: inbox size %d: at least 1", n)
		}
		b.inbox = n
		return nil
	}
}

// Shared watches a connection that many buses use (a witness process
// serving many groups, package witness): it logs the connection's drops,
// reconnections and asynchronous errors once, and reports a drop to the
// loop of every bus open on it. Build it before the buses (NewShared), give
// it to each (SharedConn).
type Shared struct {
	mu  sync.Mutex
	mbs map[*agent.Mailbox]struct{}

	// The buses' announcement and control subscriptions, each kind on one
	// goroutine for every bus (dispatcher).
	disp [dispatchKinds]*dispatcher
}

// NewShared takes over nc's disconnect, reconnect and error handlers, and
// logs to log.
func NewShared(nc *nats.Conn, log *slog.Logger) *Shared {
	s := &Shared{mbs: map[*agent.Mailbox]struct{}{}}
	for k := range s.disp {
		s.disp[k] = newDispatcher()
	}
	nc.SetDisconnectErrHandler(func(_ *nats.Conn, err error) {
		s.mu.Lock()
		n := len(s.mbs)
		for mb := range s.mbs {
			mb.Disconnected()
		}
		s.mu.Unlock()
		log.Warn("NATS disconnected", "err", err, "groups", n)
	})
	nc.SetReconnectHandler(func(c *nats.Conn) {
		log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted())
	})
	nc.SetErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if sub != nil {
			log.Warn("NATS error", "subject", sub.Subject, "err", err)
		} else {
			log.Warn("NATS error", "err", err)
		}
	})
	return s
}

func (s *Shared) add(mb *agent.Mailbox) func() {
	s.mu.Lock()
	s.mbs[mb] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.mbs, mb)
		s.mu.Unlock()
	}
}

// subscribe subscribes handle to subj on the bus's election connection and
// returns the undo. On a shared connection a dispatcher of kind runs the
// handler: one goroutine for the buses' subscriptions of that kind, where one
// each would park six thousand goroutines in a witness process serving a
// thousand groups; onDrop counts a message dropped there because the
// subscription's share of it was full (see dispatchShare). Without a shared
// connection the client's pending limits apply, and drops are reported as
// slow consumers.
func (b *Bus) subscribe(kind dispatchKind, subj string, handle nats.MsgHandler, onDrop func()) (*nats.Subscription, func(), error) {
	if d := b.dispatcher(kind); d != nil {
		return d.subscribe(b.nc, subj, handle, onDrop)
	}
	sub, err := b.nc.Subscribe(subj, handle)
	if err != nil {
		return nil, nil, err
	}
	return sub, func() { _ = sub.Unsubscribe() }, nil
}

// SharedConn makes the bus one of many on a connection that s watches:
// the bus sets no handler of the connection's own.
func SharedConn(s *Shared) Option {
	return func(b *Bus) error { b.shared = s; return nil }
}

// New builds the NATS bus of the agent c describes over nc. With signing
// configured it checks the keys and draws this run's epoch (NextEpoch).
func New(nc *nats.Conn, c agent.BusContext, opts ...Option) (*Bus, error) {
	if nc == nil {
		return nil, errors.New("bus: nil connection")
	}
	if c.Log == nil {
		return nil, errors.New("bus: no logger")
	}
	b := &Bus{c: c, nc: nc, inbox: DefaultInboxSize}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	if err := b.signing(); err != nil {
		return nil, err
	}
	return b, nil
}

// signing builds the bus's signer when the config asks for one, with a new
// epoch for this run.
func (b *Bus) signing() error {
	cfg := b.c.Config
	if cfg.SigningSeedFile == "" {
		return nil
	}
	if err := CheckSigning(cfg); err != nil {
		return fmt.Errorf("agent: config: %w", err)
	}
	seed, err := os.ReadFile(cfg.SigningSeedFile)
	if err != nil {
		return fmt.Errorf("bus: signing_seed: %w", err)
	}
	epoch, err := agent.NextEpoch(cfg.StateDir)
	if err != nil {
		return err
	}
	s, err := sign.NewSigning(cfg.ID, bytes.TrimSpace(seed), cfg.MemberKeys, epoch)
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	b.c.Log.Info("signing election messages", "epoch", fmt.Sprintf("%016x", epoch), "members", len(cfg.MemberKeys))
	b.signer = s
	return nil
}

// Open implements agent.Bus: it subscribes to the election and control
// subjects, and, with the fast path on, watches the presence connection,
// the disconnect advisories and the routes.
func (b *Bus) Open(h agent.BusHooks) (ch <-chan agent.Input, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mb != nil || b.closed {
		return nil, errors.New("bus: opened twice")
	}
	mb := agent.NewMailbox(b.inbox)
	mb.OnInput(h.Wake)
	var u undoStack
	defer func() {
		if err != nil {
			u.run()
			mb.Close()
		}
	}()
	interval := announceInterval(b.c.Config.Heartbeat)
	ids := make([]string, len(b.c.Config.Members))
	for i, m := range b.c.Config.Members {
		ids[i] = m.ID
	}
	proto := newProtocols(b.c.Config.ID, b.c.Version, ids, interval, h.OnProtocol)
	t, err := b.transport(h, mb, proto)
	if err != nil {
		return nil, err
	}
	u.push(func() { _ = t.Close() })
	stopAnnounce, err := b.announce(t, proto, interval)
	if err != nil {
		return nil, err
	}
	u.push(stopAnnounce)
	stop, err := b.serveControl(h, mb)
	if err != nil {
		return nil, err
	}
	u.push(stop)
	u.push(b.watchConnection(mb))
	if b.c.Fast {
		u.push(b.watchPresence(mb))
		if b.sys != nil {
			stop, err := b.subscribeAdvisories(h, mb)
			if err != nil {
				return nil, err
			}
			u.push(stop)
		}
		if b.c.Routes != nil {
			u.push(agent.WatchRoutes(b.c.Routes, b.c.Config.Heartbeat, mb, h.OnBad))
		}
	}
	b.t, b.mb, b.undo, b.proto = t, mb, u, proto
	return mb.C(), nil
}

// transport builds the election transport, delivering to mb.
func (b *Bus) transport(h agent.BusHooks, mb *agent.Mailbox, proto *protocols) (*NATSTransport, error) {
	cfg := b.c.Config
	members := make([]string, len(cfg.Members))
	for i, m := range cfg.Members {
		members[i] = m.ID
	}
	return NewNATSTransport(b.nc, NATSTransportConfig{
		Prefix: cfg.SubjectPrefix, Group: cfg.Group, Self: cfg.ID, Members: members,
		Hooks:     agent.Hooks{OnBad: h.OnBad, OnMessage: h.OnMessage},
		Signing:   b.signer,
		Heartbeat: cfg.Heartbeat,
		InboxSize: b.inbox,
		protocols: proto,
		Deliver: func(m election.Message) bool {
			return mb.Offer(agent.Input{Kind: agent.InputMessage, Msg: &m})
		},
		Instance: agent.Instance(),
		OnDuplicate: func(inst string) {
			mb.Offer(agent.Input{Kind: agent.InputDuplicate, Conn: inst})
		},
		dispatch: b.dispatcher(dispatchElection),
	})
}

// dispatcher returns the shared connection's dispatcher of kind, or nil
// when the connection is the bus's own.
func (b *Bus) dispatcher(kind dispatchKind) *dispatcher {
	if b.shared == nil {
		return nil
	}
	return b.shared.disp[kind]
}

// Send implements agent.Bus.
func (b *Bus) Send(m election.Message) error {
	b.mu.Lock()
	t := b.t
	b.mu.Unlock()
	if t == nil {
		return errors.New("bus: send: not open")
	}
	return t.Send(b.stamp(m))
}

// stamp fills in m's wire-only fields (agent.Stamp). A heartbeat over a
// websocket says no NoFence: nats.go sends a websocket's close frame, which
// the server reads as the client's close, before it marks the connection
// closed, so IsLeader may still say yes when the server reports it.
func (b *Bus) stamp(m election.Message) election.Message {
	var announce func(uint64) string
	if b.c.Fast {
		announce = b.announceConn
	}
	m = agent.Stamp(m, b.c.Config.Algorithm, announce)
	if m.NoFence && b.announcedOverWebsocket(m.Term) {
		m.NoFence = false
	}
	return m
}

// Connected implements agent.Bus: the election connection is up (and the
// bus open).
func (b *Bus) Connected() bool {
	b.mu.Lock()
	t := b.t
	b.mu.Unlock()
	return t != nil && t.Connected()
}

// FastPath implements agent.Bus.
func (b *Bus) FastPath() bool { return b.c.Fast }

// Flush implements agent.Bus.
func (b *Bus) Flush(timeout time.Duration) { _ = b.nc.FlushTimeout(timeout) }

// Close implements agent.Bus: it undoes Open, in reverse order, and closes
// the mailbox.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	u, mb := b.undo, b.mb
	b.mu.Unlock()
	u.run()
	if mb != nil {
		mb.Close()
	}
	return nil
}

// undoStack collects what Open must undo, in reverse order.
type undoStack []func()

func (u *undoStack) push(f func()) { *u = append(*u, f) }

func (u undoStack) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// watchConnection makes a drop of the election connection reach the loop,
// and logs its reconnections and asynchronous errors. It returns the undo.
func (b *Bus) watchConnection(mb *agent.Mailbox) func() {
	log := b.c.Log
	if b.shared != nil {
		return b.shared.add(mb)
	}
	prevDisc, prevRecon := b.nc.DisconnectErrHandler(), b.nc.ReconnectHandler()
	b.nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		mb.Disconnected()
		log.Warn("NATS disconnected", "err", err)
		if prevDisc != nil {
			prevDisc(c, err)
		}
	})
	b.nc.SetReconnectHandler(func(c *nats.Conn) {
		log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted())
		if prevRecon != nil {
			prevRecon(c)
		}
	})
	// Asynchronous errors (a permissions violation, a slow consumer) go to
	// the log, not to stderr line by line as nats.go would: others can
	// provoke them at will, and the log handler can rate-limit them
	// (edge.LimitedHandler does in the binary).
	prevErr := b.nc.ErrorHandler()
	b.nc.SetErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if sub != nil {
			log.Warn("NATS error", "subject", sub.Subject, "err", err)
		} else {
			log.Warn("NATS error", "err", err)
		}
	})
	return func() {
		b.nc.SetErrorHandler(prevErr)
		b.nc.SetReconnectHandler(prevRecon)
		b.nc.SetDisconnectErrHandler(prevDisc)
	}
}
