package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Environment variables a duty command and the hooks find set.
const (
	EnvElectionID    = "EDGE_ELECTION_ID"    // this agent's member id
	EnvElectionGroup = "EDGE_ELECTION_GROUP" // the election group
	EnvElectionTerm  = "EDGE_ELECTION_TERM"  // the term of this leadership: the fencing token
	EnvElectionEvent = "EDGE_ELECTION_EVENT" // hooks only: "elected" or "demoted"
)

// Defaults of DutyConfig.
const (
	DefaultHookTimeout       = 10 * time.Second
	DefaultMaxFailures       = 5
	DefaultFailureWindow     = time.Minute
	DefaultRestartBackoff    = 250 * time.Millisecond
	DefaultMaxRestartBackoff = 30 * time.Second
)

// DutyConfig describes a leader duty run as OS processes: a long-running
// Command that runs only while this agent leads, and one-shot hooks.
type DutyConfig struct {
	// Command is the program and its arguments (no shell; use
	// ["sh", "-c", "..."] for one). It is started once this agent leads,
	// under a duty guard (Linux; see GuardPath) that holds every process
	// it starts; it is stopped (SIGTERM to all of them, then SIGKILL after
	// Grace) when this agent stops leading, and killed at the latest one
	// tick before the lease runs out, even if the agent is stuck, frozen or
	// dead. When the command exits, whatever it left running is killed. It
	// is restarted with backoff if it exits while this agent leads, but
	// never again in a term whose lease deadline killed it. Empty: no
	// command, hooks only.
	Command []string
	// Grace is how long the command gets between SIGTERM and SIGKILL. It
	// must be shorter than the lease. When leadership ends because the lease
	// runs out, the command gets SIGTERM min(Grace, (lease - heartbeat)/2)
	// before the lease ends (a healthy lease does not run that low) and
	// SIGKILL one tick before it ends. 0 picks lease - heartbeat - 1 tick.
	Grace time.Duration
	// OnElected runs once when this agent becomes leader, before Command
	// starts; it is killed if leadership ends while it runs.
	OnElected []string
	// OnDemoted runs once when this agent stops leading, after Command
	// stopped, for every leadership whose OnElected ran. The handover does
	// not wait for it; hooks run one at a time, in order.
	OnDemoted []string
	// HookTimeout bounds each run of OnElected and OnDemoted; the hook's
	// process group is killed then. 0 picks DefaultHookTimeout.
	HookTimeout time.Duration
	// MaxFailures is how many times Command may exit (or fail to start)
	// while this agent leads, within FailureWindow, before the agent resigns
	// so that a healthier gateway takes over. 0 picks DefaultMaxFailures.
	MaxFailures int
	// FailureWindow is the period over which failures are counted; a run
	// that lasted longer also resets the restart backoff. 0 picks
	// DefaultFailureWindow.
	FailureWindow time.Duration
	// RestartBackoff is the first wait before Command is restarted; it
	// doubles (with jitter) up to MaxRestartBackoff. 0 picks the defaults.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// Env adds to the environment of Command and the hooks: KEY=VALUE sets
	// KEY, a bare KEY passes the agent's own value of KEY (if it has one).
	// They do not inherit the agent's environment: they get its PATH, HOME,
	// USER, LOGNAME, SHELL, LANG, LANGUAGE, LC_*, TZ and TMPDIR (a default
	// PATH if it has none), then Env, then the EDGE_ELECTION_* variables.
	// NOTIFY_SOCKET, WATCHDOG_*, LISTEN_* and EDGE_ELECTION_* cannot be set.
	Env []string
	// GuardPath is the executable of the duty guard, the process that
	// runs Command and kills everything it started when the lease deadline
	// passes or the agent dies. Any program that imports this package is
	// one: it turns into the guard, before its main runs, when started as
	// such. "" picks the agent's own executable (/proc/self/exe). Without
	// Linux there is no guard and Command runs as the agent's child.
	GuardPath string
	// Dir is the working directory ("" = the agent's).
	Dir string
	// Stdout and Stderr receive the output of Command and the hooks (nil
	// discards it). An *os.File is passed to the child as is.
	Stdout, Stderr io.Writer
}

