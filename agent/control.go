package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// ControlRequest is the body of a control request. Nominee is only used by
// transfer. A signed resign or transfer names the leadership it is for
// (Leader, Term) and carries a Nonce: the leader refuses it in any other
// term, and refuses a nonce it has seen in this term, so a captured request
// cannot be played back later.
type ControlRequest struct {
	Nominee string `json:"nominee,omitempty"`
	Leader  string `json:"leader,omitempty"`
	Term    uint64 `json:"term,omitempty"`
	Nonce   string `json:"nonce,omitempty"`
}

// ControlReply answers a resign or transfer request. Only the leader answers.
type ControlReply struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Term  uint64 `json:"term"`
}

// Control request limits. A request body is small; a reply subject must be
// an inbox (a request whose reply subject is an election subject would make
// the agent publish there). Requests are rate-limited per signer and per
// verb: status at StatusRate per second, resign and transfer (which move
// leadership and restart the duty) at one per D or per second, whichever is
// longer, after a burst of HandoverBurst.
const (
	MaxControlRequest = 4 << 10
	ControlInbox      = "_INBOX."
	StatusRate        = 10
	StatusBurst       = 20
	HandoverBurst     = 3
)

// Results of control requests, as edge_election_control_requests_total
// counts them.
const (
	ControlOK          = "ok"
	ControlUnsigned    = "unsigned"
	ControlBadSig      = "bad_signature"
	ControlUnknownKey  = "unknown_key"
	ControlStale       = "stale"
	ControlRateLimited = "rate_limited"
	ControlBadRequest  = "bad_request"
)

// handoverPeriod is the time between handovers a group grants on request
// once the burst is spent: D, at least a second.
func handoverPeriod(d time.Duration) time.Duration { return max(d, time.Second) }

// controlAuth decides who may send control requests and how often.
type controlAuth struct {
	signers map[string]string // public key -> "member ID" or "operator NAME"
	seen    map[string]uint64 // resign/transfer nonces accepted -> term

	mu    sync.Mutex
	rates map[string]*limiter // verb -> per-signer limiter
	verbs map[string]*bucket  // verb -> limiter over all signers
}

func (a *Agent) newControlAuth() *controlAuth {
	c := &controlAuth{signers: map[string]string{}, seen: map[string]uint64{}, rates: map[string]*limiter{}, verbs: map[string]*bucket{}}
	for id, k := range a.cfg.MemberKeys {
		c.signers[k] = "member " + id
	}
	for name, k := range a.cfg.OperatorKeys {
		c.signers[k] = "operator " + name
	}
	d := handoverPeriod(a.cfg.SuspectAfter()).Seconds()
	c.rates[wire.VerbStatus] = newLimiter(StatusRate, StatusBurst, 64)
	c.rates[wire.VerbResign] = newLimiter(1/d, HandoverBurst, 64)
	c.rates[wire.VerbTransfer] = c.rates[wire.VerbResign]
	return c
}

// allow spends a token of verb for signer.
func (c *controlAuth) allow(verb, signer string, now time.Duration, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := verb
	if verb == wire.VerbTransfer {
		key = wire.VerbResign // one budget for every handover
	}
	b := c.verbs[key]
	if b == nil {
		b = &bucket{}
		c.verbs[key] = b
	}
	rate, burst := float64(5*StatusRate), float64(5*StatusBurst)
	if key == wire.VerbResign {
		rate, burst = 1/handoverPeriod(d).Seconds(), HandoverBurst
	}
	if !c.rates[verb].allow(signer, now) {
		return false
	}
	return b.take(now, rate, burst)
}

// serveControl answers status requests (every member) and resign/transfer
// requests (the leader) on the group's control subjects.
func (a *Agent) serveControl() (stop func(), err error) {
	auth := a.newControlAuth()
	var subs []*nats.Subscription
	stop = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	sub := func(verb string, h func(m *nats.Msg, signer string)) error {
		s, err := a.bus.nc.Subscribe(wire.ControlSubject(a.cfg.SubjectPrefix, a.cfg.Group, verb), func(m *nats.Msg) {
			signer, ok := a.checkControl(auth, verb, m)
			if ok {
				h(m, signer)
			}
		})
		if err != nil {
			return err
		}
		// A flood of requests waits in at most 64 messages or 256 KiB.
		_ = s.SetPendingLimits(64, 256<<10)
		subs = append(subs, s)
		return nil
	}
	if err := sub(wire.VerbStatus, func(m *nats.Msg, _ string) {
		b, err := json.Marshal(a.Status())
		if err == nil {
			a.controlReply(m, b)
			a.m.control(wire.VerbStatus, ControlOK)
		}
	}); err != nil {
		stop()
		return nil, err
	}
	if err := sub(wire.VerbResign, a.handoverRequest(auth, false)); err != nil {
		stop()
		return nil, err
	}
	if err := sub(wire.VerbTransfer, a.handoverRequest(auth, true)); err != nil {
		stop()
		return nil, err
	}
	unsub := stop
	stopEvents := a.publishEvents()
	return func() { unsub(); stopEvents() }, nil
}

