package chaos

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-agent/edge-agent/internal/harness"
)

// TestChaosSIGSTOP freezes the leader with SIGSTOP for 2, 5 and 10 times L,
// CHAOS_STOPS times each, then wakes it with SIGCONT and polls its /status
// as fast as it answers for 2*D: it must never report itself leader of the
// term it led before it was frozen (IsLeader checks the lease on the
// monotonic clock at call time, before the woken loop has run). The
// journals must show no overlap: the frozen leader's lease ends on its own,
// at most L after its last acknowledged heartbeat, whether or not the
// others elect a successor meanwhile.
//
// Measured: first_answer, from SIGCONT to the woken process's first /status
// answer; rejoin, from SIGCONT until all five agree on one leader;
// replaced_while_frozen, how many times another agent started leading while
// the old leader was frozen (its journal shows when); and
// lease_after_stop, from SIGSTOP to the end of the frozen leader's lease in
// its journal (must be at most L).
func TestChaosSIGSTOP(t *testing.T) {
	requireChaos(t)
	start := time.Now()
	k := harness.EnvCount(t, "CHAOS_STOPS", 3)
	w := newWorld(t, defaultTiming(t), worldOpts{})
	tm := w.tm
	type freeze struct {
		id             string
		term           uint64
		stopAt, contAt time.Time
		mult           int
	}
	var (
		freezes             []freeze
		firstAnswer, rejoin samples
		polls, woken        int
		violations          []string
	)
	for _, mult := range []int{2, 5, 10} {
		for i := 0; i < k; i++ {
			a, err := w.agree(w.ids, "", 0, 30*time.Second)
			if err != nil {
				t.Fatalf("x%d #%d: before the stop: %v", mult, i, err)
			}
			st, err := w.status(a.Leader)
			if err != nil || st.Role != "leader" {
				// A hand-over between the agreement and now: try again.
				i--
				continue
			}
			proc := w.site.Proc(a.Leader).Cmd.Process
			f := freeze{id: a.Leader, term: st.Term, mult: mult}
			if err := proc.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			// Taken after the signal: the process stopped no later than
			// this, even if this test was descheduled before sending it.
			f.stopAt = time.Now()
			time.Sleep(time.Duration(mult) * tm.L()) // hold the process frozen
			f.contAt = time.Now()
			if err := proc.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			// The others' agreement is polled alongside the woken process.
			type agreed struct {
				a   harness.Agreement
				err error
			}
			after := make(chan agreed, 1)
			go func() {
				b, err := w.agree(w.ids, "", 0, 30*time.Second)
				after <- agreed{b, err}
			}()
			answered := false
			for time.Since(f.contAt) < 2*tm.D() {
				st, err := w.status(f.id)
				if err != nil {
					continue
				}
				polls++
				if !answered {
					answered = true
					firstAnswer = append(firstAnswer, time.Since(f.contAt))
				}
				if st.Role == "leader" && st.Term == f.term {
					woken++
					violations = append(violations, fmt.Sprintf("%s frozen %dxL reported itself leader of term %d %s after SIGCONT",
						f.id, mult, f.term, ms(time.Since(f.contAt))))
					break
				}
			}
			if !answered {
				t.Fatalf("%s did not answer /status within 2D of SIGCONT", f.id)
			}
			r := <-after
			if r.err != nil {
				t.Fatalf("x%d #%d: after SIGCONT: %v", mult, i, r.err)
			}
			b := r.a
			rejoin = append(rejoin, b.At.Sub(f.contAt))
			t.Logf("x%-2d #%d: froze %s (term %d) for %s; then %s leads term %d, %s after SIGCONT",
				mult, i, f.id, f.term, time.Duration(mult)*tm.L(), b.Leader, b.Term, ms(b.At.Sub(f.contAt)))
			freezes = append(freezes, f)
			w.alive()
		}
	}
	rep, _ := w.journals()
	requireSafe(t, rep)
	var leaseAfter samples
	replaced := 0 // freezes during which another agent started leading
	leaseOver := 0
	for _, f := range freezes {
		for _, iv := range rep.Intervals {
			if iv.ID != f.id && iv.Start > f.stopAt.UnixNano() && iv.Start < f.contAt.UnixNano() {
				replaced++
				break
			}
		}
		iv, ok := leaseAt(rep, f.stopAt)
		if !ok || iv.ID != f.id {
			continue // the lease had just ended (a renewal was due)
		}
		d := time.Duration(iv.End - f.stopAt.UnixNano())
		leaseAfter = append(leaseAfter, d)
		if d > tm.L() {
			leaseOver++
			violations = append(violations, fmt.Sprintf("%s frozen at %s kept a lease %s after SIGSTOP (L = %s)",
				f.id, f.stopAt.Format("15:04:05.000"), ms(d), tm.L()))
		}
	}
	summary(t, "sigstop", w, start,
		fmt.Sprintf("stops=%d (2x,5x,10x L, %d each)", len(freezes), k), safety(rep),
		fmt.Sprintf("woken_reported_old_term_leader=%d status_polls_after_wake=%d", woken, polls),
		fmt.Sprintf("replaced_while_frozen=%d", replaced),
		firstAnswer.p50max("first_answer"), leaseAfter.p50max("lease_after_stop"),
		fmt.Sprintf("lease_after_stop_over_L=%d", leaseOver), rejoin.p50max("rejoin"))
	if len(violations) > 0 {
		t.Errorf("SAFETY VIOLATION:\n%s", strings.Join(violations, "\n"))
	}
}