// Validate fills defaults and checks c against the agent's validated
// configuration ac (Grace must be shorter than its lease). The error names
// the offending key as the config file spells it (leader.grace, ...).
func (c *DutyConfig) Validate(ac Config) error {
	for key, argv := range map[string][]string{"leader.command": c.Command, "leader.on_elected": c.OnElected, "leader.on_demoted": c.OnDemoted} {
		if len(argv) > 0 && argv[0] == "" {
			return fmt.Errorf("%s: the program (first element) is empty", key)
		}
	}
	if err := checkDutyEnv(c.Env); err != nil {
		return err
	}
	if c.GuardPath == "" {
		c.GuardPath = guardPathDefault
	}
	tick := ac.Tick()
	if c.Grace == 0 {
		c.Grace = max(tick, ac.Lease-ac.Heartbeat-tick)
	}
	if c.Grace < 0 || c.Grace >= ac.Lease {
		return fmt.Errorf("leader.grace: %s must be positive and shorter than the lease %s, so that the duty never outlives leadership", c.Grace, ac.Lease)
	}
	if c.HookTimeout == 0 {
		c.HookTimeout = DefaultHookTimeout
	}
	if c.HookTimeout < 0 {
		return fmt.Errorf("leader.hook_timeout: %s is negative", c.HookTimeout)
	}
	if c.MaxFailures == 0 {
		c.MaxFailures = DefaultMaxFailures
	}
	if c.MaxFailures < 1 {
		return fmt.Errorf("leader.max_failures: %d is not positive", c.MaxFailures)
	}
	if c.FailureWindow == 0 {
		c.FailureWindow = DefaultFailureWindow
	}
	if c.FailureWindow < 0 {
		return fmt.Errorf("leader.failure_window: %s is negative", c.FailureWindow)
	}
	if c.RestartBackoff == 0 {
		c.RestartBackoff = DefaultRestartBackoff
	}
	if c.MaxRestartBackoff == 0 {
		c.MaxRestartBackoff = max(DefaultMaxRestartBackoff, c.RestartBackoff)
	}
	if c.RestartBackoff < 0 || c.MaxRestartBackoff < c.RestartBackoff {
		return fmt.Errorf("leader: restart backoff %s..%s is not a valid range", c.RestartBackoff, c.MaxRestartBackoff)
	}
	return nil
}

// guardPathDefault is DutyConfig.GuardPath's default (tests point it at a
// guard built without the race detector, which runs several times faster).
var guardPathDefault = defaultGuardPath

// Duty supervises a DutyConfig's processes for one agent: see WithDuty.
type Duty struct {
	cfg DutyConfig
	a   *Agent

	sem chan struct{} // held by the leadership whose processes run

	mu       sync.Mutex
	lastHook chan struct{}   // closed when the last queued hook finished
	failures []time.Duration // guarded by sem: when the command failed (agent's monotonic clock), within the window

	wg sync.WaitGroup // leaderships, guards and hooks in flight

	// holdRenewals stops the guard's renewals (tests: a guard that expires
	// while the lease is renewed, as when the agent was frozen).
	holdRenewals atomic.Bool
}

// NewDuty returns a supervisor for c. WithDuty attaches it to an agent
// (and validates c against the agent's configuration).
func NewDuty(c DutyConfig) *Duty {
	return &Duty{cfg: c, sem: make(chan struct{}, 1)}
}

// WithDuty makes the agent run d's command and hooks while it leads. A
// planned handover waits for the command to be gone (SIGTERM, SIGKILL after
// the grace) before the successor is told to take over, so the command never
// runs on two gateways at once. If it is not gone when the lease ends, the
// handover is not announced at all and the members elect a successor after
// D, as if this leader had died. See DutyConfig for the other cases.
func WithDuty(d *Duty) Option {
	return func(a *Agent) error {
		if d == nil {
			return errors.New("agent: WithDuty: nil duty")
		}
		if d.a != nil {
			return errors.New("agent: WithDuty: the duty is attached to another agent")
		}
		if err := d.cfg.Validate(a.cfg); err != nil {
			return fmt.Errorf("agent: duty: %w", err)
		}
		d.a = a
		a.duty = d
		// A handover waits for the command to be gone, up to the end of the
		// lease: SIGTERM, SIGKILL after the grace or a tick before the lease
		// ends, and the reaping.
		a.releaseWait = max(a.releaseWait, a.cfg.Lease)
		return nil
	}
}

