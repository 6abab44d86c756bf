package duty

import (
	"sync"
	"time"
)

// standbyGuard keeps one duty guard started ahead of need (dutyguard's
// standby mode) while the agent runs: becoming leader then costs a few lines
// on the guard's control connection instead of a process start (an exec of
// the agent's 20 MB executable and its runtime's start-up: milliseconds on an
// idle gateway, tens of them on a loaded one), which is most of the time
// between "elected leader" and "virtual IPs held". The price is one idle
// process per agent whose duty has a command or VIPs (see
// docs/DESIGN-NOTES.md, "The duty guard").
//
// A standby holds nothing and starts nothing until it is given a run; if the
// agent dies it sees its connection close and exits. One that exits while
// idle (killed by someone: an operator, the OOM killer) is replaced, after
// standbyDelay doubled for each such exit in a row (at most 25.6 s, so a
// guard that cannot stay up costs a start every half minute, not a loop);
// one found dead when taken, before its exit was seen, costs that run its
// speed only: the run starts a guard of its own, as without a standby.
type standbyGuard struct {
	mu    sync.Mutex
	open  bool
	p     *dutyProc      // the guard ready for the next run; nil: none
	timer *time.Timer    // a start of the next standby, when due
	busy  sync.WaitGroup // refills in flight; added to only while open
	exits int            // standbys that exited idle since one was taken
}

// maxStandbyShift bounds the back-off after idle exits: standbyDelay << 8
// is 25.6 s.
const maxStandbyShift = 8

// standbyDelay is how long after a standby was taken its successor is
// started: not at once, when the new leader's own guard is adding its
// addresses and starting its command on the same CPUs.
const standbyDelay = 100 * time.Millisecond

// usesGuard reports whether the duty's runs go through a guard: Linux, a
// command or VIPs.
func (d *Duty) usesGuard() bool {
	return d.cfg.GuardPath != "" && (len(d.cfg.Command) > 0 || len(d.cfg.VIP) > 0)
}

// Prepare starts a standby guard for the duty's first run and keeps one
// ready after each run takes it, until the returned stop is called (the
// agent calls it when its Run returns, before Wait). Without a guard
// (hooks only, or not Linux) it does nothing.
func (d *Duty) Prepare() (stop func()) {
	if !d.usesGuard() {
		return func() {}
	}
	d.standby.mu.Lock()
	d.standby.open = true
	d.standby.mu.Unlock()
	d.refillStandby()
	return func() {
		d.standby.mu.Lock()
		p := d.standby.p
		d.standby.open, d.standby.p = false, nil
		if d.standby.timer != nil {
			d.standby.timer.Stop()
		}
		d.standby.mu.Unlock()
		// A refill under way sees open false and lets its guard go.
		d.standby.busy.Wait()
		if p != nil {
			p.close()
		}
	}
}

// takeStandby returns the standby guard for a run (nil: none), and has its
// successor started a little later.
func (d *Duty) takeStandby() *dutyProc {
	d.standby.mu.Lock()
	defer d.standby.mu.Unlock()
	p := d.standby.p
	d.standby.p = nil
	if p != nil {
		d.standby.exits = 0
	}
	if d.standby.open {
		d.refillAfter(standbyDelay)
	}
	return p
}

// refillAfter has refillStandby run after delay, in place of a start already
// due. The caller holds d.standby.mu.
func (d *Duty) refillAfter(delay time.Duration) {
	if d.standby.timer != nil {
		d.standby.timer.Stop()
	}
	d.standby.timer = time.AfterFunc(delay, d.refillStandby)
}

// refillStandby starts a standby guard unless one is ready or the agent
// stopped. The start runs outside the lock: a run taking the standby does
// not wait for it.
func (d *Duty) refillStandby() {
	d.standby.mu.Lock()
	need := d.standby.open && d.standby.p == nil
	if need {
		d.standby.busy.Add(1)
	}
	d.standby.mu.Unlock()
	if !need {
		return
	}
	defer d.standby.busy.Done()
	p, err := startStandby(d.cfg.GuardPath, d.host.ID+"/standby", d.cfg.Dir, d.cfg.Stdout, d.cfg.Stderr, &d.wg, d.standbyExited)
	if err != nil {
		// The run will start a guard of its own, and report why if that
		// fails too.
		d.host.Log.Debug("no standby duty guard", "err", err)
		return
	}
	d.standby.mu.Lock()
	keep := d.standby.open && d.standby.p == nil
	if keep {
		d.standby.p = p
	}
	d.standby.mu.Unlock()
	if !keep {
		p.close()
	}
}

// standbyExited is called when the standby guard p exited while idle and
// not let go by the agent: if it is still the one kept ready, another is
// started after the back-off.
func (d *Duty) standbyExited(p *dutyProc) {
	d.standby.mu.Lock()
	defer d.standby.mu.Unlock()
	if d.standby.p != p {
		return // taken by a run, or let go
	}
	d.standby.p = nil
	if !d.standby.open {
		return
	}
	d.standby.exits++
	delay := standbyDelay << min(d.standby.exits, maxStandbyShift)
	d.host.Log.Warn("standby duty guard exited while idle; starting another", "guard_pid", p.guardPid, "after", delay)
	d.refillAfter(delay)
}
