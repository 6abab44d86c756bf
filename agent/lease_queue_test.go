package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// stallingTransport delivers what it is sent and then, once armed, holds
// the sender's loop for stall after the next heartbeat has left: the
// loop's goroutine is off the CPU for that long (the machine is loaded)
// right after the heartbeat went out, while the members' answers to it
// arrive and wait in the mailbox.
type stallingTransport struct {
	Transport
	armed atomic.Bool
	stall time.Duration
	held  atomic.Uint64 // the seq of the heartbeat the loop was held after
}

func (s *stallingTransport) Send(m election.Message) error {
	err := s.Transport.Send(m)
	if m.Type == election.MsgHeartbeat && s.armed.CompareAndSwap(true, false) {
		s.held.Store(m.Seq)
		stall(s.stall)
	}
	return err
}

// TestAgentLeaseCountsQueuedAcknowledgements: a leader whose lease rests
// on one member's acknowledgements (a 2+1 site with the gateways cut apart:
// the witness's) sends heartbeat N and is then held, as a loaded machine
// holds a process, past the end of the lease that heartbeat N-1 dated but
// well within the one N dates. The witness's acknowledgement of N arrived
// meanwhile and waits in the mailbox. The leader must count it before it
// judges its lease: it keeps leading in the same term, without a stop. (It
// used to judge the lease first, find it expired, stop leading and step
// down; the same gateway then won the next term on the witness's vote: a
// lapse of the one leader while it still reached the witness.)
func TestAgentLeaseCountsQueuedAcknowledgements(t *testing.T) {
	synctest.Test(t, testAgentLeaseCountsQueuedAcknowledgements)
}

func testAgentLeaseCountsQueuedAcknowledgements(t *testing.T) {
	s := &testSite{t: t, net: NewMemNetwork(), agents: map[string]*Agent{}, cancel: map[string]context.CancelFunc{},
		done: map[string]chan error{}, rec: map[string]*recorder{}}
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "wit", Priority: 3}}
	var held *stallingTransport
	for _, m := range members {
		cfg := Config{ID: m.ID, Group: "site", Members: members, Witnesses: []string{"wit"},
			Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir(), HoldDown: time.Hour}
		var tr Transport = s.net.Join(m.ID)
		if m.ID == "gw2" {
			held = &stallingTransport{Transport: tr}
			tr = held
		}
		rec := &recorder{}
		a, err := New(cfg, WithTransport(tr), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			WithCallbacks(Callbacks{
				OnStartedLeading: func(ctx context.Context, term uint64) {
					rec.add(fmt.Sprintf("started %d", term))
					<-ctx.Done()
				},
				OnStoppedLeading: func() { rec.add("stopped") },
			}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		s.agents[m.ID], s.cancel[m.ID], s.done[m.ID], s.rec[m.ID] = a, cancel, done, rec
	}
	t.Cleanup(func() {
		for id := range s.cancel {
			s.stop(id)
		}
	})
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agreed("gw1", "gw2", "wit") == "gw2" })

	// The gateways are cut apart: gw2's lease rests on the witness alone.
	s.net.Cut("gw1", "gw2")
	cfg := s.agents["gw2"].cfg
	stall(cfg.SuspectAfter() + 2*cfg.Heartbeat)
	gw2 := s.agents["gw2"]
	if !gw2.IsLeader() {
		t.Fatalf("gw2 lost its lease to the cut alone: %s", strings.Join(s.rec["gw2"].list(), ", "))
	}
	term := gw2.Term()
	before := len(s.rec["gw2"].list())

	// Held after heartbeat N: past the end of N-1's lease (sent H before
	// N), half a heartbeat before the end of N's.
	held.stall = cfg.Lease - cfg.Heartbeat/2
	if held.stall <= cfg.Lease-cfg.Heartbeat {
		t.Fatalf("lease %s, heartbeat %s: no room for the stall", cfg.Lease, cfg.Heartbeat)
	}
	held.armed.Store(true)
	waitFor(t, 5*time.Second, "the loop to be held after a heartbeat", func() bool { return held.held.Load() != 0 })
	stall(2 * cfg.Heartbeat)

	if got := s.rec["gw2"].list()[before:]; len(got) != 0 {
		t.Errorf("held %s after heartbeat %d, gw2 did %v: it judged its lease before counting the acknowledgement waiting for it",
			held.stall, held.held.Load(), got)
	}
	if !gw2.IsLeader() || gw2.Term() != term {
		t.Errorf("after the hold gw2 leads=%v in term %d, want the lease kept in term %d", gw2.IsLeader(), gw2.Term(), term)
	}
	if l := s.agreed("gw1", "gw2", "wit"); l != "" && l != "gw2" {
		t.Errorf("leader %s after the hold", l)
	}
}
