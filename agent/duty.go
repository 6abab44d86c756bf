package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/edge-agent/edge-agent/agent/duty"
)

// DutyConfig describes a leader duty run as OS processes (see duty.Config).
type DutyConfig = duty.Config

// Duty supervises a DutyConfig's processes for one agent (see duty.Duty).
type Duty = duty.Duty

// Environment variables a duty command and the hooks find set.
const (
	EnvElectionID    = duty.EnvElectionID
	EnvElectionGroup = duty.EnvElectionGroup
	EnvElectionTerm  = duty.EnvElectionTerm
	EnvElectionEvent = duty.EnvElectionEvent
)

// Defaults of DutyConfig.
const (
	DefaultHookTimeout       = duty.DefaultHookTimeout
	DefaultMaxFailures       = duty.DefaultMaxFailures
	DefaultFailureWindow     = duty.DefaultFailureWindow
	DefaultRestartBackoff    = duty.DefaultRestartBackoff
	DefaultMaxRestartBackoff = duty.DefaultMaxRestartBackoff
)

// NewDuty returns a supervisor for c. WithDuty attaches it to an agent
// (and validates c against the agent's configuration).
func NewDuty(c DutyConfig) *Duty { return duty.New(c) }

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
		a.work.duty = d
		return nil
	}
}

// attachDuty binds the duty to the agent once every option is applied (the
// duty acts on the bus the options chose).
func (a *Agent) attachDuty() error {
	if a.work.duty == nil {
		return nil
	}
	if a.cfg.IsWitness(a.cfg.ID) {
		return fmt.Errorf("agent: WithDuty: %q is a witness: it never leads, so it runs no duty", a.cfg.ID)
	}
	h := duty.Host{
		ID: a.cfg.ID, Group: a.cfg.Group,
		Timing:       a.cfg.DutyTiming(),
		Lease:        dutyLease{a},
		FastFailover: !a.fast.noFast && a.in.bus.FastPath(),
		Log:          a.log,
		// The metrics are made after the duty is checked.
		Restarts: func() { a.m.dutyRestarts.Inc(); a.work.dutyState.restarts.Add(1) },
		Running: func(on bool) {
			boolGauge(a.m.dutyRunning, on)
			a.work.dutyState.running.Store(on)
			if a.out.dutyHook != nil {
				a.out.dutyHook(on)
			}
		},
	}
	a.attachVIP(&h, a.work.duty.Config().VIP)
	err := a.work.duty.Attach(h)
	switch {
	case errors.Is(err, duty.ErrAttached):
		return fmt.Errorf("agent: WithDuty: %w", err)
	case err != nil:
		return fmt.Errorf("agent: duty: %w", err)
	}
	// A handover waits for the command to be gone, up to the end of the
	// lease: SIGTERM, SIGKILL after the grace or a tick before the lease
	// ends, and the reaping.
	a.work.releaseWait = max(a.work.releaseWait, a.cfg.Lease)
	return nil
}

// DutyTiming returns the timing a leader duty is checked against and paced
// by (duty.Timed).
func (c Config) DutyTiming() duty.Timing {
	return duty.Timing{Tick: c.Tick(), Heartbeat: c.Heartbeat, Lease: c.Lease}
}

// dutyLease is the agent as its duty sees it (duty.Lease). It reads only
// what is safe without the loop.
type dutyLease struct{ a *Agent }

func (l dutyLease) Now() time.Duration { return l.a.mono() }

func (l dutyLease) LeaseEnd() (time.Duration, bool) {
	leading := l.a.lease.leading.Load()
	return time.Duration(l.a.lease.leaseEnd.Load()), leading
}

func (l dutyLease) LeaseLength() time.Duration {
	if n := l.a.lease.leaseLen.Load(); n > 0 {
		return time.Duration(n)
	}
	return l.a.cfg.Lease
}

func (l dutyLease) IsLeader() bool  { return l.a.IsLeader() }
func (l dutyLease) Connected() bool { return l.a.in.bus.Up(l.a.lease.term.Load()) }

func (l dutyLease) Resign(term uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.a.cfg.SuspectAfter()+l.a.work.releaseWait)
	defer cancel()
	return l.a.ask(ctx, request{term: term})
}

// dutyState is the duty's state as status reports it, kept beside the
// metrics by the duty's callbacks.
type dutyState struct {
	running  atomic.Bool
	restarts atomic.Uint64
}

// report is the duty's state for status, nil without a duty.
func (s *dutyState) report(configured bool) *DutyReport {
	if !configured {
		return nil
	}
	return &DutyReport{Running: s.running.Load(), Restarts: s.restarts.Load()}
}