// Config returns the validated configuration (after WithDuty).
func (d *Duty) Config() DutyConfig { return d.cfg }

// Wait blocks until none of d's processes runs: the command of the last
// leadership has been stopped and the last hook has finished. Call it after
// the agent's Run returned, before the program exits.
func (d *Duty) Wait() { d.wg.Wait() }

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
	log := d.a.log.With("term", term)
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
	if len(d.cfg.Command) == 0 {
		<-ctx.Done()
		return
	}
	d.supervise(ctx, log, term, d.env(term, ""), planned)
}

// leaseClock follows this leadership's lease end from outside the agent's
// loop, so the duty is stopped in time even if the loop is stuck. Times are
// on the agent's monotonic clock (Agent.mono), as the lease is.
type leaseClock struct {
	a   *Agent
	end time.Duration
}

// refresh moves the known lease end forward if the agent renewed it.
func (l *leaseClock) refresh() {
	if !l.a.leading.Load() {
		return
	}
	l.end = max(l.end, time.Duration(l.a.leaseEnd.Load()))
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
func (d *Duty) supervise(ctx context.Context, log *slog.Logger, term uint64, env []string, planned *atomic.Bool) {
	tick := d.a.cfg.Tick()
	// softLead: SIGTERM this long before the lease ends, if not renewed. A
	// healthy lease renews each heartbeat, so it gets down to about
	// lease - heartbeat - the acknowledgement's delay; half of that slack
	// goes to the command's grace, half to late acknowledgements (which
	// must not stop the command).
	softLead := max(0, min(d.cfg.Grace, (d.a.cfg.Lease-d.a.cfg.Heartbeat)/2))
	// hardLead: SIGKILL this long (a tick) before the lease ends.
	hardLead := max(tick, time.Millisecond)
	poll := max(tick, time.Millisecond)
	fast := !d.a.noFast && (d.a.nc != nil || d.a.routes != nil)
	lc := leaseClock{a: d.a}
	lc.refresh()
	// guardAt gives the guard's deadlines for a lease end: SIGTERM and
	// SIGKILL when the agent itself would send them.
	guardAt := func(end time.Duration) (soft, hard int64) {
		return d.a.monoDeadline(end - softLead), d.a.monoDeadline(end - hardLead)
	}
	label := d.a.cfg.ID + "/" + strconv.FormatUint(term, 10)

	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(d.cfg.RestartBackoff),
		backoff.WithMaxInterval(d.cfg.MaxRestartBackoff),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.2),
		backoff.WithMaxElapsedTime(0),
	)
	var (
		child     *dutyProc
		stopping  bool          // SIGTERM sent
		killed    bool          // SIGKILL sent
		killAt    time.Duration // all on the agent's monotonic clock
		nextStart time.Duration
		starts    int
		resigned  bool // resigned, or must: the command is not started again
		why       string
		deadline  bool // SIGKILL sent because the lease deadline passed
	)
	ctxDone := ctx.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := d.a.mono()
		live := ctx.Err() == nil
		if live {
			lc.refresh()
		}
		soft, hard := lc.end-softLead, lc.end-hardLead
		connDown := fast && !d.a.busUp()
		if connDown || (fast && !live && !planned.Load()) {
			hard = now // others may be electing already: no grace
		}
		keep := live && !connDown && now < soft && now < hard
		if child != nil && keep && !d.holdRenewals.Load() {
			child.renew(lc.end, guardAt)
		}
		switch {
		case child != nil && !keep && !stopping:
			switch {
			case connDown:
				why = "NATS connection down (fast failover)"
			case !live:
				why = "leadership ended"
			default:
				why = "lease about to run out"
			}
			log.Info("stopping leader duty", "reason", why, "pid", child.pid.Load(), "grace", min(d.cfg.Grace, max(0, hard-now)))
			child.signal(syscall.SIGTERM)
			stopping, killAt = true, min(now+d.cfg.Grace, hard)
			if now >= killAt {
				child.signal(syscall.SIGKILL)
				killed = true
				deadline = live && !connDown && now >= lc.end-hardLead
			}
		case child != nil && stopping && !killed && now >= killAt:
			log.Warn("leader duty still running: killing it", "pid", child.pid.Load(), "reason", why)
			child.signal(syscall.SIGKILL)
			killed = true
			deadline = live && !connDown && now >= lc.end-hardLead
		case child == nil && !live:
			return
		case child == nil && keep && !resigned && now >= nextStart && d.a.IsLeader():
			soft, hard := guardAt(lc.end)
			p, err := startDutyProc(dutyStart{argv: d.cfg.Command, env: env, dir: d.cfg.Dir, stdout: d.cfg.Stdout, stderr: d.cfg.Stderr,
				guard: d.cfg.GuardPath, label: label, soft: soft, deadline: hard, leaseEnd: lc.end, wg: &d.wg, log: log}, now)
			starts++
			if starts > 1 {
				d.a.m.dutyRestarts.Inc()
			}
			if err != nil {
				log.Error("leader duty failed to start", "err", err)
				resigned, nextStart = d.failed(ctx, log, now, 0, bo)
				continue
			}
			child, stopping, killed, deadline = p, false, false, false
			d.a.m.dutyRunning.Set(1)
		}

		wake := now + poll
		if keep {
			wake = min(wake, soft, hard)
		}
		if child != nil && stopping && !killed {
			wake = min(wake, killAt)
		}
		if child == nil && keep && !resigned && now < nextStart {
			wake = min(wake, nextStart)
		}
		timer.Reset(max(0, wake-d.a.mono()))
		var exited chan struct{}
		if child != nil {
			exited = child.done
		}
		select {
		case <-ctxDone:
			ctxDone = nil
		case <-timer.C:
		case <-exited:
			d.a.m.dutyRunning.Set(0)
			ran := d.a.mono() - child.started
			pid := child.pid.Load()
			switch {
			case child.expired || deadline:
				by := "the agent"
				if child.expired {
					by = "its guard"
				}
				log.Error("leader duty killed by "+by+": the lease deadline passed without renewal; not starting it again in this term",
					"pid", pid, "ran", ran, "exit", exitText(child.err))
				child, resigned = nil, true
				if ctx.Err() == nil {
					// The lease was renewed after all: hand leadership on
					// rather than run the duty on a leader that lost hold of it.
					go func() {
						rctx, cancel := context.WithTimeout(context.Background(), d.a.cfg.SuspectAfter()+d.a.releaseWait)
						defer cancel()
						if err := d.a.Resign(rctx); err != nil && ctx.Err() == nil {
							log.Warn("resign after the duty's lease deadline", "err", err)
						}
					}()
				}
			case stopping || child.soft:
				// Stopped as asked, or by the guard's SIGTERM as the lease
				// was about to run out (the agent's own comes at the same
				// time): started again if the lease is renewed after all.
				log.Info("leader duty stopped", "pid", pid, "ran", ran, "exit", exitText(child.err), "by_guard", child.soft && !stopping)
				child = nil
			default:
				log.Warn("leader duty exited while leading", "pid", pid, "ran", ran, "exit", exitText(child.err))
				child = nil
				resigned, nextStart = d.failed(ctx, log, d.a.mono(), ran, bo)
			}
		}
	}
}

// failed records a failure of the command (an exit while leading, or a
// failed start) and decides: resign after MaxFailures within the window, or
// restart after the backoff.
func (d *Duty) failed(ctx context.Context, log *slog.Logger, now, ran time.Duration, bo *backoff.ExponentialBackOff) (resigned bool, nextStart time.Duration) {
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
		go func() {
			rctx, cancel := context.WithTimeout(context.Background(), d.a.cfg.SuspectAfter()+d.a.releaseWait)
			defer cancel()
			if err := d.a.Resign(rctx); err != nil && ctx.Err() == nil {
				log.Warn("resign after duty failures", "err", err)
			}
		}()
		return true, 0
	}
	wait := bo.NextBackOff()
	log.Info("restarting leader duty", "in", wait, "failures", len(d.failures))
	return false, now + wait
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
	start := d.a.mono()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of its group
	}
	took := d.a.mono() - start
	switch {
	case hctx.Err() != nil && ctx.Err() == nil:
		log.Warn("hook timed out and was killed", "hook", name, "timeout", d.cfg.HookTimeout)
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
