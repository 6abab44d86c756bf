package bus

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/ratelimit"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
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
	// Members are the ids of the group, at most wire.WireMaxMembers.
	Members []string
	// Hooks report traffic and drops.
	Hooks agent.Hooks
	// Deliver, when set, takes every accepted message instead of Inbox (a
	// bus hands them to its mailbox without another hop); it reports false
	// when it could not take one (counted as inbox_full).
	Deliver func(election.Message) bool
	// InboxSize is the capacity of the inbox (DefaultInboxSize when 0).
	InboxSize int
	// Signing, when set, signs every outgoing message and accepts only
	// messages signed by their sender's pinned key, never replayed.
	Signing *sign.Signing
	// Heartbeat is the group's heartbeat period, which sets the rate of
	// messages accepted from one sender (SenderRate); 0 means 1s.
	Heartbeat time.Duration
	// SenderRate and SenderBurst, when not 0, replace SenderRate's figures.
	SenderRate, SenderBurst float64

	// protocols, when set, follows the members' protocol versions: each
	// message goes out at its receiver's, and a member whose range does
	// not overlap this build's is refused. Unset, every message goes out
	// at protocol 1.
	protocols *protocols
	// Instance, when set, names this process: the transport announces it
	// every heartbeat period on Self's own direct subject, and calls
	// OnDuplicate with the name another process announces there (another
	// process speaks with this member's id).
	Instance    string
	OnDuplicate func(instance string)
	// dispatch, when set (a bus on a Shared connection), runs the receive
	// path on that dispatcher's goroutine, shared by every transport on the
	// connection, instead of a goroutine of the transport's own. Deliver
	// must be set with it.
	dispatch *dispatcher
}

// NATSTransport is a Transport over a NATS connection. It subscribes to the
// group's broadcasts and to the messages addressed to Self, and checks every
// inbound message with wire.Decode before it reaches Inbox. Both subscriptions
// feed one queue, so messages reach Inbox in the order the connection
// received them, across both subjects.
//
// The receive path is bounded in messages and in bytes, and what it costs
// grows with what it keeps, not with what it is sent: each message taken off
// the connection is first admitted, which drops at once, before any parsing or
// signature check, what is too large, not on an election subject of this
// member, or over its sender's rate (per sender as the subject names it, so a
// member flooding its own subjects cannot crowd out the others); what is left
// waits in a queue of at most MaxQueuedBytes to have its signature checked and
// be decoded, and everything waiting on the connection is admitted before
// each decoding (receive). Everything dropped is counted through
// Hooks.OnBad.
//
// It is safe for concurrent use. Hooks are called from its goroutines (for
// inbound traffic) and from Send's caller; they must not block and must not
// call Close.
type NATSTransport struct {
	nc      *nats.Conn
	prefix  string
	group   string
	self    string
	members map[string]bool
	hooks   agent.Hooks
	deliver func(election.Message) bool
	signing *sign.Signing
	proto   *protocols
	inst    string
	onDup   func(string)
	// instUnsigned is the encoded announcement of an unsigned group,
	// the same every period: made once (only sendInstance uses it).
	instUnsigned []byte

	raw     chan *nats.Msg // filled by the NATS client; nil when dispatched
	work    []*nats.Msg    // checked for size, subject and rate; waiting for decoding (receive's own)
	workCap int            // at most this many in work
	queued  int64          // bytes waiting in work
	subs    []*nats.Subscription
	inbox   chan election.Message
	// tick is the member's election tick (Heartbeat/TicksPerHeartbeat), in
	// which the cores count a promise (election.Message.Promise): the wire
	// says it in milliseconds.
	tick time.Duration

	// Only the admitting goroutine uses these.
	rates     *ratelimit.Limiter
	start     time.Time
	rate      float64
	burst     float64
	dropped   int // raw messages the subscriptions had dropped, as reported
	maxQueued int64

	mu     sync.Mutex // guards closed
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup

	// Dispatched (NATSTransportConfig.dispatch): the undo of the
	// subscriptions, and hmu, held while the dispatcher's goroutine runs the
	// receive path and by Close, after which it runs no more (handled).
	undoDispatch func()
	hmu          sync.Mutex
	hclosed      bool
	// The instance announcements and the signing challenges.
	periodic []*periodic
}

