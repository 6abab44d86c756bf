package bus

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/agent/wire"
	"github.com/edge-agent/edge-agent/agent/wire/sign"
)

// Expose stores the Bus that WithNATS builds in *dst, for the parts of the
// binary that ask the group over the agent's connection (GroupStatus).
func Expose(dst **Bus) Option {
	return func(b *Bus) error {
		*dst = b
		return nil
	}
}

// StatusAnswer is one agent's answer to GroupStatus and when it came (on
// this gateway's clock: the members' wall clocks need not agree).
type StatusAnswer struct {
	Report agent.StatusReport
	At     time.Time
}

// GroupStatus asks the other agents of the group for their status over
// the agent's election connection, on the group's status control subject
// as edge-agent status does, and returns the answers that came before the
// members named in wait (nil: every other member) answered, timeout passed
// or ctx ended, sorted by id. Answers of members not in wait count too
// while it waits. The agent's own answer is not among them: the connection
// does not receive what it publishes (NoEcho), and the caller has the
// agent's status at hand. In a group that signs, the request is signed
// with this member's key (the agents answer members) and only answers
// signed by the member they name count. Each call costs every agent one
// status request (edge_election_control_requests_total{verb="status"}).
func (b *Bus) GroupStatus(ctx context.Context, timeout time.Duration, wait []string) ([]StatusAnswer, error) {
	cfg := b.c.Config
	inbox := b.nc.NewRespInbox()
	ch := make(chan *nats.Msg, 2*len(cfg.Members)+8)
	sub, err := b.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req := &nats.Msg{Subject: wire.ControlSubject(cfg.SubjectPrefix, cfg.Group, wire.VerbStatus), Reply: inbox}
	if err := b.sign(req); err != nil {
		return nil, err
	}
	if err := b.nc.PublishMsg(req); err != nil {
		return nil, err
	}
	members := map[string]bool{}
	pending := map[string]bool{}
	for _, m := range cfg.Members {
		members[m.ID] = m.ID != cfg.ID
		if m.ID != cfg.ID && wait == nil {
			pending[m.ID] = true
		}
	}
	for _, id := range wait {
		if members[id] {
			pending[id] = true
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var out []StatusAnswer
	seen := map[string]bool{}
	for len(pending) > 0 {
		select {
		case m := <-ch:
			var r agent.StatusReport
			if json.Unmarshal(m.Data, &r) != nil || !members[r.ID] || seen[r.ID] || r.Group != cfg.Group {
				continue
			}
			if b.signer != nil && b.verifyAnswer(m, r.ID) != nil {
				continue
			}
			seen[r.ID] = true
			delete(pending, r.ID)
			out = append(out, StatusAnswer{Report: r, At: time.Now()})
		case <-deadline.C:
			return sortReports(out), nil
		case <-ctx.Done():
			return sortReports(out), ctx.Err()
		}
	}
	return sortReports(out), nil
}

// verifyAnswer checks that m is signed by member id's pinned key.
func (b *Bus) verifyAnswer(m *nats.Msg, id string) error {
	key, _, err := sign.VerifyControl(m)
	if err != nil {
		return err
	}
	if want, ok := b.c.Config.MemberKeys[id]; !ok || key != want {
		return errors.New("bus: status answer not signed by the member it names")
	}
	return nil
}

func sortReports(rs []StatusAnswer) []StatusAnswer {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Report.ID < rs[j].Report.ID })
	return rs
}
