package duty

import (
	"context"
	"log/slog"
	"strconv"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// leaseClock follows this leadership's lease end from outside the agent's
// loop, so the duty is stopped in time even if the loop is stuck. Times are
// on the agent's monotonic clock (Lease.Now), as the lease is.
type leaseClock struct {
	l   Lease
	end time.Duration
}

// refresh moves the known lease end forward if the agent renewed it.
func (l *leaseClock) refresh() {
	if end, leading := l.l.LeaseEnd(); leading {
		l.end = max(l.end, end)
	}
}

// supervisor is one leadership's supervision of the command (supervise).
// Times are on the agent's monotonic clock.
type supervisor struct {
	d       *Duty
	ctx     context.Context
	log     *slog.Logger
	env     []string
	label   string
	term    uint64
	planned interface{ Load() bool }
	lc      leaseClock
	bo      *backoff.ExponentialBackOff

	// softLead: SIGTERM this long before the lease ends, if not renewed.
	// hardLead: SIGKILL this long (a tick) before it ends. poll: the
	// longest sleep.
	softLead, hardLead, poll time.Duration
	fast                     bool

	child     *dutyProc
	stopping  bool // SIGTERM sent
	killed    bool // SIGKILL sent
	killAt    time.Duration
	nextStart time.Duration
	starts    int
	resigned  bool // resigned, or must: the command is not started again
	why       string
	deadline  bool // SIGKILL sent because the lease deadline passed

	// This round's view (look).
	now, soft, hard time.Duration
	live, connDown  bool
	keep            bool
}

// supervise runs the command while ctx lives and the lease is not about to
// run out, restarting it with backoff, and resigns after repeated failures.
//
// Each run of the command has a guard (startDutyProc) that holds a deadline
// of its own, one tick before the lease ends, renewed here each time the
// lease is extended: if this goroutine, the loop or the whole agent stops,
// the guard kills the command's tree by then. A command killed because the
// lease deadline passed, by the guard or from here, is not started again
// in this term: the agent resigns instead if it still leads (its lease was
// renewed after all, as when a frozen agent wakes just in time), so that
// the duty does not come back on a leader that was not able to keep it.
//
// With fast failover the members may elect a successor the moment the
// server reports this leader's connection closed (a fence later its duty
// starts), so then the command is SIGKILLed at once when the connection is
// down or leadership ends other than by a planned handover (planned set):
// there is no time for a grace.
func (d *Duty) supervise(ctx context.Context, log *slog.Logger, term uint64, env []string, planned interface{ Load() bool }) {
	t := d.host.Timing
	s := &supervisor{d: d, ctx: ctx, log: log, env: env, planned: planned, lc: leaseClock{l: d.host.Lease},
		label:    d.host.ID + "/" + strconv.FormatUint(term, 10),
		term:     term,
		softLead: softLead(d.cfg.Grace, t.Heartbeat, t.Lease),
		hardLead: max(t.Tick, time.Millisecond),
		poll:     max(t.Tick, time.Millisecond),
		fast:     d.host.FastFailover,
		bo: backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(d.cfg.RestartBackoff),
			backoff.WithMaxInterval(d.cfg.MaxRestartBackoff),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0.2),
			backoff.WithMaxElapsedTime(0),
		),
	}
	s.lc.refresh()
	ctxDone := ctx.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		s.look()
		if !s.act() {
			return
		}
		timer.Reset(max(0, s.wake()-d.host.Lease.Now()))
		var exited chan struct{}
		if s.child != nil {
			exited = s.child.done
		}
		select {
		case <-ctxDone:
			ctxDone = nil
		case <-timer.C:
		case <-exited:
			s.exited()
		}
	}
}

// softLead is how long before the lease ends the command is stopped if the
// lease was not renewed. A healthy lease renews each heartbeat, so it gets
// down to about lease - heartbeat - the acknowledgement's delay; half of
// that slack goes to the command's grace, half to late acknowledgements
// (which must not stop the command). The lease is the one held now: a
// lease that a member's shorter D shortened leaves less slack, and a lead
// taken from the configured lease would stop the command between two
// renewals.
func softLead(grace, heartbeat, lease time.Duration) time.Duration {
	return max(0, min(grace, (lease-heartbeat)/2))
}

// guardAt gives the guard's deadlines (CLOCK_MONOTONIC) for a lease end:
// SIGTERM and SIGKILL when the agent itself would send them. The clock is
// read before Now: a delay between the two readings makes the result
// earlier, never later.
func (s *supervisor) guardAt(end time.Duration) (soft, hard int64) {
	cm := monoClock()
	now := s.d.host.Lease.Now()
	return cm + int64(end-s.softLead-now), cm + int64(end-s.hardLead-now)
}

// look takes this round's view of the lease, the connection and the
// leadership, and renews the guard's deadlines while the command may run.
func (s *supervisor) look() {
	s.now = s.d.host.Lease.Now()
	s.live = s.ctx.Err() == nil
	if s.live {
		s.lc.refresh()
	}
	s.softLead = softLead(s.d.cfg.Grace, s.d.host.Timing.Heartbeat, min(s.d.host.Timing.Lease, s.d.host.Lease.LeaseLength()))
	s.soft, s.hard = s.lc.end-s.softLead, s.lc.end-s.hardLead
	s.connDown = s.fast && !s.d.host.Lease.Connected()
	if s.connDown || (s.fast && !s.live && !s.planned.Load()) {
		s.hard = s.now // others may be electing already: no grace
	}
	s.keep = s.live && !s.connDown && s.now < s.soft && s.now < s.hard
	if s.child != nil && s.keep && !s.d.holdRenewals.Load() {
		s.child.renew(s.lc.end, s.guardAt)
	}
}