// MaxQueuedBytes bounds the bytes of election messages that a NATSTransport
// holds between taking them off the connection and decoding them; beyond it
// messages are dropped (inbox_full). It holds some fifty messages of the
// largest legal size, or thousands of heartbeats.
const MaxQueuedBytes = 1 << 20

// maxHeaderBytes bounds the headers of an election message (a signature
// takes about a hundred bytes).
const maxHeaderBytes = 1024

// SenderRate returns the rate of election messages a NATSTransport accepts
// from one sender, per second, and the burst above it, for heartbeat period
// h: twenty messages per period (a member sends one or two per period, and a
// few more while it elects) and a burst of 64 plus four per member.
func SenderRate(h time.Duration, members int) (rate, burst float64) {
	if h <= 0 {
		h = time.Second
	}
	return 20 / h.Seconds(), float64(64 + 4*members)
}

var _ agent.Transport = (*NATSTransport)(nil)

// NewNATSTransport subscribes to c.Group's election subjects on nc and starts
// delivering to Inbox. The caller keeps ownership of nc: Close does not close
// it. If nc is connected, the subscriptions are flushed to the server before
// NewNATSTransport returns, so that a message published after it returns is
// received.
func NewNATSTransport(nc *nats.Conn, c NATSTransportConfig) (*NATSTransport, error) {
	if nc == nil {
		return nil, errors.New("bus: nats transport: nil connection")
	}
	members, err := c.check()
	if err != nil {
		return nil, err
	}

	rate, burst := SenderRate(c.Heartbeat, len(members))
	if c.SenderRate > 0 {
		rate = c.SenderRate
	}
	if c.SenderBurst > 0 {
		burst = c.SenderBurst
	}
	t := &NATSTransport{
		nc:      nc,
		prefix:  c.Prefix,
		group:   c.Group,
		self:    c.Self,
		members: members,
		hooks:   c.Hooks,
		deliver: c.Deliver,
		signing: c.Signing,
		proto:   c.protocols,
		inst:    c.Instance,
		onDup:   c.OnDuplicate,
		// The raw queue absorbs bursts (the NATS client drops what does not
		// fit, whoever sent it); its goroutine only sorts out what to keep,
		// in microseconds, dropping anything over wire.MaxMessageSize, so it
		// holds large messages only while that goroutine is starved.
		raw:       rawQueue(c),
		workCap:   max(c.InboxSize, 64),
		inbox:     make(chan election.Message, inboxCap(c)),
		done:      make(chan struct{}),
		rates:     ratelimit.NewLimiter(rate, burst, len(members)),
		start:     time.Now(),
		rate:      rate,
		burst:     burst,
		maxQueued: MaxQueuedBytes,
		tick:      c.Heartbeat / agent.TicksPerHeartbeat,
	}
	if err := t.subscribe(c.dispatch); err != nil {
		return nil, err
	}
	if nc.IsConnected() {
		// Best effort: on failure the subscriptions still reach the server
		// with the next reconnect.
		_ = nc.FlushTimeout(2 * time.Second)
	}
	if t.raw != nil {
		t.wg.Add(1)
		go t.receive()
	}
	if t.signing != nil {
		if nc.IsConnected() {
			// Prove every member's epoch, and let them prove ours (sign.Signing).
			t.sendEpochMsg(wire.EpochMsg{Nonce: t.signing.ChallengeAll()})
		}
		d := challengePeriod(c.Heartbeat)
		t.periodic = append(t.periodic, startPeriodic(d, d, t.challenge))
	}
	if t.inst != "" {
		// A second process with the same member id hears this one on the
		// member's own direct subject (see wire.InstanceMsg), and this one
		// hears the other's, every heartbeat period.
		t.periodic = append(t.periodic, startPeriodic(0, orSecond(c.Heartbeat), t.sendInstance))
	}
	return t, nil
}

