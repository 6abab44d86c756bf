package agent

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/election"
)

// DefaultInboxSize is the inbox capacity of a NATSTransport when
// NATSTransportConfig.InboxSize is 0.
const DefaultInboxSize = 1024

// NATSOptions returns the connection options an election client should use,
// named name. Election traffic must never be delivered late, so the
// connection keeps no reconnect buffer (a publish while disconnected fails at
// once); it reconnects forever with a short jittered wait, and pings every 2s
// so that a dead server is noticed within about 6s. NoEcho keeps a member's
// own broadcasts off its connection.
func NATSOptions(name string) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		nats.NoEcho(),
		nats.ReconnectBufSize(-1),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay()),
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.RetryOnFailedConnect(true),
		nats.Timeout(2 * time.Second),
	}
}

// reconnectDelay spaces reconnection attempts with an exponential, jittered
// backoff (100ms doubling to 5s, ±50%), starting over after each successful
// connection: a gateway whose server restarts is back within a fraction of a
// second, while a fleet of gateways facing a dead server does not hammer it
// in step.
func reconnectDelay() func(attempts int) time.Duration {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
	var mu sync.Mutex
	return func(attempts int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if attempts <= 1 {
			b.Reset()
		}
		return b.NextBackOff()
	}
}

// NATSTransportConfig describes the member a NATSTransport carries messages
// for.
type NATSTransportConfig struct {
	// Prefix is the subject prefix (DefaultSubjectPrefix when empty).
	Prefix string
	// Group is the election's name.
	Group string
	// Self is this member's id; it must be one of Members.
	Self string
	// Members are the ids of the group, at most WireMaxMembers.
	Members []string
	// Hooks report traffic and drops.
	Hooks Hooks
	// InboxSize is the capacity of the inbox (DefaultInboxSize when 0).
	InboxSize int
	// Signing, when set, signs every outgoing message and accepts only
	// messages signed by their sender's pinned key, never replayed.
	Signing *Signing
}

// NATSTransport is a Transport over a NATS connection. It subscribes to the
// group's broadcasts and to the messages addressed to Self, and checks every
// inbound message with Decode before it reaches Inbox. Both subscriptions
// feed one queue drained by one goroutine, so messages reach Inbox in the
// order the connection received them, across both subjects.
//
// It is safe for concurrent use. Hooks are called from its goroutine (for
// inbound traffic) and from Send's caller; they must not block and must not
// call Close.
type NATSTransport struct {
	nc      *nats.Conn
	prefix  string
	group   string
	self    string
	members map[string]bool
	hooks   Hooks
	signing *Signing

	raw   chan *nats.Msg
	subs  []*nats.Subscription
	inbox chan election.Message

	// dropped is how many raw messages the subscriptions had dropped, as last
	// reported to Hooks.OnBad; only the receive goroutine uses it.
	dropped int

	mu     sync.Mutex // guards closed
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

var _ Transport = (*NATSTransport)(nil)

// NewNATSTransport subscribes to c.Group's election subjects on nc and starts
// delivering to Inbox. The caller keeps ownership of nc: Close does not close
// it. If nc is connected, the subscriptions are flushed to the server before
// NewNATSTransport returns, so that a message published after it returns is
// received.
func NewNATSTransport(nc *nats.Conn, c NATSTransportConfig) (*NATSTransport, error) {
	if nc == nil {
		return nil, errors.New("agent: nats transport: nil connection")
	}
	if c.Prefix == "" {
		c.Prefix = DefaultSubjectPrefix
	}
	for _, tok := range strings.Split(c.Prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return nil, fmt.Errorf("agent: nats transport: %q is not a valid subject prefix", c.Prefix)
		}
	}
	if !election.ValidID(c.Group) {
		return nil, fmt.Errorf("agent: nats transport: %q is not a valid group name", c.Group)
	}
	if len(c.Members) > WireMaxMembers {
		return nil, fmt.Errorf("agent: nats transport: %d members, the wire format carries at most %d", len(c.Members), WireMaxMembers)
	}
	members := make(map[string]bool, len(c.Members))
	for _, id := range c.Members {
		if !election.ValidID(id) {
			return nil, fmt.Errorf("agent: nats transport: member %q is not a valid id", id)
		}
		if members[id] {
			return nil, fmt.Errorf("agent: nats transport: member %q listed twice", id)
		}
		members[id] = true
	}
	if !members[c.Self] {
		return nil, fmt.Errorf("agent: nats transport: self %q is not a member", c.Self)
	}
	if c.InboxSize == 0 {
		c.InboxSize = DefaultInboxSize
	}
	if c.InboxSize < 0 {
		return nil, fmt.Errorf("agent: nats transport: negative inbox size %d", c.InboxSize)
	}

	t := &NATSTransport{
		nc:      nc,
		prefix:  c.Prefix,
		group:   c.Group,
		self:    c.Self,
		members: members,
		hooks:   c.Hooks,
		signing: c.Signing,
		// The raw queue absorbs bursts (a flood of garbage must not crowd
		// out heartbeats); it holds only pointers until drained.
		raw:   make(chan *nats.Msg, max(16*c.InboxSize, 16384)),
		inbox: make(chan election.Message, c.InboxSize),
		done:  make(chan struct{}),
	}
	for _, subj := range []string{BroadcastWildcard(t.prefix, t.group), DirectWildcard(t.prefix, t.group, t.self)} {
		sub, err := nc.ChanSubscribe(subj, t.raw)
		if err != nil {
			t.unsubscribe()
			return nil, fmt.Errorf("agent: nats transport: subscribe %s: %w", subj, err)
		}
		t.subs = append(t.subs, sub)
	}
	if nc.IsConnected() {
		// Best effort: on failure the subscriptions still reach the server
		// with the next reconnect.
		_ = nc.FlushTimeout(2 * time.Second)
	}
	t.wg.Add(1)
	go t.receive()
	return t, nil
}

