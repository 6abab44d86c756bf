package edge

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Health is what SystemdNotifier watches; *agent.Agent satisfies it.
type Health interface {
	// Healthy reports whether the election loop ran recently.
	Healthy() bool
	// Ready reports whether the agent has joined its group: connected and
	// a leader known.
	Ready() bool
}

// leaderReporter is the optional part of Health that STATUS= lines use.
type leaderReporter interface {
	Leader() string
	Term() uint64
}

// DefaultNotifyPoll is how often SystemdNotifier checks the agent.
const DefaultNotifyPoll = 100 * time.Millisecond

// SystemdNotifier speaks the sd_notify protocol for a Type=notify unit:
// READY=1 once the agent has joined its group, WATCHDOG=1 pings while (and
// only while) the agent's election loop is healthy, STATUS= lines with the
// known leader, and STOPPING=1 when shutdown begins. A loop that is stuck
// stops the pings, and systemd restarts the service when WatchdogSec runs
// out. Outside systemd (no NOTIFY_SOCKET) it does nothing.
type SystemdNotifier struct {
	// Poll is how often Run checks the agent (DefaultNotifyPoll when 0).
	Poll time.Duration

	log      *slog.Logger
	watchdog time.Duration // WATCHDOG_USEC, 0 when the watchdog is off
	enabled  bool

	ready    bool
	lastPing time.Time // monotonic
	status   string
}

// NewSystemdNotifier reads NOTIFY_SOCKET and WATCHDOG_USEC (and
// WATCHDOG_PID) from the environment. log may be nil.
func NewSystemdNotifier(log *slog.Logger) (*SystemdNotifier, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &SystemdNotifier{log: log}
	wd, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return nil, fmt.Errorf("edge: systemd watchdog: %w", err)
	}
	n.watchdog = wd
	n.enabled = os.Getenv("NOTIFY_SOCKET") != ""
	return n, nil
}

// Enabled reports whether systemd asked for notifications (NOTIFY_SOCKET).
func (n *SystemdNotifier) Enabled() bool { return n.enabled }

// Watchdog returns the watchdog timeout systemd set, 0 when it is off.
func (n *SystemdNotifier) Watchdog() time.Duration { return n.watchdog }

// Run notifies systemd about h until ctx ends, then sends STOPPING=1 and
// returns. It returns at once when systemd asked for nothing.
func (n *SystemdNotifier) Run(ctx context.Context, h Health) {
	if !n.enabled {
		return
	}
	poll := n.Poll
	if poll <= 0 {
		poll = DefaultNotifyPoll
	}
	if n.watchdog > 0 {
		poll = min(poll, n.watchdog/4)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	n.Tick(h, time.Now())
	for {
		select {
		case <-ctx.Done():
			n.send(daemon.SdNotifyStopping + "\nSTATUS=stopping: handing over if leader")
			return
		case now := <-t.C:
			n.Tick(h, now)
		}
	}
}

// Tick sends what is due at now (a time.Now reading, compared on its
// monotonic clock): READY=1 the first time h is ready, WATCHDOG=1 when h is
// healthy and a third of the watchdog timeout has passed since the last
// ping, and STATUS= when the known leader changed. Run calls it; tests may
// drive it directly.
func (n *SystemdNotifier) Tick(h Health, now time.Time) {
	var msg string
	if !n.ready && h.Ready() {
		n.ready = true
		msg = daemon.SdNotifyReady + "\n"
	}
	if n.watchdog > 0 && h.Healthy() && (n.lastPing.IsZero() || now.Sub(n.lastPing) >= n.watchdog/3) {
		n.lastPing = now
		msg += daemon.SdNotifyWatchdog + "\n"
	}
	if st := statusLine(h); st != n.status {
		n.status = st
		msg += "STATUS=" + st + "\n"
	}
	if msg != "" {
		n.send(msg)
	}
}

// statusLine describes h for systemctl status.
func statusLine(h Health) string {
	switch {
	case !h.Healthy():
		return "election loop not running"
	case !h.Ready():
		return "joining the group: no leader known yet"
	}
	if lr, ok := h.(leaderReporter); ok {
		return fmt.Sprintf("leader %s, term %d", lr.Leader(), lr.Term())
	}
	return "joined the group"
}

func (n *SystemdNotifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("sd_notify failed", "err", err)
	}
}
