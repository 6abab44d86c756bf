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

	"github.com/prometheus/client_golang/prometheus/testutil"

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

// newStallingSite starts members (witnesses among them), electing with
// alg, on an in-memory network, each on a stallingTransport.
// OnStoppedLeading records "stopped"; with work, the members have leader
// work: OnStartedLeading records "started TERM" and, when its context
// ends, "ctx done".
func newStallingSite(t *testing.T, alg string, members []election.Member, work bool, witnesses ...string) (*testSite, map[string]*stallingTransport) {
	s := &testSite{t: t, net: NewMemNetwork(), agents: map[string]*Agent{}, cancel: map[string]context.CancelFunc{},
		done: map[string]chan error{}, rec: map[string]*recorder{}}
	stalls := map[string]*stallingTransport{}
	for _, m := range members {
		cfg := Config{ID: m.ID, Group: "site", Members: members, Witnesses: witnesses, Algorithm: alg,
			Heartbeat: 50 * time.Millisecond, StateDir: t.TempDir(), HoldDown: time.Hour}
		tr := &stallingTransport{Transport: s.net.Join(m.ID)}
		rec := &recorder{}
		cb := Callbacks{OnStoppedLeading: func() { rec.add("stopped") }}
		if work {
			cb.OnStartedLeading = func(ctx context.Context, term uint64) {
				rec.add(fmt.Sprintf("started %d", term))
				<-ctx.Done()
				rec.add("ctx done")
			}
		}
		a, err := New(cfg, WithTransport(tr), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithCallbacks(cb))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		s.agents[m.ID], s.cancel[m.ID], s.done[m.ID], s.rec[m.ID], stalls[m.ID] = a, cancel, done, rec, tr
	}
	t.Cleanup(func() {
		for id := range s.cancel {
			s.stop(id)
		}
	})
	return s, stalls
}

// working reports whether id's leader work of its current term runs: the
// last thing its callbacks recorded is the start of that term's work.
func (s *testSite) working(id string) bool {
	l := s.rec[id].list()
	return len(l) > 0 && l[len(l)-1] == fmt.Sprintf("started %d", s.agents[id].Term())
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
//
// The agents have no leader work here: with some, the lease guard ends it
// at the end of N-1's lease all the same (it cannot know of the waiting
// acknowledgement), and the leader then hands over rather than lead on
// without it (TestAgentDoesNotLeadOnWithoutItsWork).
func TestAgentLeaseCountsQueuedAcknowledgements(t *testing.T) {
	synctest.Test(t, testAgentLeaseCountsQueuedAcknowledgements)
}

func testAgentLeaseCountsQueuedAcknowledgements(t *testing.T) {
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "wit", Priority: 3}}
	s, stalls := newStallingSite(t, AlgorithmBully, members, false, "wit")
	waitFor(t, 5*time.Second, "gw2 to lead", func() bool { return s.agreed("gw1", "gw2", "wit") == "gw2" })

	// The gateways are cut apart: gw2's lease rests on the witness alone.
	s.net.Cut("gw1", "gw2")
	gw2 := s.agents["gw2"]
	stall(gw2.cfg.SuspectAfter() + 2*gw2.cfg.Heartbeat)
	if !gw2.IsLeader() {
		t.Fatalf("gw2 lost its lease to the cut alone: %s", strings.Join(s.rec["gw2"].list(), ", "))
	}
	term := gw2.Term()
	before := len(s.rec["gw2"].list())
	holdPastLease(t, gw2, stalls["gw2"])

	if got := s.rec["gw2"].list()[before:]; len(got) != 0 {
		t.Errorf("held %s after heartbeat %d, gw2 did %v: it judged its lease before counting the acknowledgement waiting for it",
			stalls["gw2"].stall, stalls["gw2"].held.Load(), got)
	}
	if !gw2.IsLeader() || gw2.Term() != term {
		t.Errorf("after the hold gw2 leads=%v in term %d, want the lease kept in term %d", gw2.IsLeader(), gw2.Term(), term)
	}
	if l := s.agreed("gw1", "gw2", "wit"); l != "" && l != "gw2" {
		t.Errorf("leader %s after the hold", l)
	}
}

// TestAgentDoesNotLeadOnWithoutItsWork: a leader's loop is held past the
// end of its lease while the acknowledgements that renew it wait in the
// mailbox. The lease guard ends the leader's work at the lease end (the
// callbacks' context; the duty is killed then); the loop, back, counts the
// acknowledgements and finds the lease renewed. The leader must not go on
// leading without its work (a site led by a gateway whose duty is gone for
// the rest of the term, as a fault test once saw): it hands over, and the
// site is led by a member whose work runs.
func TestAgentDoesNotLeadOnWithoutItsWork(t *testing.T) {
	for _, alg := range []string{AlgorithmBully, AlgorithmRing} {
		t.Run(alg, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testAgentDoesNotLeadOnWithoutItsWork(t, alg) })
		})
	}
}

func testAgentDoesNotLeadOnWithoutItsWork(t *testing.T, alg string) {
	members := []election.Member{{ID: "gw1", Priority: 1}, {ID: "gw2", Priority: 2}, {ID: "gw3", Priority: 3}}
	s, stalls := newStallingSite(t, alg, members, true)
	ids := []string{"gw1", "gw2", "gw3"}
	waitFor(t, 5*time.Second, "a leader", func() bool { return s.agreed(ids...) != "" })
	old := s.agreed(ids...)
	a := s.agents[old]
	term := a.Term()
	holdPastLease(t, a, stalls[old])
	waitFor(t, 5*time.Second, "a leader with its work running", func() bool {
		l := s.agreed(ids...)
		return l != "" && s.working(l)
	})
	// A handover, counted as the lease's end that caused it.
	expired, resigned := testutil.ToFloat64(a.m.stepDowns.WithLabelValues("lease_expired")), testutil.ToFloat64(a.m.stepDowns.WithLabelValues("resigned"))
	if expired != 1 || resigned != 0 || a.Term() == term && a.IsLeader() {
		t.Errorf("%s: step-downs lease_expired %v resigned %v, leads=%v in term %d (was %d); its callbacks: %v",
			old, expired, resigned, a.IsLeader(), a.Term(), term, s.rec[old].list())
	}
}

// holdPastLease holds a's loop, once it sent its next heartbeat N, past the
// end of the lease that heartbeat N-1 dated (sent H before N) and half a
// heartbeat before the end of N's, then lets two heartbeats pass.
func holdPastLease(t *testing.T, a *Agent, held *stallingTransport) {
	t.Helper()
	held.stall = a.cfg.Lease - a.cfg.Heartbeat/2
	if held.stall <= a.cfg.Lease-a.cfg.Heartbeat {
		t.Fatalf("lease %s, heartbeat %s: no room for the stall", a.cfg.Lease, a.cfg.Heartbeat)
	}
	held.armed.Store(true)
	waitFor(t, 5*time.Second, "the loop to be held after a heartbeat", func() bool { return held.held.Load() != 0 })
	stall(2 * a.cfg.Heartbeat)
}