// act stops, kills or starts the command as this round's view asks; it
// returns false once the leadership is over and the command gone.
func (s *supervisor) act() bool {
	switch {
	case s.child != nil && !s.keep && !s.stopping:
		s.stop()
	case s.child != nil && s.stopping && !s.killed && s.now >= s.killAt:
		s.log.Warn("leader duty still running: killing it", "pid", s.child.pid.Load(), "reason", s.why)
		s.kill()
	case s.child == nil && !s.live:
		return false
	case s.child == nil && s.keep && !s.resigned && s.now >= s.nextStart && s.d.host.Lease.IsLeader():
		s.start()
	}
	return true
}

// stop sends the command SIGTERM, and SIGKILL at once if no grace is left.
func (s *supervisor) stop() {
	switch {
	case s.connDown:
		s.why = "NATS connection down (fast failover)"
	case !s.live:
		s.why = "leadership ended"
	default:
		s.why = "lease about to run out"
	}
	s.log.Info("stopping leader duty", "reason", s.why, "pid", s.child.pid.Load(), "grace", min(s.d.cfg.Grace, max(0, s.hard-s.now)))
	s.child.signal(syscall.SIGTERM)
	s.stopping, s.killAt = true, min(s.now+s.d.cfg.Grace, s.hard)
	if s.now >= s.killAt {
		s.kill()
	}
}

// kill sends the command SIGKILL, noting whether the lease deadline passed.
func (s *supervisor) kill() {
	s.child.signal(syscall.SIGKILL)
	s.killed = true
	s.deadline = s.live && !s.connDown && s.now >= s.lc.end-s.hardLead
}

// start starts one run of the command under its guard.
func (s *supervisor) start() {
	d := s.d
	soft, hard := s.guardAt(s.lc.end)
	vips, err := guardVIPArgs(d.cfg.VIP)
	var p *dutyProc
	if err == nil {
		run := dutyStart{argv: d.cfg.Command, vips: vips, env: s.env, dir: d.cfg.Dir, stdout: d.cfg.Stdout, stderr: d.cfg.Stderr,
			guard: d.cfg.GuardPath, label: s.label, soft: soft, deadline: hard, leaseEnd: s.lc.end, wg: &d.wg, log: s.log,
			vipHeld: d.host.VIPHeld, announced: d.host.Announced}
		ok := false
		if sb := d.takeStandby(); sb != nil {
			// A standby not given the run (it died, or the run cannot
			// start: the command is missing) is let go, not leaked.
			if ok, err = sb.activate(run, s.now); ok {
				p = sb
			} else {
				sb.close()
			}
		}
		if err == nil && !ok {
			p, err = startDutyProc(run, s.now)
		}
	}
	s.starts++
	if s.starts > 1 {
		d.host.Restarts()
	}
	if err != nil {
		s.log.Error("leader duty failed to start", "err", err)
		s.resigned, s.nextStart = d.failed(s.ctx, s.log, s.term, s.now, 0, s.bo)
		return
	}
	s.child, s.stopping, s.killed, s.deadline = p, false, false, false
	d.host.Running(true)
}

// wake returns when the next round is due.
func (s *supervisor) wake() time.Duration {
	wake := s.now + s.poll
	if s.keep {
		wake = min(wake, s.soft, s.hard)
	}
	if s.child != nil && s.stopping && !s.killed {
		wake = min(wake, s.killAt)
	}
	if s.child == nil && s.keep && !s.resigned && s.now < s.nextStart {
		wake = min(wake, s.nextStart)
	}
	return wake
}

// exited handles the end of the command's run (its whole tree gone).
func (s *supervisor) exited() {
	d, c := s.d, s.child
	d.host.Running(false)
	ran := d.host.Lease.Now() - c.started
	pid := c.pid.Load()
	s.child = nil
	switch {
	case c.expired || s.deadline:
		by := "the agent"
		if c.expired {
			by = "its guard"
		}
		s.log.Error("leader duty killed by "+by+": the lease deadline passed without renewal; not starting it again in this term",
			"pid", pid, "ran", ran, "exit", exitText(c.err))
		s.resigned = true
		if s.ctx.Err() == nil {
			// The lease was renewed after all: hand leadership on
			// rather than run the duty on a leader that lost hold of it.
			go d.resign(s.ctx, s.log, s.term, "resign after the duty's lease deadline")
		}
	case s.stopping || c.soft:
		// Stopped as asked, or by the guard's SIGTERM as the lease
		// was about to run out (the agent's own comes at the same
		// time): started again if the lease is renewed after all.
		s.log.Info("leader duty stopped", "pid", pid, "ran", ran, "exit", exitText(c.err), "by_guard", c.soft && !s.stopping)
	default:
		s.log.Warn("leader duty exited while leading", "pid", pid, "ran", ran, "exit", exitText(c.err))
		s.resigned, s.nextStart = d.failed(s.ctx, s.log, s.term, d.host.Lease.Now(), ran, s.bo)
	}
}
