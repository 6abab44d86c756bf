package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edge-agent/edge-agent/agent/wire"
)

// ControlRequest is the body of a control request. Nominee is only used by
// transfer. A signed resign or transfer names the leadership it is for
// (Leader, Term) and carries a Nonce: the leader refuses it in any other
// term, and refuses a nonce it has seen in this term, so a captured request
// cannot be played back later.
type ControlRequest struct {
	Nominee string `json:"nominee,omitempty"`
	// Member names the member a drain or undrain is for; a signed one also
	// names that member's Term.
	Member string `json:"member,omitempty"`
	Leader string `json:"leader,omitempty"`
	Term   uint64 `json:"term,omitempty"`
	Nonce  string `json:"nonce,omitempty"`
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

// HandoverPeriod is the time between handovers a group grants on request
// once the burst is spent: D, at least a second.
func HandoverPeriod(d time.Duration) time.Duration { return max(d, time.Second) }

// EventsSubject is where every agent of a group publishes a LeaderChange
// (JSON) each time the leader it knows changes: `<prefix>.<group>.ctl.events`.
// Events are best effort (a change seen while disconnected from NATS is not
// published); `edge-agent watch` streams them. In a group that signs, they
// are signed and numbered (see wire.KeyHeader).
func EventsSubject(prefix, group string) string { return wire.ControlSubject(prefix, group, "events") }

// maxNonces bounds the nonces of signed handover requests the loop
// remembers (of the current term only).
const maxNonces = 256

// onControl handles a resign or transfer request in the loop: only the
// leader answers; a signed request is for one leadership, once. It hands
// over at once, then answers.
func (a *Agent) onControl(c *ControlInput) error {
	if c.Verb == wire.VerbDrain || c.Verb == wire.VerbUndrain {
		return a.onDrainControl(c)
	}
	if !a.IsLeader() {
		return nil
	}
	transfer := c.Verb == wire.VerbTransfer
	var req ControlRequest
	if len(c.Data) > 0 {
		if err := json.Unmarshal(c.Data, &req); err != nil {
			a.m.control(c.Verb, ControlBadRequest)
			a.respond(c, errors.New("bad request: "+err.Error()))
			return nil
		}
	}
	if !transfer {
		req.Nominee = ""
	} else if req.Nominee == "" {
		a.m.control(c.Verb, ControlBadRequest)
		a.respond(c, errors.New("transfer needs a nominee"))
		return nil
	}
	if c.Signed && !a.freshRequest(c, req) {
		return nil
	}
	a.log.Info("control request", "verb", c.Verb, "from", c.Signer, "nominee", req.Nominee)
	a.m.control(c.Verb, ControlOK)
	herr, err := a.handOver(req.Nominee)
	if err != nil {
		return err
	}
	a.respond(c, herr)
	return nil
}

// freshRequest reports whether a signed handover request is for this
// leadership and new; it answers (or drops) a request that is not.
func (a *Agent) freshRequest(c *ControlInput, req ControlRequest) bool {
	term := a.Term()
	drain := c.Verb == wire.VerbDrain || c.Verb == wire.VerbUndrain
	if drain && (req.Member != a.cfg.ID || req.Term != term || req.Nonce == "" || len(req.Nonce) > 64) {
		a.m.control(c.Verb, ControlStale)
		a.respond(c, fmt.Errorf("%s request for %q in term %d refused: %s is in term %d", c.Verb, req.Member, req.Term, a.cfg.ID, term))
		return false
	}
	if !drain && (req.Leader != a.cfg.ID || req.Term != term || req.Nonce == "" || len(req.Nonce) > 64) {
		a.m.control(c.Verb, ControlStale)
		a.respond(c, fmt.Errorf("request for leader %q in term %d refused: %s leads term %d", req.Leader, req.Term, a.cfg.ID, term))
		return false
	}
	_, dup := a.core.nonces[req.Nonce]
	for k, t := range a.core.nonces {
		if t != term || len(a.core.nonces) > maxNonces {
			delete(a.core.nonces, k)
		}
	}
	a.core.nonces[req.Nonce] = term
	if dup {
		a.m.control(c.Verb, ControlStale)
		return false // a played-back request: no answer
	}
	return true
}

// respond answers a handover request.
func (a *Agent) respond(c *ControlInput, err error) {
	r := ControlReply{ID: a.cfg.ID, OK: err == nil, Term: a.Term()}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := json.Marshal(r)
	c.Reply(b)
}

// onDrainControl handles a drain or undrain request in the loop: only the
// member it names answers, after the flag is stored and, if it led, after
// it handed over.
func (a *Agent) onDrainControl(c *ControlInput) error {
	var req ControlRequest
	if err := json.Unmarshal(c.Data, &req); err != nil || req.Member == "" {
		if req.Member == "" && err == nil {
			err = errors.New("no member named")
		}
		a.m.control(c.Verb, ControlBadRequest)
		a.respond(c, errors.New("bad request: "+err.Error()))
		return nil
	}
	if req.Member != a.cfg.ID {
		return nil // for another member
	}
	if c.Signed && !a.freshRequest(c, req) {
		return nil
	}
	a.log.Info("control request", "verb", c.Verb, "from", c.Signer)
	a.m.control(c.Verb, ControlOK)
	herr, err := a.setDrained(c.Verb == wire.VerbDrain)
	if err != nil {
		return err
	}
	a.respond(c, herr)
	return nil
}
