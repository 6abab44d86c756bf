package duty

import (
	"fmt"
	"io"
	"time"
)

// Environment variables a duty command and the hooks find set.
const (
	EnvElectionID    = "EDGE_ELECTION_ID"    // this agent's member id
	EnvElectionGroup = "EDGE_ELECTION_GROUP" // the election group
	EnvElectionTerm  = "EDGE_ELECTION_TERM"  // the term of this leadership: the fencing token
	EnvElectionEvent = "EDGE_ELECTION_EVENT" // hooks only: "elected" or "demoted"
)

// Defaults of Config.
const (
	DefaultHookTimeout       = 10 * time.Second
	DefaultMaxFailures       = 5
	DefaultFailureWindow     = time.Minute
	DefaultRestartBackoff    = 250 * time.Millisecond
	DefaultMaxRestartBackoff = 30 * time.Second
)

// Config describes a leader duty run as OS processes: a long-running
// Command that runs only while this agent leads, and one-shot hooks.
type Config struct {
	// Command is the program and its arguments (no shell; use
	// ["sh", "-c", "..."] for one). It is started once this agent leads,
	// under a duty guard (Linux; see GuardPath) that holds every process
	// it starts; it is stopped (SIGTERM to all of them, then SIGKILL after
	// Grace) when this agent stops leading, and killed at the latest one
	// tick before the lease runs out, even if the agent is stuck, frozen or
	// dead. When the command exits, whatever it left running is killed. It
	// is restarted with backoff if it exits while this agent leads, but
	// never again in a term whose lease deadline killed it. Empty: no
	// command, hooks only (and VIP, if set).
	Command []string
	// VIP lists virtual IP addresses held while this agent leads, by the
	// same guard and on the same deadlines as Command (Linux; the agent
	// needs CAP_NET_ADMIN and CAP_NET_RAW). With Command, both run
	// together: the addresses are added before the command starts and
	// removed first when it stops; a restart of the command re-adds them.
	// Without Command, holding them is the duty.
	VIP []VIP
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

// Timing is the part of the agent's configuration a duty is checked
// against and paced by.
type Timing struct {
	Tick, Heartbeat, Lease time.Duration
}

// Timed is a configuration that sets a duty's timing (agent.Config).
type Timed interface {
	DutyTiming() Timing
}

// Validate fills defaults and checks c against the timing of the agent's
// validated configuration ac (Grace must be shorter than its lease). The
// error names the offending key as the config file spells it (leader.grace,
// ...).
func (c *Config) Validate(ac Timed) error {
	t := ac.DutyTiming()
	for key, argv := range map[string][]string{"leader.command": c.Command, "leader.on_elected": c.OnElected, "leader.on_demoted": c.OnDemoted} {
		if len(argv) > 0 && argv[0] == "" {
			return fmt.Errorf("%s: the program (first element) is empty", key)
		}
	}
	if err := checkDutyEnv(c.Env); err != nil {
		return err
	}
	if err := checkVIPs(c.VIP); err != nil {
		return err
	}
	if c.GuardPath == "" {
		c.GuardPath = defaultGuardPath
	}
	if c.Grace == 0 {
		c.Grace = max(t.Tick, t.Lease-t.Heartbeat-t.Tick)
	}
	if c.Grace < 0 || c.Grace >= t.Lease {
		return fmt.Errorf("leader.grace: %s must be positive and shorter than the lease %s, so that the duty never outlives leadership", c.Grace, t.Lease)
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