// subscribe subscribes to the group's broadcasts and to the messages
// addressed to this member: into t.raw, or through dispatch when set.
func (t *NATSTransport) subscribe(dispatch *dispatcher) error {
	subjs := []string{wire.BroadcastWildcard(t.prefix, t.group), wire.DirectWildcard(t.prefix, t.group, t.self)}
	if dispatch != nil {
		// One route for both subjects: their messages keep the order the
		// connection received them in, as through t.raw.
		// Room for a burst of every member (SenderRate): a member at its
		// burst cannot crowd the others' messages out.
		share := int(t.burst) * len(t.members)
		subs, undo, err := dispatch.subscribeAll(t.nc, subjs, route{handle: t.handled, admit: t.admissible, share: share,
			onDrop: func() { t.bad(wire.ReasonInboxFull) }})
		if err != nil {
			return fmt.Errorf("bus: nats transport: subscribe %s: %w", strings.Join(subjs, ", "), err)
		}
		t.subs, t.undoDispatch = subs, undo
		return nil
	}
	for _, subj := range subjs {
		sub, err := t.nc.ChanSubscribe(subj, t.raw)
		if err != nil {
			_ = t.unsubscribe()
			return fmt.Errorf("bus: nats transport: subscribe %s: %w", subj, err)
		}
		t.subs = append(t.subs, sub)
	}
	return nil
}

// rawCap is the capacity of the transport's raw queue for an inbox of
// size inbox: four times the inbox, at most 4096 messages.
func rawCap(inbox int) int { return min(4*max(inbox, 64), 4096) }

// rawQueue returns the transport's raw queue: none when a dispatcher
// takes the messages off the connection.
func rawQueue(c NATSTransportConfig) chan *nats.Msg {
	if c.dispatch != nil {
		return nil
	}
	return make(chan *nats.Msg, rawCap(c.InboxSize))
}

// inboxCap is the capacity of the transport's inbox: none when Deliver
// takes the messages (a bus's mailbox holds them instead).
func inboxCap(c NATSTransportConfig) int {
	if c.Deliver != nil {
		return 0
	}
	return c.InboxSize
}

// check fills c's defaults and checks it; it returns the members as a set.
func (c *NATSTransportConfig) check() (map[string]bool, error) {
	if c.Prefix == "" {
		c.Prefix = agent.DefaultSubjectPrefix
	}
	for _, tok := range strings.Split(c.Prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return nil, fmt.Errorf("bus: nats transport: %q is not a valid subject prefix", c.Prefix)
		}
	}
	if !election.ValidID(c.Group) {
		return nil, fmt.Errorf("bus: nats transport: %q is not a valid group name", c.Group)
	}
	if len(c.Members) > wire.WireMaxMembers {
		return nil, fmt.Errorf("bus: nats transport: %d members, the wire format carries at most %d", len(c.Members), wire.WireMaxMembers)
	}
	members := make(map[string]bool, len(c.Members))
	for _, id := range c.Members {
		if !election.ValidID(id) {
			return nil, fmt.Errorf("bus: nats transport: member %q is not a valid id", id)
		}
		if members[id] {
			return nil, fmt.Errorf("bus: nats transport: member %q listed twice", id)
		}
		members[id] = true
	}
	if !members[c.Self] {
		return nil, fmt.Errorf("bus: nats transport: self %q is not a member", c.Self)
	}
	if c.InboxSize == 0 {
		c.InboxSize = DefaultInboxSize
	}
	if c.InboxSize < 0 {
		return nil, fmt.Errorf("bus: nats transport: negative inbox size %d", c.InboxSize)
	}
	if c.dispatch != nil && c.Deliver == nil {
		return nil, errors.New("bus: nats transport: a dispatched transport needs Deliver")
	}
	return members, nil
}

// challengePeriod is how often the members whose epoch is not proved yet are
// challenged: every half heartbeat period, at least every
// wire.ChallengeInterval. The challenge broadcast at start is lost when a
// member is not up yet, or its server's route to ours is not, and then the
// first message between them (a COORDINATOR, a vote) would be dropped as
// unverified.
func challengePeriod(h time.Duration) time.Duration {
	return max(orSecond(h)/2, wire.ChallengeInterval)
}

// orSecond is h, or a second when h is not set.
func orSecond(h time.Duration) time.Duration {
	if h <= 0 {
		return time.Second
	}
	return h
}

