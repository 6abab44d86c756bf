package duty

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// SelfGuardPath is the agent's own executable as a guard path (Linux).
const SelfGuardPath = defaultGuardPath

// Lease is what a duty knows of the agent it runs for: the agent's
// monotonic clock, its lease, its connection, and a way to hand leadership
// on. It must be safe for concurrent use: the duty reads it from its own
// goroutines, never from the agent's loop, so that a stuck loop cannot keep
// a duty running past the lease.
type Lease interface {
	// Now is the time on the agent's monotonic clock, on which lease ends
	// are given.
	Now() time.Duration
	// LeaseEnd returns when this agent's current lease ends, and false when
	// it does not lead.
	LeaseEnd() (end time.Duration, leading bool)
	// LeaseLength is how long the current lease runs from the heartbeat
	// it rests on: Timing.Lease, or less while a member whose D is too
	// short for it backs the lease (election.Message.Promise).
	LeaseLength() time.Duration
	// IsLeader reports whether this agent leads with a live lease now.
	IsLeader() bool
	// Connected reports whether the bus connections the members act on
	// are up (fast failover: a leader cut off may be replaced at once).
	Connected() bool
	// Resign hands on the leadership of term, as the operator's resign
	// does, waiting at most as long as a handover may take; a leadership
	// of another term (one that began since) is left alone.
	Resign(term uint64) error
}

// ErrAttached is Attach's error for a duty already attached to an agent.
var ErrAttached = errors.New("the duty is attached to another agent")

// DutyTiming implements Timed.
func (t Timing) DutyTiming() Timing { return t }

// Host is the agent a Duty is attached to.
type Host struct {
	ID, Group string
	Timing    Timing
	Lease     Lease
	// FastFailover: the members elect a successor the moment the server
	// reports this agent's connection closed, so the command is killed at
	// once, without a grace, when the connection is down or leadership
	// ends other than by a planned handover.
	FastFailover bool
	Log          *slog.Logger
	// Restarts is called at each start of the command after the first of
	// a leadership; Running when it starts (true) and when it is gone.
	Restarts func()
	Running  func(bool)
	// VIPHeld, if set, is called when the VIPs (Config.VIP) are added
	// (true) and when they are gone; Announced with the number of
	// announcements (gratuitous ARPs, neighbour advertisements) sent.
	VIPHeld   func(bool)
	Announced func(int)
}

// Duty supervises a Config's processes for one agent: see
// agent.WithDuty.
type Duty struct {
	cfg  Config
	host Host

	sem chan struct{} // held by the leadership whose processes run

	mu       sync.Mutex
	lastHook chan struct{}   // closed when the last queued hook finished
	failures []time.Duration // guarded by sem: when the command failed (agent's monotonic clock), within the window

	wg sync.WaitGroup // leaderships, guards and hooks in flight

	attached     atomic.Bool
	holdRenewals atomic.Bool

	standby standbyGuard // the guard of the next run, started ahead (Linux)
}

// New returns a supervisor for c. Attach binds it to an agent (and
// validates c against the agent's timing).
func New(c Config) *Duty {
	return &Duty{cfg: c, sem: make(chan struct{}, 1)}
}

// Attach validates d's configuration against h's timing and binds d to h.
// A duty is attached once.
func (d *Duty) Attach(h Host) error {
	if h.Lease == nil || h.Log == nil || h.Restarts == nil || h.Running == nil {
		return errors.New("duty: attach: incomplete host")
	}
	if d.attached.Load() {
		return ErrAttached
	}
	if err := d.cfg.Validate(h.Timing); err != nil {
		return err
	}
	d.attached.Store(true)
	d.host = h
	return nil
}

// Config returns the validated configuration (after Attach).
func (d *Duty) Config() Config { return d.cfg }

// Wait blocks until none of d's processes runs: the command of the last
// leadership has been stopped and the last hook has finished. Call it after
// the agent's Run returned, before the program exits.
func (d *Duty) Wait() { d.wg.Wait() }

// HoldRenewals stops (true) or resumes the renewals of the guard's
// deadlines, as if the agent were frozen while its lease is renewed: fault
// tests use it to show that the guard acts on its own.
func (d *Duty) HoldRenewals(hold bool) { d.holdRenewals.Store(hold) }

// Lead runs one leadership's duty in a goroutine of its own, once ready
// (which waits for the leadership's fence) returns true, and returns a
// channel closed when it returned. It is counted by Wait from the moment
// Lead is called, so Wait outlasts the command even if the agent's Run
// returns first. planned is set when the leadership ends by a planned
// handover: the command is then stopped with its grace.
func (d *Duty) Lead(ctx context.Context, term uint64, planned *atomic.Bool, ready func() bool) <-chan struct{} {
	done := make(chan struct{})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(done)
		if ready() {
			d.lead(ctx, term, planned)
		}
	}()
	return done
}