// Send publishes m on its broadcast or direct subject. m.From must be Self. It
// checks m as a receiver would and refuses what receivers would drop. A
// publish while the connection is down fails (there is no reconnect buffer).
// Errors are prefixed "agent: send:" and wrap the cause.
func (t *NATSTransport) Send(m election.Message) error {
	if t.isClosed() {
		return errors.New("agent: send: transport closed")
	}
	if m.From != t.self {
		return fmt.Errorf("agent: send: from %q is not this member %q", m.From, t.self)
	}
	var ep, n uint64
	if t.signing != nil {
		ep, n = t.signing.next()
	}
	data, err := EncodeNumbered(t.group, m, ep, n)
	if err != nil {
		return fmt.Errorf("agent: send: %w", err)
	}
	subj := BroadcastSubject(t.prefix, t.group, m.From)
	receiver := t.self
	if m.To != "" {
		subj = DirectSubject(t.prefix, t.group, m.From, m.To)
		receiver = m.To
	}
	// What the receiver will check and Encode cannot: membership.
	if _, err := Decode(data, subj, DecodeContext{Prefix: t.prefix, Group: t.group, Self: receiver, Members: t.members}); err != nil {
		return fmt.Errorf("agent: send: %w", err)
	}
	out := &nats.Msg{Subject: subj, Data: data}
	if t.signing != nil {
		sig, err := t.signing.sign(subj, data)
		if err != nil {
			return fmt.Errorf("agent: send: sign: %w", err)
		}
		out.Header = nats.Header{SignatureHeader: []string{sig}}
	}
	if err := t.nc.PublishMsg(out); err != nil {
		return fmt.Errorf("agent: send: %s to %s: %w", m.Type, subj, err)
	}
	if f := t.hooks.OnMessage; f != nil {
		f(m.Type, "out")
	}
	return nil
}

// Inbox returns the accepted inbound messages; it is closed by Close.
func (t *NATSTransport) Inbox() <-chan election.Message { return t.inbox }

// Connected reports whether the NATS connection is up and the transport open.
func (t *NATSTransport) Connected() bool {
	return !t.isClosed() && t.nc.IsConnected()
}

// Close unsubscribes, waits for the receive goroutine to finish and closes
// Inbox. It does not close the NATS connection. It is idempotent; only the
// first call can return an error (from unsubscribing).
func (t *NATSTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()

	err := t.unsubscribe()
	close(t.done)
	t.wg.Wait()
	close(t.inbox)
	return err
}

func (t *NATSTransport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// unsubscribe drops the subscriptions. A connection that is already closed
// has dropped them itself, which is not an error.
func (t *NATSTransport) unsubscribe() error {
	var errs []error
	for _, sub := range t.subs {
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent: nats transport: unsubscribe: %w", err)
	}
	return nil
}

// receive is the transport's goroutine: it decodes raw messages in arrival
// order and moves the accepted ones to Inbox.
func (t *NATSTransport) receive() {
	defer t.wg.Done()
	for {
		select {
		case <-t.done:
			return
		case msg := <-t.raw:
			t.handle(msg)
			t.reportDropped()
		}
	}
}

func (t *NATSTransport) handle(msg *nats.Msg) {
	if t.signing != nil {
		// Check the signature before parsing anything: unsigned or forged
		// traffic costs a header lookup or one ed25519 verification.
		sig := ""
		if msg.Header != nil {
			sig = msg.Header.Get(SignatureHeader)
		}
		from, _, ok := subjectParties(msg.Subject, t.prefix, t.group)
		if !ok {
			t.bad(ReasonSubjectMismatch)
			return
		}
		if reason := t.signing.verify(from, msg.Subject, msg.Data, sig); reason != "" {
			t.bad(reason)
			return
		}
	}
	m, ep, n, err := DecodeNumbered(msg.Data, msg.Subject, DecodeContext{Prefix: t.prefix, Group: t.group, Self: t.self, Members: t.members})
	if err != nil {
		reason := ReasonMalformed
		var be *BadMessageError
		if errors.As(err, &be) {
			reason = be.Reason
		}
		t.bad(reason)
		return
	}
	if m.From == t.self {
		// Our own broadcast, echoed by a connection without NoEcho.
		return
	}
	if t.signing != nil {
		// The signature is the subject's sender's, and Decode checked that
		// the payload's sender is the subject's.
		if reason := t.signing.fresh(m.From, ep, n); reason != "" {
			t.bad(reason)
			return
		}
	}
	select {
	case t.inbox <- m:
		if f := t.hooks.OnMessage; f != nil {
			f(m.Type, "in")
		}
	default:
		t.bad(ReasonInboxFull)
	}
}

// reportDropped reports, as inbox_full, the messages the NATS client dropped
// because the raw queue was full (a slow consumer). A drop happens only
// while the queue is full, so the messages still queued are handled after
// it, and the drop is reported then.
func (t *NATSTransport) reportDropped() {
	total := 0
	for _, sub := range t.subs {
		if n, err := sub.Dropped(); err == nil {
			total += n
		}
	}
	for ; t.dropped < total; t.dropped++ {
		t.bad(ReasonInboxFull)
	}
}

func (t *NATSTransport) bad(reason string) {
	if f := t.hooks.OnBad; f != nil {
		f(reason)
	}
}