// challenge challenges the members whose epoch is not proved yet.
func (t *NATSTransport) challenge() {
	if !t.nc.IsConnected() {
		return
	}
	for _, id := range t.signing.Unproven() {
		t.sendEpochMsg(wire.EpochMsg{To: id, Nonce: t.signing.Challenge(id)})
	}
}

// Send publishes m on its broadcast or direct subject. m.From must be Self. It
// checks m as a receiver would and refuses what receivers would drop. A
// publish while the connection is down fails (there is no reconnect buffer).
// Errors are prefixed "bus: send:" and wrap the cause.
func (t *NATSTransport) Send(m election.Message) error {
	if t.isClosed() {
		return errors.New("bus: send: transport closed")
	}
	if m.From != t.self {
		return fmt.Errorf("bus: send: from %q is not this member %q", m.From, t.self)
	}
	level := wire.ProtocolMin
	if t.proto != nil {
		level = t.proto.level(m.To, time.Now())
	}
	if !wire.Speaks(m.Type, level) {
		// Its receiver speaks an older protocol (see wire.Speaks). A
		// broadcast still reaches, one by one, the members that speak it:
		// on a site mid-upgrade the upgraded members get what the others
		// would drop.
		if m.To != "" || t.proto == nil {
			return nil
		}
		for id := range t.members {
			if id != t.self && wire.Speaks(m.Type, t.proto.level(id, time.Now())) {
				d := m
				d.To = id
				if err := t.Send(d); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var ep, n uint64
	if t.signing != nil {
		ep, n = t.signing.Next()
	}
	data, err := wire.EncodeTimed(t.group, t.tick, m, ep, n, level)
	if err != nil {
		return fmt.Errorf("bus: send: %w", err)
	}
	subj := wire.BroadcastSubject(t.prefix, t.group, m.From)
	if m.To != "" {
		subj = wire.DirectSubject(t.prefix, t.group, m.From, m.To)
	}
	// What the receiver will check and Encode cannot: membership.
	if err := wire.CheckOutbound(m, t.members); err != nil {
		return fmt.Errorf("bus: send: %w", err)
	}
	out := &nats.Msg{Subject: subj, Data: data}
	if t.signing != nil {
		sig, err := t.signing.Sign(subj, data)
		if err != nil {
			return fmt.Errorf("bus: send: sign: %w", err)
		}
		out.Header = nats.Header{wire.SignatureHeader: []string{sig}}
	}
	if err := t.nc.PublishMsg(out); err != nil {
		return fmt.Errorf("bus: send: %s to %s: %w", m.Type, subj, err)
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
	for _, p := range t.periodic {
		p.stop()
	}
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
	if t.undoDispatch != nil {
		t.undoDispatch()
		t.hmu.Lock()
		t.hclosed = true // a handler the dispatcher had begun has finished
		t.hmu.Unlock()
		return nil
	}
	var errs []error
	for _, sub := range t.subs {
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bus: nats transport: unsubscribe: %w", err)
	}
	return nil
}

// admit drops msg, counting why, if it is too large, not an election
// subject of this member or over its sender's rate, or if the queue is
// full; otherwise it queues it for decoding. It parses nothing.
func (t *NATSTransport) admit(msg *nats.Msg) {
	if !t.admissible(msg) {
		return
	}
	size := int64(len(msg.Data))
	if t.queued+size > t.maxQueued || len(t.work) >= t.workCap {
		t.bad(wire.ReasonInboxFull)
		return
	}
	t.queued += size
	t.work = append(t.work, msg)
}

// admissible reports whether msg is worth decoding: false, counting why,
// if it is too large, not an election subject of this member, cannot
// carry a valid signature, or is over its sender's rate. It parses nothing.
func (t *NATSTransport) admissible(msg *nats.Msg) bool {
	if len(msg.Data) > wire.MaxMessageSize || headerBytes(msg.Header) > maxHeaderBytes {
		t.bad(wire.ReasonOversize)
		return false
	}
	from, to, ok := wire.SubjectParties(msg.Subject, t.prefix, t.group)
	switch {
	case !ok:
		t.bad(wire.ReasonSubjectMismatch)
		return false
	case to != "" && to != t.self:
		t.bad(wire.ReasonNotForMe)
		return false
	case !t.members[from]:
		t.bad(wire.ReasonNotMember)
		return false
	}
	if t.signing != nil {
		// What cannot carry a valid signature is dropped here, before it
		// counts against its sender's rate: a flood of garbage in a
		// member's name then costs that member nothing.
		if reason := sigShape(msg.Header); reason != "" {
			t.bad(reason)
			return false
		}
	}
	if !t.rates.Allow(from, time.Since(t.start)) {
		t.bad(wire.ReasonRateLimited)
		return false
	}
	return true
}

// sigShape reports a signature header that is missing or cannot be an
// ed25519 signature, without verifying it.
func sigShape(h nats.Header) string {
	sig := ""
	if h != nil {
		sig = h.Get(wire.SignatureHeader)
	}
	switch {
	case sig == "":
		return wire.ReasonUnsigned
	case base64.RawURLEncoding.DecodedLen(len(sig)) != 64:
		return wire.ReasonBadSignature
	}
	return ""
}

func headerBytes(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// receive takes raw messages off the connection in arrival order, admits
// those worth decoding (admit), decodes them in order and moves the
// accepted ones to Inbox. Before each decoding it admits everything that
// waits, so the raw queue is drained while decoding lags (a flood is sorted
// out in microseconds a message, and dropped by sender and reason, before
// the NATS client would drop anything, whoever sent it); one goroutine does
// both, a goroutine wake-up less a message than two stages (a witness
// serving a thousand groups spent a quarter of its CPU waking goroutines).
func (t *NATSTransport) receive() {
	defer t.wg.Done()
	for {
		select {
		case <-t.done:
			return
		default:
		}
		t.admitWaiting()
		if len(t.work) == 0 {
			select {
			case <-t.done:
				return
			case msg := <-t.raw:
				t.admit(msg)
				t.reportDropped()
			}
			continue
		}
		msg := t.work[0]
		t.work[0] = nil
		if t.work = t.work[1:]; len(t.work) == 0 {
			t.work = t.work[:0:0] // let the array go: a burst does not hold it
		}
		t.queued -= int64(len(msg.Data))
		t.handle(msg)
	}
}

// admitWaiting admits every raw message waiting.
func (t *NATSTransport) admitWaiting() {
	for {
		select {
		case msg := <-t.raw:
			t.admit(msg)
			t.reportDropped()
		default:
			return
		}
	}
}

// handled is the receive path of a dispatched transport, on the
// dispatcher's goroutine: what admissible let into the dispatcher's share
// (which bounds what waits, as work does otherwise) is decoded and
// delivered.
func (t *NATSTransport) handled(msg *nats.Msg) {
	t.hmu.Lock()
	defer t.hmu.Unlock()
	if t.hclosed {
		return
	}
	t.reportDropped()
	t.handle(msg)
}

func (t *NATSTransport) handle(msg *nats.Msg) {
	if t.signing != nil {
		// Check the signature before parsing anything: unsigned or forged
		// traffic costs a header lookup or one ed25519 verification of at
		// most wire.MaxMessageSize bytes (admit checked the size).
		sig := ""
		if msg.Header != nil {
			sig = msg.Header.Get(wire.SignatureHeader)
		}
		from, _, ok := wire.SubjectParties(msg.Subject, t.prefix, t.group)
		if !ok {
			t.bad(wire.ReasonSubjectMismatch)
			return
		}
		if reason := t.signing.Verify(from, msg.Subject, msg.Data, sig); reason != "" {
			t.bad(reason)
			return
		}
	}
	in, err := wire.DecodeInbound(msg.Data, msg.Subject, wire.DecodeContext{Prefix: t.prefix, Group: t.group, Self: t.self, Members: t.members, Tick: t.tick})
	if err != nil {
		reason := wire.ReasonMalformed
		var be *wire.BadMessageError
		if errors.As(err, &be) {
			reason = be.Reason
		}
		t.bad(reason)
		return
	}
	if in.Epoch != nil {
		t.handleEpochMsg(*in.Epoch)
		return
	}
	if in.Instance != nil {
		if in.Instance.Instance != t.inst && t.onDup != nil {
			t.onDup(in.Instance.Instance)
		}
		return
	}
	m := in.Msg
	if m.From == t.self {
		// Our own broadcast, echoed by a connection without NoEcho.
		return
	}
	if t.proto != nil {
		now := time.Now()
		if t.proto.refused(m.From, now) {
			t.bad(wire.ReasonProtocolMismatch)
			return
		}
		t.proto.heard(m.From, in.Protocol, m.To != "", now)
	}
	if t.signing != nil {
		// The signature is the subject's sender's, and DecodeInbound
		// checked that the payload's sender is the subject's.
		reason, challenge := t.signing.Admit(m.From, in.Num.Epoch, in.Num.N)
		if challenge {
			t.sendEpochMsg(wire.EpochMsg{To: m.From, Nonce: t.signing.Challenge(m.From)})
		}
		if reason != "" {
			t.bad(reason)
			return
		}
	}
	if !t.put(m) {
		t.bad(wire.ReasonInboxFull)
		return
	}
	if f := t.hooks.OnMessage; f != nil {
		f(m.Type, "in")
	}
}

// put hands m on (Deliver, or Inbox) without blocking.
func (t *NATSTransport) put(m election.Message) bool {
	if t.deliver != nil {
		return t.deliver(m)
	}
	select {
	case t.inbox <- m:
		return true
	default:
		return false
	}
}

// handleEpochMsg answers a challenge and takes a proof (see sign.Signing).
func (t *NATSTransport) handleEpochMsg(e wire.EpochMsg) {
	if t.signing == nil || e.From == t.self {
		return // without signing there are no epochs to prove
	}
	if !e.Proof {
		if t.signing.MayAnswer(e.From) {
			t.sendEpochMsg(wire.EpochMsg{Proof: true, To: e.From, Nonce: e.Nonce})
		}
		// The challenger's own numbering may be new to us: prove it too.
		if _, challenge := t.signing.Admit(e.From, e.Ep, e.N); challenge {
			t.sendEpochMsg(wire.EpochMsg{To: e.From, Nonce: t.signing.Challenge(e.From)})
		}
		return
	}
	if reason := t.signing.Proof(e.From, e.Ep, e.N, e.Nonce); reason != "" {
		t.bad(reason)
	}
}

// sendEpochMsg signs and publishes a challenge or a proof. Failures are
// not reported: a lost one is sent again on the next unproved message.
func (t *NATSTransport) sendEpochMsg(e wire.EpochMsg) {
	if t.isClosed() || t.signing == nil {
		return
	}
	e.From = t.self
	e.Ep, e.N = t.signing.Next()
	data, err := wire.EncodeEpochMsg(t.group, e)
	if err != nil {
		return
	}
	subj := wire.BroadcastSubject(t.prefix, t.group, t.self)
	if e.To != "" {
		subj = wire.DirectSubject(t.prefix, t.group, t.self, e.To)
	}
	sig, err := t.signing.Sign(subj, data)
	if err != nil {
		return
	}
	_ = t.nc.PublishMsg(&nats.Msg{Subject: subj, Data: data, Header: nats.Header{wire.SignatureHeader: []string{sig}}})
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
		t.bad(wire.ReasonInboxFull)
	}
}

func (t *NATSTransport) bad(reason string) {
	if f := t.hooks.OnBad; f != nil {
		f(reason)
	}
}

// sendInstance publishes one announcement, signed when the group signs.
// Failures are not reported: the next one follows a period later.
func (t *NATSTransport) sendInstance() {
	if t.isClosed() || !t.nc.IsConnected() {
		return
	}
	subject := wire.DirectSubject(t.prefix, t.group, t.self, t.self)
	if t.signing == nil && t.instUnsigned != nil {
		_ = t.nc.Publish(subject, t.instUnsigned) // the client copies it
		return
	}
	m := wire.InstanceMsg{From: t.self, Instance: t.inst}
	if t.signing != nil {
		m.Ep, m.N = t.signing.Next()
	}
	data, err := wire.EncodeInstance(t.group, m)
	if err != nil {
		return
	}
	if t.signing == nil {
		t.instUnsigned = data
	}
	out := &nats.Msg{Subject: subject, Data: data}
	if t.signing != nil {
		sig, err := t.signing.Sign(out.Subject, data)
		if err != nil {
			return
		}
		out.Header = nats.Header{wire.SignatureHeader: []string{sig}}
	}
	_ = t.nc.PublishMsg(out)
}