// lead runs one leadership's duty: OnElected, then Command under
// supervision until ctx ends or the lease is about to run out, then queues
// OnDemoted. Only one leadership's processes run at a time: a new one waits
// until the previous command is gone.
func (d *Duty) lead(ctx context.Context, term uint64, planned *atomic.Bool) {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-d.sem }()
	if ctx.Err() != nil {
		return
	}
	log := d.host.Log.With("term", term)
	// on_demoted runs for a leadership whose on_elected started (or, with
	// none, that got this far):
	// the hook chain orders the two, so began is set before on_demoted
	// reads it.
	began := false
	elected := d.queueHook(func() {
		if ctx.Err() != nil {
			return // over before it began
		}
		began = len(d.cfg.OnElected) == 0 || d.runHook(ctx, log, "on_elected", d.cfg.OnElected, d.env(term, "elected"))
	})
	defer d.queueHook(func() {
		if began {
			d.runHook(context.Background(), log, "on_demoted", d.cfg.OnDemoted, d.env(term, "demoted"))
		}
	})
	select {
	case <-elected:
	case <-ctx.Done():
		return
	}
	if len(d.cfg.Command) == 0 && len(d.cfg.VIP) == 0 {
		<-ctx.Done()
		return
	}
	d.supervise(ctx, log, term, d.env(term, ""), planned)
}

// failed records a failure of the command (an exit while leading, or a
// failed start) and decides: resign after MaxFailures within the window, or
// restart after the backoff.
func (d *Duty) failed(ctx context.Context, log *slog.Logger, term uint64, now, ran time.Duration, bo *backoff.ExponentialBackOff) (resigned bool, nextStart time.Duration) {
	if ran >= d.cfg.FailureWindow {
		bo.Reset()
	}
	kept := d.failures[:0]
	for _, t := range d.failures {
		if now-t < d.cfg.FailureWindow {
			kept = append(kept, t)
		}
	}
	d.failures = append(kept, now)
	if len(d.failures) >= d.cfg.MaxFailures {
		log.Error("leader duty keeps failing: resigning so that another gateway takes over",
			"failures", len(d.failures), "window", d.cfg.FailureWindow)
		// The failures stay counted: leadership that comes back within the
		// window (a preemption) resigns at the first failure.
		go d.resign(ctx, log, term, "resign after duty failures")
		return true, 0
	}
	wait := bo.NextBackOff()
	log.Info("restarting leader duty", "in", wait, "failures", len(d.failures))
	return false, now + wait
}

// resign hands the leadership of term on from a goroutine of the duty; a
// failure is logged (as what) while the leadership ctx still lives.
func (d *Duty) resign(ctx context.Context, log *slog.Logger, term uint64, what string) {
	if err := d.host.Lease.Resign(term); err != nil && ctx.Err() == nil {
		log.Warn(what, "err", err)
	}
}

// queueHook runs f after every hook queued before it, so that on_elected
// and on_demoted run in the order of the leaderships.
func (d *Duty) queueHook(f func()) <-chan struct{} {
	d.mu.Lock()
	prev := d.lastHook
	done := make(chan struct{})
	d.lastHook = done
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		f()
	}()
	return done
}

// runHook runs argv (if any) to completion, killing its process group when
// ctx ends or the hook timeout passes.
func (d *Duty) runHook(ctx context.Context, log *slog.Logger, name string, argv, env []string) (started bool) {
	if len(argv) == 0 {
		return false
	}
	hctx, cancel := context.WithTimeout(ctx, d.cfg.HookTimeout)
	defer cancel()
	cmd := exec.CommandContext(hctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, d.cfg.Dir, d.cfg.Stdout, d.cfg.Stderr
	cmd.SysProcAttr = dutySysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	start := d.host.Lease.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of its group
	}
	took := d.host.Lease.Now() - start
	switch {
	case hctx.Err() != nil && ctx.Err() == nil:
		log.Warn("hook timed out and was killed", "hook", name, "timeout", d.cfg.HookTimeout)
	case err != nil && ctx.Err() != nil:
		// Leadership ended while the hook ran (a handover, a shutdown, a
		// lost lease, each logged on its own): stopping it is the plan.
		log.Info("hook stopped: leadership ended", "hook", name, "took", took)
	case err != nil:
		log.Warn("hook failed", "hook", name, "took", took, "err", err)
	default:
		log.Info("hook ran", "hook", name, "took", took)
	}
	return cmd.Process != nil
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}