// handoverRequest returns the handler of resign (transfer false) or
// transfer requests: only the leader answers; a signed request is for one
// leadership, once.
func (a *Agent) handoverRequest(auth *controlAuth, transfer bool) func(*nats.Msg, string) {
	verb := wire.VerbResign
	if transfer {
		verb = wire.VerbTransfer
	}
	return func(m *nats.Msg, signer string) {
		if !a.IsLeader() {
			return
		}
		var req ControlRequest
		if len(m.Data) > 0 {
			if err := json.Unmarshal(m.Data, &req); err != nil {
				a.m.control(verb, ControlBadRequest)
				a.respond(m, errors.New("bad request: "+err.Error()))
				return
			}
		}
		if !transfer {
			req.Nominee = ""
		} else if req.Nominee == "" {
			a.m.control(verb, ControlBadRequest)
			a.respond(m, errors.New("transfer needs a nominee"))
			return
		}
		if a.bus.signer != nil && !a.freshRequest(auth, verb, m, req) {
			return
		}
		a.log.Info("control request", "verb", verb, "from", signer, "nominee", req.Nominee)
		a.m.control(verb, ControlOK)
		// The handler runs on the subscription's goroutine; hand the
		// request over without blocking it.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+a.work.releaseWait)
			defer cancel()
			a.respond(m, a.handover(ctx, req.Nominee))
		}()
	}
}

// freshRequest reports whether a signed handover request is for this
// leadership and new; it answers (or drops) a request that is not.
func (a *Agent) freshRequest(auth *controlAuth, verb string, m *nats.Msg, req ControlRequest) bool {
	term := a.Term()
	if req.Leader != a.cfg.ID || req.Term != term || req.Nonce == "" || len(req.Nonce) > 64 {
		a.m.control(verb, ControlStale)
		a.respond(m, fmt.Errorf("request for leader %q in term %d refused: %s leads term %d", req.Leader, req.Term, a.cfg.ID, term))
		return false
	}
	auth.mu.Lock()
	_, dup := auth.seen[req.Nonce]
	for k, t := range auth.seen {
		if t != term || len(auth.seen) > 256 {
			delete(auth.seen, k)
		}
	}
	auth.seen[req.Nonce] = term
	auth.mu.Unlock()
	if dup {
		a.m.control(verb, ControlStale)
		return false // a played-back request: no answer
	}
	return true
}

// checkControl applies the checks every control request passes before its
// verb's handler: a reply inbox, the size, the signature of a member or an
// operator named in the config (when the group signs), and the rates. It
// returns who signed ("" when the group does not sign).
func (a *Agent) checkControl(auth *controlAuth, verb string, m *nats.Msg) (signer string, ok bool) {
	if m.Reply == "" || !strings.HasPrefix(m.Reply, ControlInbox) || strings.ContainsAny(m.Reply, "*> \t") {
		a.m.control(verb, ControlBadRequest)
		return "", false
	}
	if len(m.Data) > MaxControlRequest {
		a.m.control(verb, ControlBadRequest)
		return "", false
	}
	key := ""
	if a.bus.signer != nil {
		k, _, err := wire.VerifyControl(m)
		switch {
		case errors.Is(err, wire.ErrControlUnsigned):
			a.m.control(verb, ControlUnsigned)
			return "", false
		case err != nil:
			a.m.control(verb, ControlBadSig)
			return "", false
		}
		who, known := auth.signers[k]
		if !known {
			a.m.control(verb, ControlUnknownKey)
			return "", false
		}
		key, signer = k, who
	}
	if !auth.allow(verb, key, a.mono(), a.cfg.SuspectAfter()) {
		a.m.control(verb, ControlRateLimited)
		return "", false
	}
	return signer, true
}

// controlReply answers m with payload, signed when the group signs.
func (a *Agent) controlReply(m *nats.Msg, payload []byte) {
	out := &nats.Msg{Subject: m.Reply, Data: payload}
	if a.bus.signer != nil {
		ep, n := a.bus.signer.Next()
		if err := wire.SignControl(a.bus.signer.Key(), out, wire.Numbering{Epoch: ep, N: n}.String()); err != nil {
			return
		}
	}
	_ = a.bus.nc.PublishMsg(out)
}

// EventsSubject is where every agent of a group publishes a LeaderChange
// (JSON) each time the leader it knows changes: `<prefix>.<group>.ctl.events`.
// Events are best effort (a change seen while disconnected from NATS is not
// published); `edge-agent watch` streams them. In a group that signs, they
// are signed and numbered (see wire.KeyHeader).
func EventsSubject(prefix, group string) string { return wire.ControlSubject(prefix, group, "events") }

// publishEvents publishes every leader change this agent sees on the
// group's events subject, in order, until the agent's watchers close (when
// Run returns); stop waits for the last one to be flushed.
func (a *Agent) publishEvents() (stop func()) {
	ch, _ := a.Watch()
	subject := EventsSubject(a.cfg.SubjectPrefix, a.cfg.Group)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range ch {
			b, err := json.Marshal(c)
			if err == nil {
				out := &nats.Msg{Subject: subject, Data: b}
				if a.bus.signer != nil {
					ep, n := a.bus.signer.Next()
					err = wire.SignControl(a.bus.signer.Key(), out, wire.Numbering{Epoch: ep, N: n}.String())
				}
				if err == nil {
					err = a.bus.nc.PublishMsg(out)
				}
			}
			if err != nil {
				a.log.Debug("leader change event not published", "err", err)
			}
		}
	}()
	return func() {
		<-done
		_ = a.bus.nc.FlushTimeout(time.Second)
	}
}

func (a *Agent) respond(m *nats.Msg, err error) {
	r := ControlReply{ID: a.cfg.ID, OK: err == nil, Term: a.Term()}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := json.Marshal(r)
	a.controlReply(m, b)
}
