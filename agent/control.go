package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// ControlRequest is the body of a resign or transfer request on the control
// subjects; Nominee is only used by transfer.
type ControlRequest struct {
	Nominee string `json:"nominee,omitempty"`
}

// ControlReply answers a resign or transfer request. Only the leader answers.
type ControlReply struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Term  uint64 `json:"term"`
}

// serveControl answers status requests (every member) and resign/transfer
// requests (the leader) on the group's control subjects.
func (a *Agent) serveControl() (stop func(), err error) {
	var subs []*nats.Subscription
	stop = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	sub := func(verb string, h nats.MsgHandler) error {
		s, err := a.nc.Subscribe(ControlSubject(a.cfg.SubjectPrefix, a.cfg.Group, verb), h)
		if err != nil {
			return err
		}
		subs = append(subs, s)
		return nil
	}
	if err := sub("status", func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		b, err := json.Marshal(a.Status())
		if err == nil {
			_ = m.Respond(b)
		}
	}); err != nil {
		stop()
		return nil, err
	}
	handover := func(transfer bool) nats.MsgHandler {
		return func(m *nats.Msg) {
			if !a.IsLeader() || m.Reply == "" {
				return
			}
			var req ControlRequest
			if len(m.Data) > 0 && len(m.Data) <= 1024 {
				if err := json.Unmarshal(m.Data, &req); err != nil {
					a.respond(m, errors.New("bad request: "+err.Error()))
					return
				}
			}
			if !transfer {
				req.Nominee = ""
			} else if req.Nominee == "" {
				a.respond(m, errors.New("transfer needs a nominee"))
				return
			}
			// The handler runs on the connection's goroutine; the loop may
			// be publishing, so hand the request over without blocking it.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+a.releaseWait)
				defer cancel()
				a.respond(m, a.handover(ctx, req.Nominee))
			}()
		}
	}
	if err := sub("resign", handover(false)); err != nil {
		stop()
		return nil, err
	}
	if err := sub("transfer", handover(true)); err != nil {
		stop()
		return nil, err
	}
	unsub := stop
	stopEvents := a.publishEvents()
	return func() { unsub(); stopEvents() }, nil
}

// EventsSubject is where every agent of a group publishes a LeaderChange
// (JSON) each time the leader it knows changes: `<prefix>.<group>.ctl.events`.
// Events are best effort (a change seen while disconnected from NATS is not
// published); `edge-agent watch` streams them.
func EventsSubject(prefix, group string) string { return ControlSubject(prefix, group, "events") }

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
				err = a.nc.Publish(subject, b)
			}
			if err != nil {
				a.log.Debug("leader change event not published", "err", err)
			}
		}
	}()
	return func() {
		<-done
		_ = a.nc.FlushTimeout(time.Second)
	}
}

func (a *Agent) respond(m *nats.Msg, err error) {
	r := ControlReply{ID: a.cfg.ID, OK: err == nil, Term: a.Term()}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := json.Marshal(r)
	_ = m.Respond(b)
}
