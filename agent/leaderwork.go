package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// WithReleaseWait makes every planned handover (Resign, Transfer, a
// preemption hand-over, the handover when Run's context ends) wait, after
// the leading context is cancelled and before the successor is told to take
// over, until OnStartedLeading (and the duty, see WithDuty) returned: at most
// d, and never past the remaining lease. So a leader's work has stopped
// before anyone else starts it. The default is 0: the successor is told at
// once and OnStartedLeading must stop acting as soon as its context ends.
//
// While the agent waits, its loop sends no heartbeat. That is safe: the
// members suspect the leader only D after its last heartbeat, later than its
// lease ends, and the wait never outlasts the lease.
func WithReleaseWait(d time.Duration) Option {
	return func(a *Agent) error {
		a.work.releaseWait = max(a.work.releaseWait, d)
		return nil
	}
}

// startLeaderWork starts what runs while this agent leads: the
// OnStartedLeading callback (through the notifier, so it keeps its place
// among the callbacks) and the duty (on a goroutine of its own: a slow
// callback must not delay it). Both start once the fast-failover fence
// passed (see Config.Fence): a leader elected on a disconnect advisory does
// not act before then. It returns a channel closed once all of it returned,
// or nil if there is nothing to wait for.
func (a *Agent) startLeaderWork(ctx context.Context, term uint64) chan struct{} {
	a.work.leadPlanned = new(atomic.Bool)
	f := a.out.cb.OnStartedLeading
	if f == nil && a.work.duty == nil {
		return nil
	}
	fence := time.Duration(a.lease.actAfter.Load())
	var wg sync.WaitGroup
	if f != nil {
		wg.Add(1)
		a.out.notify.push(func() {
			go func() {
				defer wg.Done()
				a.waitFence(ctx, fence)
				f(ctx, term)
			}()
		})
	}
	if a.work.duty != nil {
		wg.Add(1)
		done := a.work.duty.Lead(ctx, term, a.work.leadPlanned, func() bool { return a.waitFence(ctx, fence) })
		go func() {
			<-done
			wg.Done()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// waitFence waits until the monotonic time fence (or ctx ends) and reports
// whether ctx is still live.
func (a *Agent) waitFence(ctx context.Context, fence time.Duration) bool {
	if wait := fence - a.mono(); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}

// release ends this agent's leadership on its side before a planned
// handover is announced: IsLeader turns false, the leading context is
// cancelled, and the leader's work gets up to the release wait, bounded by
// the remaining lease, to return. It reports whether the work returned (or
// there is none to wait for). If it did not, the caller withholds the
// RESIGN: the handover then happens as if this leader had died, the members
// electing a successor only D after its last heartbeat, which gives the
// work (a duty killed just before the lease ended, on a starved machine)
// that much longer to be gone before anyone else starts it.
func (a *Agent) release(why string) bool {
	budget := min(a.work.releaseWait, a.LeaseRemaining())
	if a.work.leadPlanned != nil {
		a.work.leadPlanned.Store(true) // the duty may stop gracefully
	}
	a.stopLeading(why)
	done := a.work.leadDone
	a.work.leadDone = nil
	if done == nil || a.work.releaseWait <= 0 {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	t := time.NewTimer(max(0, budget))
	defer t.Stop()
	start := a.mono()
	select {
	case <-done:
		a.log.Debug("leader work stopped before the handover", "took", a.mono()-start)
		return true
	case <-t.C:
		a.log.Warn("leader work still running when the lease ends: not announcing the handover; the members elect a successor once they miss the heartbeats",
			"waited", budget)
		return false
	}
}

// hasResign reports whether ms hand leadership over.
func hasResign(ms []election.Message) bool {
	for _, m := range ms {
		if m.Type == election.MsgResign {
			return true
		}
	}
	return false
}
