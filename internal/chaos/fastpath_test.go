package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/harness"
	"github.com/edge-agent/edge-agent/internal/journalcheck"
)

// statusSample is one /status answer: what an agent said about itself, and
// the interval in which it said it (IsLeader is evaluated in between).
type statusSample struct {
	id         string
	leader     bool
	term       uint64
	sent, recv time.Time
}

// sampleStatus polls every agent's /status round-robin, as fast as they
// answer, until the returned function is called; that returns the samples.
func (w *world) sampleStatus() func() []statusSample {
	var (
		mu  sync.Mutex
		out []statusSample
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, id := range w.site.Running() {
				p := w.site.Proc(id)
				if p == nil {
					continue
				}
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				sent := time.Now()
				st, err := p.Status(rctx)
				recv := time.Now()
				rcancel()
				if err != nil {
					continue
				}
				mu.Lock()
				out = append(out, statusSample{id: id, leader: st.Role == "leader", term: st.Term, sent: sent, recv: recv})
				mu.Unlock()
			}
		}
	}()
	return func() []statusSample {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// leaderOverlap looks in samples for two agents that both reported
// themselves leader at once: an answer "leader" from agent A that was
// asked after agent B had answered "leader", while B answered "leader"
// again after A's answer, with no B answer "not leader" in between. It
// returns the longest such stretch (A's answer window) and a description.
func leaderOverlap(samples []statusSample) (time.Duration, string) {
	byID := map[string][]statusSample{}
	for _, s := range samples {
		byID[s.id] = append(byID[s.id], s)
	}
	var worst time.Duration
	var what string
	for _, a := range samples {
		if !a.leader {
			continue
		}
		for id, bs := range byID {
			if id == a.id {
				continue
			}
			// B's last answer before A was asked, and first after A answered.
			var before, after *statusSample
			for i := range bs {
				b := &bs[i]
				if b.recv.Before(a.sent) {
					before = b
				}
				if after == nil && b.sent.After(a.recv) {
					after = b
				}
			}
			if before != nil && after != nil && before.leader && after.leader && before.term == after.term {
				if d := a.recv.Sub(before.recv); d > worst {
					worst = d
					what = fmt.Sprintf("%s said leader (term %d) between %s and %s while %s led term %d (said so at %s and %s)",
						a.id, a.term, a.sent.Format("15:04:05.000"), a.recv.Format("15:04:05.000"),
						id, before.term, before.recv.Format("15:04:05.000"), after.sent.Format("15:04:05.000"))
				}
			}
		}
	}
	return worst, what
}

// TestChaosFastPath runs the agents with the fast failover path on (the
// servers have a system account and the agents read its disconnect
// advisories) and hits the leader CHAOS_FAST_CYCLES times, in turn:
//
//   - kill: SIGKILL. The server reports the connection closed; the others
//     elect at once.
//   - reset: the leader's link is reset on both sides at once (Cut). The
//     server reports the close; the leader's client reads it at the same
//     moment and stops leading.
//
// It checks the journals (a SIGKILLed leader's lease is counted as ended
// once the process is known dead) and, independently, every agent's
// /status sampled during the fault: no two agents may report themselves
// leader at once. Measured: failover per kind, from the fault until all
// others agree on a new leader.
func TestChaosFastPath(t *testing.T) {
	requireChaos(t)
	runFastPath(t, "fast-path", []string{"kill", "reset"}, harness.EnvCount(t, "CHAOS_FAST_CYCLES", 8))
}

// TestChaosFastPathServerSideReset resets only the server's side of the
// leader's link (ResetServerSide: a NAT or firewall between gateway and bus
// that lost the connection's state resets the server's side and drops the
// gateway's packets). The server reports the leader's connection closed,
// but with reason "Read Error", not "Client Closed": the agents ignore it,
// since the old leader does not know its connection is gone and keeps its
// lease for up to L; the heartbeats decide. Measured: 0 overlap, and a
// failover at heartbeat speed.
func TestChaosFastPathServerSideReset(t *testing.T) {
	requireChaos(t)
	runFastPath(t, "fast-path-server-side-reset", []string{"server-side-reset"}, harness.EnvCount(t, "CHAOS_FAST_CYCLES", 8))
}

func runFastPath(t *testing.T, name string, kinds []string, n int) {
	start := time.Now()
	w := newWorld(t, defaultTiming(t), worldOpts{fast: true})
	failover := map[string]samples{}
	type kill struct {
		id             string
		term           uint64
		sent, returned time.Time
	}
	var (
		kills      []kill
		overlaps   []string
		statusPoll int
	)
	for i := 0; i < n; i++ {
		kind := kinds[i%len(kinds)]
		a, err := w.agree(w.ids, "", 0, 30*time.Second)
		if err != nil {
			t.Fatalf("cycle %d: before: %v", i, err)
		}
		var others []string
		for _, id := range w.ids {
			if id != a.Leader {
				others = append(others, id)
			}
		}
		stop := w.sampleStatus()
		t0 := time.Now()
		switch kind {
		case "kill":
			if err := w.site.Kill(a.Leader); err != nil {
				t.Fatal(err)
			}
			kills = append(kills, kill{id: a.Leader, term: a.Term, sent: t0, returned: time.Now()})
		case "reset":
			w.proxies[a.Leader].Cut()
		case "server-side-reset":
			w.proxies[a.Leader].ResetServerSide()
		}
		b, err := w.agree(others, a.Leader, a.Term, 30*time.Second)
		if err != nil {
			t.Fatalf("cycle %d (%s of %s): %v", i, kind, a.Leader, err)
		}
		failover[kind] = append(failover[kind], b.At.Sub(t0))
		time.Sleep(w.tm.L() + w.tm.H) // hold the fault past the old leader's lease
		ss := stop()
		statusPoll += len(ss)
		if d, what := leaderOverlap(ss); d > 0 {
			overlaps = append(overlaps, fmt.Sprintf("cycle %d %s: %s", i, kind, what))
		}
		w.healAll()
		if kind == "kill" {
			if _, err := w.site.Start(a.Leader); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("cycle %2d at %s: %-17s of %s (term %d): %s leads term %d after %s",
			i, t0.Format("15:04:05.000"), kind, a.Leader, a.Term, b.Leader, b.Term, ms(b.At.Sub(t0)))
		w.alive()
	}
	// A SIGKILLed leader is known dead once Kill returned, or earlier: when
	// any agent acted on the server's report that its connection closed (the
	// kernel closes a killed process's sockets after it stopped running).
	var dead []agent.JournalEntry
	for _, k := range kills {
		at := k.returned
		if r, ok := w.firstLog(k.sent, "leader's connection closed: electing now", "leader", k.id); ok && r.Before(at) {
			at = r
		}
		dead = append(dead, agent.JournalEntry{T: at.UnixNano(), ID: k.id, Event: "stop", Term: k.term, Reason: "SIGKILL (test)"})
	}
	_, es := w.journals()
	rep := journalcheck.Check(append(es, dead...), time.Now())
	requireSafe(t, rep)
	var fs []string
	for _, k := range kinds {
		fs = append(fs, failover[k].p50max("failover_"+strings.ReplaceAll(k, "-", "_")))
	}
	sort.Strings(overlaps)
	summary(t, name, w, start, fmt.Sprintf("cycles=%d", n), safety(rep),
		fmt.Sprintf("status_overlaps=%d status_polls=%d", len(overlaps), statusPoll), strings.Join(fs, " "))
	if len(overlaps) > 0 {
		t.Errorf("SAFETY VIOLATION: two agents reported themselves leader at once:\n%s", strings.Join(overlaps, "\n"))
	}
}
