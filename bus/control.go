package bus

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/ratelimit"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
)

// controlAuth decides who may send control requests and how often.
type controlAuth struct {
	signers map[string]string // public key -> "member ID" or "operator NAME"

	mu    sync.Mutex
	rates map[string]*ratelimit.Limiter // verb -> per-signer limiter
	verbs map[string]*ratelimit.Bucket  // verb -> limiter over all signers
}

func (b *Bus) newControlAuth() *controlAuth {
	c := &controlAuth{signers: map[string]string{}, rates: map[string]*ratelimit.Limiter{}, verbs: map[string]*ratelimit.Bucket{}}
	for id, k := range b.c.Config.MemberKeys {
		c.signers[k] = "member " + id
	}
	for name, k := range b.c.Config.OperatorKeys {
		c.signers[k] = "operator " + name
	}
	d := agent.HandoverPeriod(b.c.Config.SuspectAfter()).Seconds()
	c.rates[wire.VerbStatus] = ratelimit.NewLimiter(agent.StatusRate, agent.StatusBurst, 64)
	c.rates[wire.VerbResign] = ratelimit.NewLimiter(1/d, agent.HandoverBurst, 64)
	c.rates[wire.VerbTransfer] = c.rates[wire.VerbResign]
	c.rates[wire.VerbDrain] = c.rates[wire.VerbResign]
	c.rates[wire.VerbUndrain] = c.rates[wire.VerbResign]
	return c
}

// allow spends a token of verb for signer.
func (c *controlAuth) allow(verb, signer string, now time.Duration, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := verb
	if verb == wire.VerbTransfer || verb == wire.VerbDrain || verb == wire.VerbUndrain {
		key = wire.VerbResign // one budget for every handover (a drain may be one)
	}
	bk := c.verbs[key]
	if bk == nil {
		bk = &ratelimit.Bucket{}
		c.verbs[key] = bk
	}
	rate, burst := float64(5*agent.StatusRate), float64(5*agent.StatusBurst)
	if key == wire.VerbResign {
		rate, burst = 1/agent.HandoverPeriod(d).Seconds(), agent.HandoverBurst
	}
	if !c.rates[verb].Allow(signer, now) {
		return false
	}
	return bk.Take(now, rate, burst)
}

// serveControl answers status requests (every member, from the agent's
// snapshot) and hands resign/transfer requests to the loop, on the group's
// control subjects; it publishes the agent's leader changes. It returns
// the stop.
func (b *Bus) serveControl(h agent.BusHooks, mb *agent.Mailbox) (stop func(), err error) {
	auth := b.newControlAuth()
	start := time.Now()
	var undo []func()
	stop = func() {
		for _, u := range undo {
			u()
		}
	}
	sub := func(verb string, handle func(m *nats.Msg, signer string)) error {
		s, unsub, err := b.subscribe(dispatchControl, wire.ControlSubject(b.c.Config.SubjectPrefix, b.c.Config.Group, verb), func(m *nats.Msg) {
			signer, result := b.checkControl(auth, verb, m, time.Since(start))
			if result != "" {
				h.OnControl(verb, result)
				return
			}
			handle(m, signer)
		}, func() { h.OnControl(verb, agent.ControlRateLimited) })
		if err != nil {
			return err
		}
		// A flood of requests waits in at most 64 messages or 256 KiB (on
		// a shared connection, in the dispatcher's queue).
		_ = s.SetPendingLimits(64, 256<<10)
		undo = append(undo, unsub)
		return nil
	}
	handover := func(verb string) func(*nats.Msg, string) {
		return func(m *nats.Msg, signer string) {
			c := &agent.ControlInput{Verb: verb, Signer: signer, Signed: b.signer != nil, Data: m.Data,
				Reply: func(p []byte) { b.reply(m, p) }}
			if !mb.Offer(agent.Input{Kind: agent.InputControl, Control: c}) {
				h.OnBad("inbox_full")
			}
		}
	}
	for verb, handle := range map[string]func(*nats.Msg, string){
		wire.VerbStatus: func(m *nats.Msg, _ string) {
			if body, err := json.Marshal(h.Status()); err == nil {
				b.reply(m, body)
				h.OnControl(wire.VerbStatus, agent.ControlOK)
			}
		},
		wire.VerbResign:   handover(wire.VerbResign),
		wire.VerbTransfer: handover(wire.VerbTransfer),
		wire.VerbDrain:    handover(wire.VerbDrain),
		wire.VerbUndrain:  handover(wire.VerbUndrain),
	} {
		if err := sub(verb, handle); err != nil {
			stop()
			return nil, err
		}
	}
	unsub := stop
	stopEvents := b.publishEvents(h)
	return func() { unsub(); stopEvents() }, nil
}

// checkControl applies the checks every control request passes before its
// verb's handler: a reply inbox, the size, the signature of a member or an
// operator named in the config (when the group signs), and the rates. It
// returns who signed ("" when the group does not sign), or the result of a
// refused request.
func (b *Bus) checkControl(auth *controlAuth, verb string, m *nats.Msg, now time.Duration) (signer, refused string) {
	if m.Reply == "" || !strings.HasPrefix(m.Reply, agent.ControlInbox) || strings.ContainsAny(m.Reply, "*> \t") {
		return "", agent.ControlBadRequest
	}
	if len(m.Data) > agent.MaxControlRequest {
		return "", agent.ControlBadRequest
	}
	key := ""
	if b.signer != nil {
		k, _, err := sign.VerifyControl(m)
		switch {
		case errors.Is(err, sign.ErrControlUnsigned):
			return "", agent.ControlUnsigned
		case err != nil:
			return "", agent.ControlBadSig
		}
		who, known := auth.signers[k]
		if !known {
			return "", agent.ControlUnknownKey
		}
		key, signer = k, who
	}
	if !auth.allow(verb, key, now, b.c.Config.SuspectAfter()) {
		return "", agent.ControlRateLimited
	}
	return signer, ""
}

// reply answers m with payload, signed when the group signs.
func (b *Bus) reply(m *nats.Msg, payload []byte) {
	out := &nats.Msg{Subject: m.Reply, Data: payload}
	if b.sign(out) == nil {
		_ = b.nc.PublishMsg(out)
	}
}

// sign signs out when the group signs.
func (b *Bus) sign(out *nats.Msg) error {
	if b.signer == nil {
		return nil
	}
	ep, n := b.signer.Next()
	return sign.SignControl(b.signer.Key(), out, wire.Numbering{Epoch: ep, N: n}.String())
}

// publishEvents publishes every leader change the agent sees on the group's
// events subject, in order, until the agent's watchers close (when Run
// returns); stop waits for the last one to be flushed.
func (b *Bus) publishEvents(h agent.BusHooks) (stop func()) {
	subject := agent.EventsSubject(b.c.Config.SubjectPrefix, b.c.Config.Group)
	wait := h.WatchFunc(func(c agent.LeaderChange) {
		body, err := json.Marshal(c)
		if err == nil {
			out := &nats.Msg{Subject: subject, Data: body}
			if err = b.sign(out); err == nil {
				err = b.nc.PublishMsg(out)
			}
		}
		if err != nil {
			b.c.Log.Debug("leader change event not published", "err", err)
		}
	})
	return func() {
		wait()
		_ = b.nc.FlushTimeout(time.Second)
	}
}
